"""Verify: a release directory or a campaign, offline. The last screen of every recipe."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from trace_tui.tui.messages import VerifyReady
from trace_tui.tui.views import VerifyView, verify_view
from trace_tui.tui.widgets.checklist import Checklist, ResultTable


class VerifyScreen(Screen):
    TITLE = "Verify"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("f5", "run_verify", "Re-verify"),
        Binding("w", "toggle_wide", "Full hashes"),
        Binding("ctrl+t", "toggle_kind", "Release/campaign"),
        Binding("1", "tab('tab-checklist')", "Checklist", show=False),
        Binding("2", "tab('tab-tables')", "Tables", show=False),
        Binding("3", "tab('tab-scores')", "Scores", show=False),
    ]

    def __init__(self, kind: str = "release", path: Path | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.path = path
        self.view: VerifyView | None = None
        self.wide = False

    def compose(self) -> ComposeResult:
        yield Static("trace-tui · Verify", id="verify-title", classes="title")
        with Horizontal(id="verify-target"):
            yield Static(self._kind_label(), id="verify-kind")
            yield Input(str(self.path) if self.path else "", placeholder="directory (enter: verify)", id="verify-path")
        yield Static("", id="verify-summary")
        with TabbedContent(id="verify-tabs"):
            with TabPane("1 Checklist", id="tab-checklist"):
                yield Checklist(id="verify-checklist", cursor_type="row", zebra_stripes=True)
            with TabPane("2 Tables", id="tab-tables"):
                yield VerticalScroll(id="verify-tables")
            with TabPane("3 Scores", id="tab-scores"):
                yield VerticalScroll(id="verify-scores")
        yield Footer()

    def on_mount(self) -> None:
        if self.path is not None:
            self.action_run_verify()
        else:
            self.query_one("#verify-path", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "verify-path" and event.value.strip():
            self.path = Path(event.value.strip()).expanduser()
            self.action_run_verify()

    def _kind_label(self) -> str:
        return f"{self.kind} (ctrl+t)"

    def action_toggle_kind(self) -> None:
        self.kind = "campaign" if self.kind == "release" else "release"
        self.query_one("#verify-kind", Static).update(self._kind_label())

    def action_run_verify(self) -> None:
        if self.path is None:
            self.notify("type a directory first")
            return
        self.query_one("#verify-summary", Static).update(f"Verifying the {self.kind}…")
        self._verify(self.kind, self.path)

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self, kind: str, path: Path) -> None:
        backends = self.app.backends
        try:
            fn = backends.verify_campaign if kind == "campaign" else backends.verify_release
            view = verify_view(fn(path), target=f"{kind} {path.name}")
        except Exception as exc:  # noqa: BLE001 - one line on screen
            line = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
            self.post_message(VerifyReady(None, error=line))
            return
        self.post_message(VerifyReady(view))

    def on_verify_ready(self, message: VerifyReady) -> None:
        summary = self.query_one("#verify-summary", Static)
        if message.error:
            summary.update(Text(f"Cannot verify: {message.error}", style="bold red"))
            return
        self.view = view = message.view
        verdict = Text("VERIFIED" if view.ok else "FAILED", style="bold green" if view.ok else "bold red")
        summary.update(Text.assemble(verdict, f" · {view.target} · {view.summary}"))
        self.query_one(Checklist).show(view.checks, wide=self.wide)
        self._fill("#verify-tables", view.tables, "no tables")
        self._fill("#verify-scores", view.comparisons, "no campaign scores (verify a campaign to compare)")
        self.query_one(Checklist).focus()

    def _fill(self, selector: str, tables, empty: str) -> None:
        box = self.query_one(selector, VerticalScroll)
        box.remove_children()
        if not tables:
            box.mount(Static(empty))
            return
        for t in tables:
            box.mount(Static(Text(t.title, style="bold")))
            table = ResultTable(cursor_type="row", zebra_stripes=True, classes="result-table")
            box.mount(table)
            table.show(t)

    def action_tab(self, pane: str) -> None:
        self.query_one("#verify-tabs", TabbedContent).active = pane

    def action_toggle_wide(self) -> None:
        self.wide = not self.wide
        if self.view is not None:
            self.query_one(Checklist).show(self.view.checks, wide=self.wide)

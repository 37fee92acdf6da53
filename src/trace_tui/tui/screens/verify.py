"""Verify: a release directory or a campaign, offline. The last screen of every recipe."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane
from textual.widgets._tabbed_content import ContentTabs

from trace_tui.tui.messages import VerifyReady
from trace_tui.tui.views import VerifyView, again, attestation_view, campaign_scores_table, verify_view
from trace_tui.tui.widgets.checklist import Checklist, ResultTable
from trace_tui.tui.widgets.table import LiteralTable

if TYPE_CHECKING:
    from trace_tui.engine.events import SliceState
    from trace_tui.tui.backends import Backends


def campaign_events(backends: Backends, path: Path) -> list[SliceState]:
    """The campaign's slice states (scores included), read-only; none when it cannot be read."""
    try:
        return backends.open_campaign(Path(path)).events
    except Exception:  # noqa: BLE001 - the checklist says what is wrong with the campaign
        return []


class VerifyScreen(Screen):
    TITLE = "Verify"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("f5", "run_verify", "Re-verify"),
        Binding("w", "toggle_wide", "Full hashes"),
        # shown beside the kind ("release (ctrl+t)"), so the footer stays whole at 80 columns
        Binding("ctrl+t", "toggle_kind", "Release/campaign", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("1", "tab('tab-checklist')", "Checklist", show=False),
        Binding("2", "tab('tab-tables')", "Tables", show=False),
        Binding("3", "tab('tab-scores')", "Scores", show=False),
        # While the path box has the keys, ? and q are typed into it: the footer names the keys that still
        # do help and quit (only then; see check_action).
        Binding("f1", "typing_help", "Help"),
        Binding("ctrl+q", "typing_quit", "Quit", priority=True),  # shown in place of the app's own (hidden)
    ]

    def __init__(self, kind: str = "release", path: Path | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.path = path
        self.view: VerifyView | None = None
        self.wide = False
        self.paths: dict[str, Path | None] = {kind: path}
        self.filter_text = ""
        # verifications finished on this screen of each directory (f5 says it checked that one again; a first
        # verification of another directory is not "again"), and of the one shown now
        self.checked_per: dict[tuple[str, str], int] = {}
        self.checked = 0
        self.typed = False  # the last verification was asked for by enter in the path box

    def compose(self) -> ComposeResult:
        yield Static("trace-tui · Verify", id="verify-title", classes="title", markup=False)
        with Horizontal(id="verify-target"):
            yield Static(self._kind_label(), id="verify-kind", markup=False)
            yield Input(str(self.path) if self.path else "", placeholder="directory, or an attestation file (enter: verify)", id="verify-path")
        yield Static("", id="verify-summary", markup=False)
        with TabbedContent(id="verify-tabs"):
            with TabPane("1 Checklist", id="tab-checklist"):
                yield Input(placeholder="filter the checklist (status, item, detail; esc clears)", id="verify-filter",
                            classes="hidden")
                yield Checklist(id="verify-checklist", cursor_type="row", zebra_stripes=True)
            with TabPane("2 Tables", id="tab-tables"):
                yield VerticalScroll(id="verify-tables")
            with TabPane("3 Scores", id="tab-scores"):
                yield VerticalScroll(id="verify-scores")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        typing = isinstance(self.focused, Input)
        if action in ("typing_help", "typing_quit"):
            return typing
        if action == "filter":
            return not typing  # `/` is typed into the box (a path), not a filter
        return True

    def on_descendant_focus(self, event) -> None:
        self.refresh_bindings()  # the footer's help and quit keys follow the focus (see BINDINGS)

    def on_descendant_blur(self, event) -> None:
        self.refresh_bindings()

    def action_typing_help(self) -> None:
        self.app.action_help()

    async def action_typing_quit(self) -> None:
        await self.app.action_quit()

    def on_mount(self) -> None:
        if self.path is not None:
            self.action_run_verify()
        else:
            self.query_one("#verify-path", Input).focus()

    def action_filter(self) -> None:
        self.action_tab("tab-checklist")
        box = self.query_one("#verify-filter", Input)
        box.remove_class("hidden")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "verify-filter":
            self.filter_text = event.value.strip().lower()
            self._show_checks()

    def _show_checks(self) -> None:
        if self.view is None:
            return
        wanted = self.filter_text
        checks = tuple(c for c in self.view.checks
                       if not wanted or wanted in f"{c.status} {c.item} {c.detail}".lower())
        self.query_one(Checklist).show(checks, wide=self.wide)

    def on_key(self, event) -> None:
        box = self.query_one("#verify-filter", Input)
        if event.key == "escape" and not box.has_class("hidden"):
            event.stop()
            event.prevent_default()
            box.value = ""
            box.add_class("hidden")
            self.filter_text = ""
            self._show_checks()
            self.query_one(Checklist).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "verify-filter":
            self.query_one(Checklist).focus()
            return
        if event.input.id == "verify-path" and event.value.strip():
            self.path = Path(event.value.strip()).expanduser()
            self.typed = True
            self.action_run_verify()

    def _kind_label(self) -> str:
        return f"{self.kind} (ctrl+t)"

    def action_toggle_kind(self) -> None:
        """Release <-> campaign: each kind keeps its own directory, so f5 never verifies one as the other."""
        self.paths[self.kind] = self.path
        self.kind = "campaign" if self.kind == "release" else "release"
        self.path = self.paths.get(self.kind)
        if self.path is None and self.kind == "release":
            self.path = self.app.backends.release_dir
        self.query_one("#verify-kind", Static).update(self._kind_label())
        box = self.query_one("#verify-path", Input)
        box.value = str(self.path) if self.path else ""
        self.view = None
        self.query_one("#verify-summary", Static).update(
            f"{self.kind}: enter (in the path box) or f5 verifies it" if self.path else f"type a {self.kind} directory")
        self.query_one(Checklist).clear(columns=True)
        # nor the other kind's tables and scores under this kind's line
        self._fill("#verify-tables", (), "no tables")
        self._fill("#verify-scores", (), "nothing verified")
        if self.path is None:
            box.focus()

    def action_run_verify(self) -> None:
        self.typed = self.typed and self.query_one("#verify-path", Input).has_focus
        if self.path is None:
            self.notify("type a directory first")
            return
        self.query_one("#verify-summary", Static).update(f"Verifying the {self.kind}…")
        self._verify(self.kind, self.path)

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self, kind: str, path: Path) -> None:
        backends = self.app.backends
        try:
            if path.is_file() and backends.verify_attestation is not None:
                # a file is an attestation (a summary or a step's provenance): its signature and what it says
                self.post_message(VerifyReady(attestation_view(backends.verify_attestation(path),
                                                               target=f"attestation {path}")))
                return
            if kind == "release":
                # What `trace-tui verify --release-dir DIR` says (exit 2) about a directory that is not a
                # release, word for word: a checklist of "absent" files would only say it less plainly.
                from trace_tui.verify.release import release_dir_arg

                release_dir_arg(str(path))
            fn = backends.verify_campaign if kind == "campaign" else backends.verify_release
            result = fn(path)
            extra = []
            if kind == "campaign":
                scores = campaign_scores_table(campaign_events(backends, path))
                extra = [scores] if scores is not None else []
            view = verify_view(result, target=f"{kind} {path}", extra_tables=extra)
        except Exception as exc:  # noqa: BLE001 - one line on screen
            line = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
            self.post_message(VerifyReady(None, error=line))
            return
        self.post_message(VerifyReady(view))

    def on_verify_ready(self, message: VerifyReady) -> None:
        summary = self.query_one("#verify-summary", Static)
        if message.error:
            summary.update(Text(f"Cannot verify: {message.error}", style="bold red"))
            # No checklist or tables of an earlier directory under a line about this one.
            self.view = None
            self.query_one(Checklist).clear(columns=True)
            self._fill("#verify-tables", (), "no tables")
            self._fill("#verify-scores", (), "nothing verified")
            return
        self.view = view = message.view
        key = (self.kind, view.target)
        self.checked = self.checked_per[key] = self.checked_per.get(key, 0) + 1
        verdict = Text("VERIFIED" if view.ok else "FAILED", style="bold green" if view.ok else "bold red")
        again_text = again("verified", self.checked)
        summary.update(Text.assemble(verdict, f" · {view.target} · {view.summary}{again_text}"))
        self._show_checks()
        self._fill("#verify-tables", view.tables, "no tables")
        self._fill("#verify-scores", view.comparisons,
                   "no published values to compare this campaign's scores with (its scores are under Tables; "
                   "`trace-tui verify --campaign DIR --release-dir DIR` compares them)"
                   if self.kind == "campaign" else "no campaign scores (verify a campaign to compare)")
        if not self.typed:
            self.query_one(Checklist).focus()
        # else typed and entered: the box keeps the keys (another path, or this one again; tab: the checklist)

    def _fill(self, selector: str, tables, empty: str) -> None:
        box = self.query_one(selector, VerticalScroll)
        box.remove_children()
        if not tables:
            box.mount(Static(empty, markup=False))
            return
        for t in tables:
            box.mount(Static(Text(t.title, style="bold"), markup=False))
            table = ResultTable(cursor_type="row", zebra_stripes=True, classes="result-table")
            box.mount(table)
            table.show(t)

    def action_tab(self, pane: str) -> None:
        """Show a tab and give the keys to its first table: focus left in the hidden tab would bring it back
        (a pane whose widget gets the focus is made the active one), so 1/2/3 did nothing from a table."""
        tabs = self.query_one("#verify-tabs", TabbedContent)
        shown = [w for w in tabs.get_pane(pane).query("*") if w.focusable and w.display]
        target = next((w for w in shown if isinstance(w, LiteralTable)), shown[0] if shown else None)
        if target is not None:
            target.focus()
        elif self.focused is not None and not isinstance(self.focused, Input):
            self.query_one(ContentTabs).focus()  # nothing to focus in the tab: the tab row keeps the keys
        tabs.active = pane

    def action_toggle_wide(self) -> None:
        self.wide = not self.wide
        self._show_checks()

"""Preview: the recipe's configuration-only preview (starts nothing, writes nothing)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from trace_tui.tui.messages import PreviewReady, SchedulerChanged
from trace_tui.tui.views import preview_lines


class PreviewScreen(Screen):
    TITLE = "Preview"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("enter", "steps", "Walk the steps"),
        Binding("w", "app.choose_scheduler", "Where it runs"),
    ]

    def __init__(self, recipe_name: str) -> None:
        super().__init__()
        self.recipe_name = recipe_name
        self.resolved = None
        self.checks: list = []
        self._body: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(f"trace-tui · Preview · {self.recipe_name}", classes="title", markup=False)
        with VerticalScroll(id="preview-body"):
            yield Static("Resolving…", id="preview-text", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._resolve()

    @work(thread=True, exclusive=True, group="preview")
    def _resolve(self) -> None:
        backends = self.app.backends
        try:
            recipe = backends.load_recipe(self.recipe_name)
            resolved = backends.resolve_recipe(recipe)
            report = self.app.hardware_report
            lines = preview_lines(backends.preview(resolved, report))
            checks = backends.check_recipe(resolved, report) if report is not None else []
        except Exception as exc:  # noqa: BLE001 - a bad recipe is one line on screen
            line = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
            self.post_message(PreviewReady(None, [], [], error=line))
            return
        self.post_message(PreviewReady(resolved, lines, list(checks)))

    def on_preview_ready(self, message: PreviewReady) -> None:
        text = self.query_one("#preview-text", Static)
        if message.error:
            text.update(f"Cannot preview {self.recipe_name}: {message.error}")
            return
        self.resolved, self.checks = message.resolved, message.checks
        recipe = message.resolved.recipe
        head = [] if message.preview_lines else [recipe.title, recipe.purpose.strip(), ""]
        self._body = head + message.preview_lines
        self._show()

    def _show(self) -> None:
        recipe = self.resolved.recipe
        where = self.app.scheduler
        # said only when it is not this machine (w: change), as the command line's --scheduler slurm
        foot = ["", *([f"runs on: {where.describe()} · w: change"] if where.slurm else []),
                f"{len(recipe.steps)} step(s) · enter: walk the steps · esc: back"]
        self.query_one("#preview-text", Static).update("\n".join(self._body + foot))

    def on_scheduler_changed(self, message: SchedulerChanged) -> None:
        if self.resolved is not None:
            self._show()

    def action_steps(self) -> None:
        if self.resolved is not None:
            self.app.walk_steps(self.resolved, self.checks)

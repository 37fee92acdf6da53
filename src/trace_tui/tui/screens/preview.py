"""Preview: the recipe's configuration-only preview (starts nothing, writes nothing)."""

from __future__ import annotations

import shlex

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from trace_tui.tui.dialogs.options import OptionsScreen
from trace_tui.tui.messages import PreviewReady, SchedulerChanged
from trace_tui.tui.views import preview_lines, previewed_recipe


class PreviewScreen(Screen):
    TITLE = "Preview"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("enter", "steps", "Walk the steps"),
        # said on the command line below (the footer stays whole at 80 columns)
        Binding("w", "app.choose_scheduler", "Where it runs", show=False),
        Binding("o", "options", "Options"),
        Binding("y", "copy", "Copy command", show=False),  # said on the command line itself
    ]

    def __init__(self, recipe_name: str) -> None:
        super().__init__()
        self.recipe_name = recipe_name
        self.resolved = None
        self.checks: list = []
        self._body: list[str] = []
        self.all_models: list[str] = []  # the recipe's own selection, before any narrowing (the Options lists)
        self.all_seeds: list[int] = []
        # a configuration-only recipe (eval-preview) is this preview of another recipe (full): nothing to run
        self.previews: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"trace-tui · Preview · {self.recipe_name}", classes="title", markup=False)
        with VerticalScroll(id="preview-body"):
            yield Static("Resolving…", id="preview-text", markup=False)
        yield Static("", id="preview-command", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._show_command()
        self._resolve(self.app.choices)

    def _command(self) -> str:
        choices = self.app.choices
        if self.previews is None:
            return choices.command()
        # `trace-tui preview` takes the selection, the runtime and the campaign folder (not --offline or Slurm)
        flags = [f for f in choices.replace(recipe=self.previews, offline=False, scheduler="none").argv()]
        return shlex.join(["trace-tui", "preview", *flags])

    def _show_command(self) -> None:
        keys = "o: options · y: copy" if self.previews else "o: options · w: where it runs · y: copy"
        self.query_one("#preview-command", Static).update(f"same as: {self._command()}  · {keys}")

    @work(thread=True, exclusive=True, group="preview")
    def _resolve(self, choices) -> None:
        backends = self.app.backends
        try:
            recipe = backends.load_recipe(self.recipe_name)
            self.previews = previewed_recipe(recipe)
            if self.previews is not None:
                recipe = backends.load_recipe(self.previews)
            whole = backends.resolve_recipe(recipe)
            self.all_models = [str(m.id) for m in whole.models]
            self.all_seeds = [int(s) for s in whole.seeds]
            narrowing = choices.narrowing()
            resolved = backends.resolve_recipe(recipe, **narrowing) if any(narrowing.values()) else whole
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
        self.refresh_bindings()
        self._show_command()
        recipe = message.resolved.recipe
        head = [] if message.preview_lines else [recipe.title, recipe.purpose.strip(), ""]
        if self.previews is not None:
            head = [f"{self.recipe_name} is this preview of {self.previews}: configuration only, it starts nothing "
                    "and writes nothing (no campaign, no run).", "", *head]
        self._body = head + message.preview_lines
        self._show()

    def _show(self) -> None:
        recipe = self.resolved.recipe
        where = self.app.scheduler
        if self.previews is not None:
            foot = ["", f"nothing to run: {self.recipe_name} is this preview · "
                        f"`trace-tui --recipe {self.previews}` runs it · esc: back"]
            self.query_one("#preview-text", Static).update("\n".join(self._body + foot))
            return
        # said only when it is not this machine (w: change), as the command line's --scheduler slurm
        foot = ["", *([f"runs on: {where.describe()} · w: change"] if where.slurm else []),
                f"{len(recipe.steps)} step(s) · enter: walk the steps · esc: back"]
        self.query_one("#preview-text", Static).update("\n".join(self._body + foot))

    def on_scheduler_changed(self, message: SchedulerChanged) -> None:
        self._show_command()
        if self.resolved is not None:
            self._show()

    def action_steps(self) -> None:
        if self.resolved is not None and self.previews is None:
            self.app.walk_steps(self.resolved, self.checks)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Walking the steps and the options need the resolved recipe: no hint before it is there."""
        if action == "steps":
            return self.resolved is not None and self.previews is None
        if action == "options":
            return self.resolved is not None
        return True

    def action_copy(self) -> None:
        command = self._command()
        self.app.copy_to_clipboard(command)
        self.notify(f"copied: {command}", markup=False, timeout=3)

    def action_options(self) -> None:
        if self.resolved is None:
            return

        def chosen(choices) -> None:
            if choices is None:
                return
            self.app.set_choices(choices)
            self._show_command()
            self.resolved = None
            self.refresh_bindings()
            self.query_one("#preview-text", Static).update("Resolving with the new options…")
            self._resolve(choices)

        self.app.push_screen(OptionsScreen(self.app.choices, self.all_models, self.all_seeds), chosen)

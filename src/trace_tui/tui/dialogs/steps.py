"""Steps: one step at a time — what it will do, its image, its requirements; confirm or skip."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.views import StepView, step_views


class StepsScreen(Screen):
    TITLE = "Steps"
    BINDINGS = [
        Binding("y", "confirm", "Confirm"),
        Binding("enter", "confirm", "Confirm", show=False),
        Binding("s", "skip", "Skip"),
        Binding("b", "previous", "Previous", show=False),  # said in the screen's key line (footer whole at 80)
        Binding("a", "confirm_all", "Confirm all"),
        Binding("w", "app.choose_scheduler", "Where it runs", show=False),  # in the preview and ? (help)
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, resolved, checks=None) -> None:
        super().__init__()
        self.resolved = resolved
        self.checks = list(checks) if checks is not None else None
        self.steps: list[StepView] = step_views(resolved.recipe, checks)
        self.index = 0
        self.decisions: dict[str, bool] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="steps-title", classes="title", markup=False)
        with VerticalScroll(id="steps-body"):
            yield Static("", id="step-text", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        # where this run goes (the campaign's runtime, as the run screen and a headless run take it): under
        # the local runtime a step is a process with the host's Python, never an image
        runtime = self.app.backends.runtime_label(self.app.backends.campaign_dir_for(self.resolved))
        self.steps = step_views(self.resolved.recipe, self.checks, runtime=runtime)
        self.show()

    def show(self) -> None:
        step = self.steps[self.index]
        self.query_one("#steps-title", Static).update(
            f"trace-tui · {self.resolved.recipe.name} · step {self.index + 1}/{len(self.steps)}: {step.id}")
        lines = [step.title, "", step.description or "(no description)", "",
                 f"runs in: {step.image} · stage: {step.stage}" + (" · one job per slice" if step.per_slice else "")]
        lines += ["needs: " + "; ".join(step.needs)]
        if step.check:
            lines.append(f"on this machine: {step.check}")
            lines += [f"  {note}" for note in step.reasons if note != step.check]
        if step.verdict == "fail":
            lines += ["", "This step cannot run on this machine: confirming it asks again, and the run is "
                      "refused before anything is created."]
        decided = self.decisions.get(step.id)
        if decided is not None:
            lines.append("decided: " + ("confirm" if decided else "skip"))
        lines += ["", "y/enter: confirm · s: skip · a: confirm all · b: previous · w: where it runs · esc: back"]
        self.query_one("#step-text", Static).update("\n".join(lines))

    def _decide(self, run: bool) -> None:
        self.decisions[self.steps[self.index].id] = run
        if self.index + 1 < len(self.steps):
            self.index += 1
            self.show()
        else:
            self._start()

    def action_confirm(self) -> None:
        step = self.steps[self.index]
        if step.verdict == "fail":
            self._warn([step], lambda: self._decide(True))
            return
        self._decide(True)

    def _warn(self, failing: list[StepView], then) -> None:
        """A step whose verdict here is fail: say why in full and ask before confirming it."""
        reasons = "\n".join(f"{s.id}: {s.check}" for s in failing)

        def answer(yes: bool | None) -> None:
            if yes:
                then()

        self.app.push_screen(ConfirmScreen(
            f"This machine cannot run:\n{reasons}\nConfirm anyway? The run will be refused before anything "
            "is created.", yes="Confirm anyway", no="Go back"), answer)

    def action_skip(self) -> None:
        self._decide(False)

    def action_previous(self) -> None:
        if self.index > 0:
            self.index -= 1
            self.show()

    def action_confirm_all(self) -> None:
        failing = [s for s in self.steps[self.index:] if s.verdict == "fail"]
        if failing:
            self._warn(failing, self._confirm_rest)
            return
        self._confirm_rest()

    def _confirm_rest(self) -> None:
        for step in self.steps[self.index:]:
            self.decisions[step.id] = True
        self._start()

    def _start(self) -> None:
        skip = frozenset(s for s, run in self.decisions.items() if not run)
        self.app.start_run(self.resolved, skip=skip)

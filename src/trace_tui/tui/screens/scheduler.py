"""Where the run goes: this machine, or Slurm with the site's options (the command line's --scheduler flags)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, RadioButton, RadioSet, Static

from trace_tui.tui.cluster_backend import SchedulerChoice

# (field, label, placeholder): the order of the command line's flags
FIELDS = (
    ("partition", "--partition", "the site's default"),
    ("account", "--account", "the site's default"),
    ("gpus_per_node", "--gpus-per-node", "what the recipe needs"),
    ("time", "--time", "e.g. 2-00:00:00"),
    ("max_parallel", "--max-parallel", "no limit"),
)


class KindChoice(RadioSet):
    """This machine or Slurm: enter takes the highlighted one and uses the form, as its button says
    ("Use it (enter)"); space only chooses."""

    BINDINGS = [Binding("enter", "choose_and_use", "Use it", show=False)]

    def action_choose_and_use(self) -> None:
        if self._selected is not None:
            button = self._nodes[self._selected]
            if isinstance(button, RadioButton):
                button.value = True
        if isinstance(self.screen, SchedulerScreen):
            self.screen.use()


class SchedulerScreen(ModalScreen[SchedulerChoice | None]):
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("ctrl+s", "use", "Use it"),
    ]

    def __init__(self, choice: SchedulerChoice | None = None) -> None:
        super().__init__()
        self.choice = choice or SchedulerChoice()

    def compose(self) -> ComposeResult:
        with Vertical(id="scheduler-box"):
            yield Static("Where should the run go?", markup=False)
            with KindChoice(id="scheduler-kind"):
                yield RadioButton("this machine", value=not self.choice.slurm, id="scheduler-none")
                yield RadioButton("Slurm: one job array task per shard", value=self.choice.slurm,
                                  id="scheduler-slurm")
            for name, label, hint in FIELDS:
                value = getattr(self.choice, name)
                with Horizontal(classes="scheduler-field"):
                    yield Label(label)
                    yield Input("" if value is None else str(value), placeholder=hint, id=f"scheduler-{name}")
            yield Static("", id="scheduler-error", markup=False)
            with Horizontal(id="scheduler-buttons"):
                yield Button("Use it (enter)", id="ok", variant="primary")
                yield Button("Back (esc)", id="back")
        yield Footer()  # this dialog's keys, not the screen's underneath

    def chosen(self) -> SchedulerChoice:
        kind = "slurm" if self.query_one("#scheduler-slurm", RadioButton).value else "none"
        texts = {name: self.query_one(f"#scheduler-{name}", Input).value for name, _, _ in FIELDS}
        texts["shard_by"] = self.choice.shard_by or ""  # chosen on the command line (--shard-by), kept
        return SchedulerChoice.from_form(kind, **texts)

    def action_use(self) -> None:
        self.use()

    def use(self) -> None:
        try:
            choice = self.chosen()
        except Exception as exc:  # noqa: BLE001 - the field's one-line error, shown in the form
            self.query_one("#scheduler-error", Static).update(exc.line() if hasattr(exc, "line") else str(exc))
            return
        self.dismiss(choice)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.use()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self.use()
        else:
            self.dismiss(None)

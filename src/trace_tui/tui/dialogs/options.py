"""Run options: what `--models`, `--seeds`, `--runtime`, `--offline` and `--scheduler` choose, chosen here.

The line at the bottom is the equivalent command; it changes as the choices do, and `y` copies it.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Footer, Input, RadioButton, RadioSet, SelectionList, Static

from trace_tui.common.runtimes import RUNTIME_NAMES
from trace_tui.tui.choices import SLURM_FIELDS, RunChoices, parse_int

RUNTIMES = (("auto", None), *((name, name) for name in RUNTIME_NAMES))
SLURM_HINTS = {"partition": "partition", "account": "account", "gpus_per_node": "GPUs per node (number)",
               "time": "time limit, e.g. 2-00:00:00", "max_parallel": "at most K shards at once (number)"}


class OptionsScreen(ModalScreen[RunChoices | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "apply", "Apply"),
        Binding("y", "copy", "Copy command"),
    ]

    def __init__(self, choices: RunChoices, models: list[str], seeds: list[int]) -> None:
        super().__init__()
        self.initial = choices
        self.choices = choices
        self.models = models
        self.seeds = seeds
        self.error = ""

    def compose(self) -> ComposeResult:
        c = self.initial
        with Vertical(id="options-box"):
            yield Static(f"Run options · {c.recipe} (the flags of `trace-tui --recipe {c.recipe}`)",
                         id="options-title", markup=False)
            with VerticalScroll(id="options-body"):
                with Horizontal(id="options-lists"):
                    yield SelectionList[str](*[(m, m, not c.models or m in c.models) for m in self.models],
                                             id="options-models")
                    yield SelectionList[int](*[(str(s), s, not c.seeds or s in c.seeds) for s in self.seeds],
                                             id="options-seeds")
                with Horizontal(id="options-switches"):
                    # "runtime" and "where" are the sets' titles: the buttons' words stay whole in a narrow box
                    with RadioSet(id="options-runtime"):
                        for label, value in RUNTIMES:
                            yield RadioButton(label, value=c.runtime == value)
                    with Vertical(id="options-where"):  # beside the runtimes' longer list
                        with RadioSet(id="options-scheduler"):
                            yield RadioButton("run here", value=c.scheduler == "none")
                            yield RadioButton("Slurm", value=c.scheduler == "slurm")
                        yield Checkbox("offline", value=c.offline, id="options-offline")
                with Vertical(id="options-slurm"):
                    for name in SLURM_FIELDS:
                        value = getattr(c, name)
                        yield Input("" if value is None else str(value), placeholder=f"--{name.replace('_', '-')}: "
                                    f"{SLURM_HINTS[name]}", id=f"options-{name.replace('_', '-')}")
            yield Static("", id="options-command", markup=False)
            with Horizontal(id="options-buttons"):
                yield Button("Apply (ctrl+s)", variant="primary", id="options-apply")
                yield Button("Cancel (esc)", id="options-cancel")
        yield Footer()  # this dialog's keys, not the screen's underneath

    def on_mount(self) -> None:
        self.query_one("#options-models", SelectionList).border_title = "models (space toggles)"
        self.query_one("#options-seeds", SelectionList).border_title = "seeds"
        self.query_one("#options-runtime", RadioSet).border_title = "runtime"
        self.query_one("#options-scheduler", RadioSet).border_title = "where"
        self.query_one("#options-models", SelectionList).focus()
        self._update()

    # -- the choices from the widgets ------------------------------------------------------
    def read(self) -> RunChoices:
        models = list(self.query_one("#options-models", SelectionList).selected)
        seeds = list(self.query_one("#options-seeds", SelectionList).selected)
        runtime = RUNTIMES[max(0, self.query_one("#options-runtime", RadioSet).pressed_index)][1]
        slurm = self.query_one("#options-scheduler", RadioSet).pressed_index == 1
        values: dict[str, Any] = {}
        for name in SLURM_FIELDS:
            text = self.query_one(f"#options-{name.replace('_', '-')}", Input).value
            flag = f"--{name.replace('_', '-')}"
            values[name] = parse_int(text, flag) if name in ("gpus_per_node", "max_parallel") else (text.strip()
                                                                                                  or None)
        # every model (or seed) chosen is the recipe's own selection: no flag
        return self.initial.replace(
            models=() if len(models) == len(self.models) else tuple(m for m in self.models if m in models),
            seeds=() if len(seeds) == len(self.seeds) else tuple(s for s in self.seeds if s in seeds),
            runtime=runtime, offline=self.query_one("#options-offline", Checkbox).value,
            scheduler="slurm" if slurm else "none", **(values if slurm else dict.fromkeys(SLURM_FIELDS)))

    def _update(self) -> None:
        try:
            self.choices = self.read()
            self.error = ""
        except ValueError as exc:
            self.error = str(exc)
        empty = [what for what, sel in (("model", "#options-models"), ("seed", "#options-seeds"))
                 if not self.query_one(sel, SelectionList).selected]
        if empty and not self.error:
            self.error = f"choose at least one {' and one '.join(empty)}"
        slurm = self.choices.scheduler == "slurm"
        self.query_one("#options-slurm").display = slurm
        line = f"same as: {self.choices.command()}  (y: copy)"
        self.query_one("#options-command", Static).update(f"{self.error}\n{line}" if self.error else line)

    def on_selection_list_selected_changed(self, event) -> None:
        self._update()

    def on_radio_set_changed(self, event) -> None:
        self._update()

    def on_checkbox_changed(self, event) -> None:
        self._update()

    def on_input_changed(self, event) -> None:
        self._update()

    # -- actions -----------------------------------------------------------------------
    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.choices.command())
        self.notify(f"copied: {self.choices.command()}", markup=False, timeout=3)

    def action_apply(self) -> None:
        self._update()
        if self.error:
            self.notify(self.error, severity="error", markup=False)
            return
        self.dismiss(self.choices)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "options-apply":
            self.action_apply()
        else:
            self.action_cancel()

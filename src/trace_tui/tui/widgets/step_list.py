"""The recipe's steps with their states."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from trace_tui.tui.progress import ProgressModel

STATE_STYLE = {
    "pending": "dim", "skipped": "dim italic", "running": "bold yellow",
    "completed": "green", "failed": "bold red", "cancelled": "magenta",
}
# Short labels so that the state fits beside the step id in a narrow column.
STATE_LABEL = {"completed": "done", "cancelled": "stopped"}
STATE_MARK = {
    "pending": "·", "skipped": "−", "running": "▶", "completed": "✓", "failed": "✗", "cancelled": "■",
}


class StepList(DataTable):
    def __init__(self, model: ProgressModel, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.model = model
        self._shown: dict[str, tuple] = {}

    def on_mount(self) -> None:
        self.add_column("step", key="step")
        self.add_column("state", key="state")
        self.redraw()

    def redraw(self) -> None:
        for step in self.model.steps.values():
            progress = f" {step.done}/{step.total}" if step.total and step.state == "running" else ""
            label = STATE_LABEL.get(step.state, step.state)
            state = Text(f"{STATE_MARK.get(step.state, '?')} {label}{progress}",
                         style=STATE_STYLE.get(step.state, ""))
            sig = (step.state, progress)
            if step.id not in self._shown:
                self.add_row(step.id, state, key=step.id)
            elif self._shown[step.id] != sig:
                self.update_cell(step.id, "state", state)
            self._shown[step.id] = sig

    @property
    def selected_step(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key
        return key.value

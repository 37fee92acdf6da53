"""The recipe's steps with their states."""

from __future__ import annotations

from rich.text import Text

from trace_tui.tui.progress import ProgressModel
from trace_tui.tui.widgets.table import LiteralTable

STATE_STYLE = {
    "pending": "dim", "skipped": "dim italic", "running": "bold yellow",
    "completed": "green", "failed": "bold red", "cancelled": "magenta",
}
# Short labels so that the state fits beside the step id in a narrow column.
STATE_LABEL = {"completed": "done", "cancelled": "stopped"}
STATE_MARK = {
    "pending": "·", "skipped": "−", "running": "▶", "completed": "✓", "failed": "✗", "cancelled": "■",
}


class StepList(LiteralTable):
    # The steps stay in recipe order; `/` on the run screen filters the grid.
    filterable = False
    sortable = False

    def __init__(self, model: ProgressModel, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.model = model
        self._shown: dict[str, tuple] = {}
        self.images: dict[str, str] = {}  # step id -> its image and the hardware check's word on it

    def on_mount(self) -> None:
        self.add_column("step", key="step")
        self.add_column("state", key="state")
        self.redraw()

    def redraw(self) -> None:
        if not self.columns:
            # Not mounted yet (a run's first events can come first): rows added now would not size the
            # columns added later, and on_mount draws the steps anyway.
            return
        cells = {}
        for step in self.model.steps.values():
            progress = f" {step.done}/{step.total}" if step.total and step.state == "running" else ""
            label = STATE_LABEL.get(step.state, step.state)
            if step.message == "already complete":
                label = step.message
            cells[step.id] = Text(f"{STATE_MARK.get(step.state, '?')} {label}{progress}",
                                  style=STATE_STYLE.get(step.state, ""))
        sigs = {k: (v.plain, str(v.style)) for k, v in cells.items()}
        if sigs == self._shown:
            return
        if list(sigs) == list(self._shown) and all(len(sigs[k][0]) <= len(self._shown[k][0]) for k in sigs):
            for key, cell in cells.items():
                if sigs[key] != self._shown[key]:
                    self.update_cell(key, "state", cell)
        else:
            # A new step or a longer label: rebuild the few rows, so the column is as wide as its widest label.
            cursor = self.cursor_row
            self.clear()
            for key, cell in cells.items():
                self.add_row(key, cell, key=key)
            if self.row_count:
                self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)
        self._shown = sigs

    def row_details(self, row: int) -> list[tuple[str, str]]:
        steps = list(self.model.steps.values())
        if row >= len(steps):
            return []
        s = steps[row]
        fields = [("step", s.id), ("title", s.title), ("state", s.state)]
        if s.id in self.images:
            fields.append(("image", self.images[s.id]))
        if s.message:
            fields.append(("message", s.message))
        if s.total:
            fields.append(("rows", f"{s.done}/{s.total}"))
        return fields

    @property
    def selected_step(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key
        return key.value

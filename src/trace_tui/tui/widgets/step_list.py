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
STATE_LABEL = {"completed": "done"}  # "cancelled" as the status line, `trace-tui status` and the log say it
STATE_MARK = {
    "pending": "·", "skipped": "−", "running": "▶", "completed": "✓", "failed": "✗", "cancelled": "■",
}


class StepList(LiteralTable):
    # The steps stay in recipe order; `/` on the run screen filters the grid.
    filterable = False
    sortable = False
    # the state wraps where the run screen cannot give the list its whole width: never "✓ already comple"
    wrap_column = 1
    MIN_WRAP_WIDTH = 10
    reserve_scrollbar = False  # a few steps rarely need one: its room only once it shows

    def __init__(self, model: ProgressModel, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.model = model
        self._shown: dict[str, tuple] = {}
        self.images: dict[str, str] = {}  # step id -> its image and the hardware check's word on it
        # a narrow terminal: one column, the state as its mark before the step (i: the state in words)
        self.compact = False

    def on_mount(self) -> None:
        self._add_columns()
        self.redraw()

    def _add_columns(self) -> None:
        self.add_column("step", key="step")
        if not self.compact:
            self.add_column("state", key="state")

    def set_compact(self, compact: bool) -> None:
        if compact == self.compact or not self.columns:
            self.compact = compact
            return
        self.compact = compact
        cursor = self.cursor_row
        self.clear(columns=True)
        self._add_columns()
        self._shown = {}
        self.redraw()
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)

    def state_label(self, step) -> str:
        progress = f" {step.done}/{step.total}" if step.total and step.state == "running" else ""
        label = step.message if step.message == "already complete" else STATE_LABEL.get(step.state, step.state)
        return f"{STATE_MARK.get(step.state, '?')} {label}{progress}"

    def natural_width(self) -> int:
        """The width that shows every step and state on one line (borders and padding included)."""
        steps = list(self.model.steps.values())
        ids = max([len("step"), *(len(s.id) for s in steps)])
        frame = 2 + self.scrollbar_room()  # the borders either side, and the scrollbar if it shows
        if self.compact:
            return ids + 2 + 2 * self.cell_padding + frame
        states = max([len("state"), *(len(self.state_label(s)) for s in steps)])
        return ids + states + 4 * self.cell_padding + frame

    def redraw(self) -> None:
        if not self.columns:
            # Not mounted yet (a run's first events can come first): rows added now would not size the
            # columns added later, and on_mount draws the steps anyway.
            return
        cells = {}
        for step in self.model.steps.values():
            style = STATE_STYLE.get(step.state, "")
            label = self.state_label(step)
            if self.compact:
                cells[step.id] = (Text(f"{label.split(' ', 1)[0]} {step.id}", style=style),)
            else:
                cells[step.id] = (step.id, Text(label, style=style))
        sigs = {k: tuple((c.plain, str(c.style)) if isinstance(c, Text) else c for c in v) for k, v in cells.items()}
        if sigs == self._shown:
            return
        # Rebuild the few rows (the wrapped column is laid out again anyway): the column is as wide as its widest label.
        cursor = self.cursor_row
        self.clear()
        for key, row in cells.items():
            self.add_row(*row, key=key)
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

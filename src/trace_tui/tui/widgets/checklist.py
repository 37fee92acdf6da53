"""Verification results: the checklist and tables with differences highlighted."""

from __future__ import annotations

from rich.text import Text

from trace_tui.tui.views import CheckRow, TableView
from trace_tui.tui.widgets.table import LiteralTable

STATUS_STYLE = {"passed": "green", "ok": "green", "failed": "bold red", "absent": "yellow", "skipped": "dim"}


def short_hash(h: str, width: int = 12) -> str:
    return h[:width] + "…" if len(h) > width + 1 else h


class Checklist(LiteralTable):
    filterable = False  # the verify screen's own box filters the checklist (status, item, detail)
    noun = "checks"
    # item and detail share the width the short hashes leave and wrap, the detail (a sentence) the larger
    # share: at 80 columns a detail given what the path left over took 11 columns and a row 9 lines
    wrap_column = (1, 4)
    wrap_weights = {1: 2, 4: 3}
    MIN_WRAP_WIDTH = 6
    # from a 100-column terminal on (the table itself is a column or two narrower) the path keeps 40 columns
    # (a release file such as rlvr/evaluation/trace_eval/results.json whole, not folded mid-name) and the
    # detail the rest; below, the detail's larger share comes first
    PATH_FLOOR_FROM, PATH_FLOOR = 96, 40
    wide = False

    def wrap_floors(self) -> dict[int, int]:
        return {1: self.PATH_FLOOR} if self.size.width >= self.PATH_FLOOR_FROM and not self.wide else {}

    def show(self, checks: tuple[CheckRow, ...], wide: bool = False) -> None:
        """Short hashes; `wide`: full hashes, which then take the larger shares of the width (no terminal
        holds two 64-digit hashes and a sentence on one line: given what was left, they folded over 7 lines
        at 80 columns)."""
        self.clear(columns=True)
        self.wide = wide
        self.rows_shown = checks
        self.details = lambda i: [("status", checks[i].status), ("item", checks[i].item),
                                  ("expected", checks[i].expected), ("actual", checks[i].actual),
                                  ("detail", checks[i].detail)]
        if wide:
            self.wrap_column, self.wrap_weights = (1, 2, 3, 4), {1: 2, 2: 3, 3: 3, 4: 3}
        else:
            self.wrap_column, self.wrap_weights = type(self).wrap_column, type(self).wrap_weights
        self.add_columns("status", "item", "expected", "actual", "detail")
        for c in checks:
            style = STATUS_STYLE.get(c.status, "")
            actual_style = "bold red" if c.status == "failed" else ""
            hashes = (c.expected, Text(c.actual, style=actual_style)) if wide else (
                short_hash(c.expected), Text(short_hash(c.actual), style=actual_style))
            self.add_row(Text(c.status, style=style), c.item, *hashes, c.detail)


class ResultTable(LiteralTable):
    # the prose columns (an aggregate's name, a detail) wrap to the width the others leave: at 120 columns
    # the aggregates' detail was cut; columns of numbers keep one line each and scroll sideways if need be
    MIN_WRAP_WIDTH = 12
    PROSE_WIDTH = 24

    def show(self, table: TableView) -> None:
        self.clear(columns=True)
        self.wrap_column = tuple(c for c in range(len(table.columns))
                                 if any(len(row[c]) > self.PROSE_WIDTH and " " in row[c]
                                        for row in table.rows if c < len(row))) or None
        self.add_columns(*table.columns)
        for r, row in enumerate(table.rows):
            cells = [Text(v, style="bold reverse red") if (r, c) in table.differs else v for c, v in enumerate(row)]
            self.add_row(*cells)

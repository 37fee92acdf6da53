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
    # item, expected, actual and detail share the width and wrap: an empty hash column keeps only its
    # title's width, and full hashes (w) fold instead of pushing actual and detail off the screen
    wrap_column = (1, 2, 3, 4)
    wrap_weights = {1: 3}  # the file's path wraps last: it is what a reader looks for
    MIN_WRAP_WIDTH = 6

    def show(self, checks: tuple[CheckRow, ...], wide: bool = False) -> None:
        self.clear(columns=True)
        self.rows_shown = checks
        self.details = lambda i: [("status", checks[i].status), ("item", checks[i].item),
                                  ("expected", checks[i].expected), ("actual", checks[i].actual),
                                  ("detail", checks[i].detail)]
        self.add_columns("status", "item", "expected", "actual", "detail")
        width = 64 if wide else 12
        for c in checks:
            style = STATUS_STYLE.get(c.status, "")
            actual_style = "bold red" if c.status == "failed" else ""
            self.add_row(Text(c.status, style=style), c.item, short_hash(c.expected, width),
                         Text(short_hash(c.actual, width), style=actual_style), c.detail)


class ResultTable(LiteralTable):
    def show(self, table: TableView) -> None:
        self.clear(columns=True)
        self.add_columns(*table.columns)
        for r, row in enumerate(table.rows):
            cells = [Text(v, style="bold reverse red") if (r, c) in table.differs else v for c, v in enumerate(row)]
            self.add_row(*cells)

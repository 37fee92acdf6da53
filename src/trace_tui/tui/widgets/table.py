"""The one table of the UI: strings shown literally, vim/less keys, and the row under the cursor in full.

Data (recipe titles, reasons, paths, model ids, log lines) often holds brackets such as
``[Visual Math]`` or ``[TRACE]``; a plain DataTable reads them as Rich markup and drops them.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable


def literal(value: Any) -> Any:
    """Strings as Text (never markup); Text and other renderables unchanged."""
    return Text(value) if isinstance(value, str) else value


class LiteralTable(DataTable):
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
        Binding("i", "details", "Details", show=False),
    ]
    # row index -> (label, value) pairs for the details view; None: each column's full text
    details: Any = None
    details_title: str = ""

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        return super().add_row(*(literal(c) for c in cells), **kwargs)

    def add_column(self, label: Any, **kwargs: Any) -> Any:
        return super().add_column(literal(label), **kwargs)

    def add_columns(self, *labels: Any) -> Any:
        return [self.add_column(label) for label in labels]

    def update_cell(self, row_key: Any, column_key: Any, value: Any, *, update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, literal(value), update_width=update_width)

    def row_details(self, row: int) -> list[tuple[str, str]]:
        if self.details is not None:
            return list(self.details(row))
        labels = [c.label.plain for c in self.ordered_columns]
        return list(zip(labels, self.row_text(row)))

    def action_details(self) -> None:
        if not self.row_count:
            return
        from trace_tui.tui.screens.detail import DetailScreen

        fields = self.row_details(self.cursor_row)
        title = self.details_title or (fields[0][1] if fields else "")
        self.app.push_screen(DetailScreen(title, fields))

    def row_text(self, row: int | None = None) -> list[str]:
        """The plain text of every cell of a row (the cursor's by default)."""
        row = self.cursor_row if row is None else row
        if not self.row_count or row < 0 or row >= self.row_count:
            return []
        return [c.plain if isinstance(c, Text) else str(c) for c in self.get_row_at(row)]

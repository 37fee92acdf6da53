"""The one table of the UI: strings shown literally, vim/less keys, `/` filter, `s` sort, and the row in full.

A table may name a ``wrap_column`` (or several): those columns share the width the others leave and
their text wraps onto as many lines as it needs (rows grow), so nothing in them is ever cut. A column
whose text fits keeps its width; the last wrap column takes what is left over.

Data (recipe titles, reasons, paths, model ids, log lines) often holds brackets such as
``[Visual Math]`` or ``[TRACE]``; a plain DataTable reads them as Rich markup and drops them.

Every row added is kept (``source``), so the filter and the sort re-show rows from it, and the
details view (``i``) finds a row's data by the order it was added, whatever is shown now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import DataTable, Input
from textual.widgets.data_table import ColumnKey, RowKey

from trace_tui.tui.dialogs.detail import DetailScreen

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

# Sorting puts what needs attention first: failures, then what is absent or missing, then the rest.
ATTENTION = {"failed": 0, "fail": 0, "cannot run": 0, "error": 0, "unreadable": 0, "outside": 0,
             "absent": 1, "missing": 1, "not built": 1, "partial": 1}


def literal(value: object) -> object:
    """Strings as Text (never markup); Text and other renderables unchanged."""
    return Text(value) if isinstance(value, str) else value


def plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def attention(cells: tuple[Any, ...]) -> int:
    """0 for a row with a failure in any cell, 1 for one with something absent, else 2."""
    return min((ATTENTION.get(plain(c).strip().lower(), 2) for c in cells), default=2)


def matches(cells: tuple[Any, ...], wanted: str) -> bool:
    return not wanted or wanted in " ".join(plain(c) for c in cells).lower()


def arrange(rows: list[tuple[tuple[Any, ...], Any]], wanted: str, sort_column: int | None,
            reverse: bool = False) -> list[tuple[tuple[Any, ...], Any]]:
    """The rows to show: those matching the filter; sorted by a column with failures and absent first."""
    kept = [r for r in rows if matches(r[0], wanted)]
    if sort_column is None:
        return kept
    def column(r: tuple[tuple[Any, ...], Any]) -> str:
        cells = r[0]
        return plain(cells[sort_column]).lower() if sort_column < len(cells) else ""
    kept.sort(key=column, reverse=reverse)
    return sorted(kept, key=lambda r: attention(r[0]))  # stable: within each rank the column order holds


class TableFilter(Input):
    """The `/` box of one table: typing filters it, enter returns to it, esc clears and closes."""

    BINDINGS = [Binding("escape", "close", "Clear filter")]

    def __init__(self, table: LiteralTable) -> None:
        super().__init__(placeholder=f"filter {table.noun} (enter: back to the table · esc: clear)",
                         classes="table-filter")
        self.table = table

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def action_close(self) -> None:
        self.table.close_filter()


class LiteralTable(DataTable):
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First", show=False),
        Binding("G", "scroll_bottom", "Last", show=False),
        Binding("i", "details", "Details", show=False),
        Binding("slash", "filter", "Filter", show=False),
        Binding("s", "sort", "Sort", show=False),
    ]
    # row index -> (label, value) pairs for the details view; None: each column's full text
    details: Any = None
    details_title: str = ""
    # where a screen filters or orders a table itself (the run grid, the step list), these are off
    filterable: bool = True
    sortable: bool = True
    noun: str = "rows"
    # this column (or these) wrap to the width the other columns leave (None: no column wraps)
    wrap_column: int | tuple[int, ...] | None = None
    # column -> its share of the width the wrap columns divide (default 1): a table gives its key column
    # (a path) more, so that it wraps last
    wrap_weights: dict[int, int] = {}
    MIN_WRAP_WIDTH = 16
    # False: the wrap columns use the scrollbar's room until it shows (a table refitted often, or short)
    reserve_scrollbar = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source: list[tuple[tuple[Any, ...], Any]] = []  # (cells, key) of every row added, in order
        self._index: dict[Any, int] = {}  # row key -> its place in source
        self._labels: list[Text] = []
        self._arranging = False
        self._resort_pending = False
        self.filter_text = ""
        self.sort_column: int | None = None
        self.filter_box: TableFilter | None = None
        self._wrap_width = 0
        self._widths_may_grow = False

    # -- rows ----------------------------------------------------------------------
    def add_row(self, *cells: object, **kwargs: Any) -> RowKey | str:
        cells = tuple(literal(c) for c in cells)
        if self._arranging:
            return super().add_row(*cells, **kwargs)
        key = kwargs.pop("key", None)
        key = f"#{len(self.source)}" if key is None else key
        self._index[key] = len(self.source)
        self.source.append((cells, key))
        if self.sort_column is not None or self.wrap_columns:
            self._schedule_arrange()
        if not matches(cells, self.filter_text):
            return key
        self._widths_may_grow = True
        return super().add_row(*cells, key=key, **kwargs)

    def clear(self, columns: bool = False) -> Self:
        if not self._arranging:
            self.source, self._index = [], {}
            if columns:
                self._labels, self.sort_column = [], None
        return super().clear(columns=columns)

    def add_column(self, label: str | Text, **kwargs: Any) -> ColumnKey:
        self._labels.append(literal(label))
        return super().add_column(literal(label), **kwargs)

    def add_columns(self, *labels: str | Text) -> list[ColumnKey]:
        return [self.add_column(label) for label in labels]

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: object, *,
                    update_width: bool = False) -> None:
        value = literal(value)
        # The row as added is updated too: the filter, the sort, wrapping and row_text re-show rows from it.
        column = self.get_column_index(column_key)
        index = self._index.get(getattr(row_key, "value", row_key))
        if index is not None:
            cells, key = self.source[index]
            if column < len(cells):
                self.source[index] = ((*cells[:column], value, *cells[column + 1:]), key)
        if column in self.wrap_columns:
            self._schedule_arrange()
        elif row_key in self.rows:  # a row the filter hides now shows its new value when it comes back
            self._widths_may_grow |= update_width
            super().update_cell(row_key, column_key, value, update_width=update_width)

    # -- column widths -------------------------------------------------------------------
    def on_idle(self) -> None:
        """DataTable widens a column on its idle, after the cells that need it; a frame drawn before
        that kept those cells cut to the old width in its render cache, and the widening did not drop
        it ("✓ alre" for "✓ already complete"). This handler runs just before DataTable's own: the
        widths now are compared with the widths after it, and a change redraws every cell."""
        if not self._widths_may_grow:
            return
        self._widths_may_grow = False
        before = [c.get_render_width(self) for c in self.columns.values()]

        def redraw_if_widened() -> None:
            if [c.get_render_width(self) for c in self.columns.values()] != before:
                self.notify_style_update()  # drops the cached cells and refreshes

        self.call_later(redraw_if_widened)

    # -- filter and sort ---------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Off: the key goes on to the screen (which may filter this table its own way).
        if action == "filter":
            return self.filterable
        if action == "sort":
            return self.sortable
        return True

    def _arrange(self) -> None:
        """Show the source rows through the filter and the sort (the cursor stays on its row where it can)."""
        self._resort_pending = False
        current = self._cursor_key()
        self._arranging = True
        try:
            super().clear(columns=False)
            widths = self._fit_wrap_columns()
            for cells, key in arrange(self.source, self.filter_text, self.sort_column):
                if not widths:
                    super().add_row(*cells, key=key)
                else:
                    lines = self._wrapped(cells, widths)
                    super().add_row(*lines, key=key, height=max(1, *(len(plain(c).split("\n")) for c in lines)))
        finally:
            self._arranging = False
        marked = False
        for i, column in enumerate(self.ordered_columns):
            if i < len(self._labels):
                mark = " ↓" if i == self.sort_column else ""
                label = Text.assemble(self._labels[i], mark)
                marked |= label.plain != column.label.plain
                column.label = label
                # room for the mark: a column as narrow as its title ("recipe") would cut it off
                column.content_width = max(column.content_width, cell_len(label.plain))
        if current is not None and current in self.rows:
            self.move_cursor(row=self.get_row_index(current), animate=False)
        if marked:
            # The header is drawn from a cache that a new label does not drop: the sort mark (↓) showed only
            # where a column's width changed as well.
            self._require_update_dimensions = True
            self.notify_style_update()
        self.refresh()

    def _schedule_arrange(self) -> None:
        """Re-arrange once after this batch of changes (sorted or wrapped tables), not once per change."""
        if not self._resort_pending:
            self._resort_pending = True
            self.call_after_refresh(self._arrange)

    @property
    def wrap_columns(self) -> tuple[int, ...]:
        wc = self.wrap_column
        return () if wc is None else (wc,) if isinstance(wc, int) else tuple(wc)

    def _widest(self, i: int) -> int:
        """The widest line of column i (its label included), as added."""
        widest = max((cell_len(line) for cells, _ in self.source if i < len(cells)
                      for line in plain(cells[i]).split("\n")), default=0)
        return max(widest, cell_len(self._labels[i].plain) if i < len(self._labels) else 0)

    def _fit_wrap_columns(self) -> dict[int, int]:
        """The wrap columns' widths now (the others sized to their widest cell), or {}: no wrapping yet.

        The width the other columns leave is shared: a column narrower than its share keeps its own width
        and leaves the rest to the others; the last wrap column takes whatever is left over."""
        columns = self.ordered_columns
        wrap = [i for i in self.wrap_columns if i < len(columns)]
        if not wrap or not self.size.width:
            return {}
        pad = 2 * self.cell_padding
        others = sum(pad + self._widest(i) for i in range(len(columns)) if i not in wrap)
        left = self.size.width - others - pad * len(wrap) - self.scrollbar_room()
        widths: dict[int, int] = {}
        todo = sorted(wrap, key=self._widest)

        def share(i: int) -> int:
            return left * self.wrap_weights.get(i, 1) // sum(self.wrap_weights.get(j, 1) for j in todo)

        while todo:
            narrow = [i for i in todo if self._widest(i) <= share(i)]
            if not narrow:
                break
            for i in narrow:
                widths[i] = self._widest(i)
            left -= sum(widths[i] for i in narrow)
            todo = [i for i in todo if i not in narrow]
        if todo:  # these wrap: they share what is left, by weight
            shares = {i: share(i) for i in todo}
            spare = left - sum(shares.values())
            for n, i in enumerate(sorted(todo)):
                widths[i] = max(self.MIN_WRAP_WIDTH, shares[i] + (spare if n == 0 else 0))
            # a column with a floor (wrap_floors) takes up to it from the others' shares, never below their minimum
            for i, floor in self.wrap_floors().items():
                need = min(floor, self._widest(i)) - widths.get(i, floor)
                for j in sorted((j for j in todo if j != i), key=lambda j: -widths[j]):
                    give = min(need, widths[j] - self.MIN_WRAP_WIDTH)
                    if give > 0:
                        widths[j] -= give
                        widths[i] += give
                        need -= give
        else:  # every one fits: the last takes the rest of the width
            widths[wrap[-1]] += max(0, left)
        for i, width in widths.items():
            columns[i].auto_width, columns[i].width = False, width
        self._wrap_width = self.size.width
        return widths

    def wrap_floors(self) -> dict[int, int]:
        """Wrap columns that should keep at least so many columns at the table's present width (none here)."""
        return {}

    def scrollbar_room(self) -> int:
        """The columns kept for the vertical scrollbar when the wrap columns are fitted: kept even before it
        shows (rows that grow by wrapping may bring it), unless the table says it is refitted when it shows."""
        return self.styles.scrollbar_size_vertical if self.reserve_scrollbar else self.scrollbar_size_vertical

    def _wrapped(self, cells: tuple[Any, ...], widths: dict[int, int]) -> tuple[Any, ...]:
        out = list(cells)
        for i, width in widths.items():
            if i >= len(out):
                continue
            cell = out[i] if isinstance(out[i], Text) else Text(plain(out[i]))
            if cell_len(cell.plain) <= width and "\n" not in cell.plain:
                continue  # fits: kept as it is (and as fast)
            out[i] = Text("\n").join(cell.wrap(self.app.console, width, overflow="fold"))
        return tuple(out)

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap_columns and self.source and event.size.width != self._wrap_width:
            self.call_after_refresh(self._arrange)

    def _cursor_key(self) -> RowKey | None:
        if not self.row_count or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        return self.coordinate_to_cell_key((self.cursor_row, 0)).row_key

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._arrange()

    def action_filter(self) -> None:
        if self.filter_box is None:
            self.filter_box = TableFilter(self)
            self.parent.mount(self.filter_box, before=self)
        self.filter_box.focus()

    def close_filter(self) -> None:
        if self.filter_box is not None:
            self.filter_box.remove()
            self.filter_box = None
        if self.filter_text:
            self.set_filter("")
        self.focus()

    @property
    def filter_open(self) -> bool:
        return self.filter_box is not None

    def action_sort(self) -> None:
        """Each press sorts by the next column (failures and absent first); after the last, the order as given."""
        columns = len(self.ordered_columns)
        if not columns:
            return
        nxt = 0 if self.sort_column is None else self.sort_column + 1
        self.sort_column = nxt if nxt < columns else None
        self._arrange()
        label = "as given" if self.sort_column is None else f"by {self._labels[self.sort_column].plain}, failures first"
        self.notify(f"sorted {label}", timeout=2)

    # -- details -------------------------------------------------------------------------
    def source_index(self, row: int) -> int:
        """The place in `source` (the order rows were added) of the row shown at `row`."""
        key = self.coordinate_to_cell_key((row, 0)).row_key
        return self._index.get(key.value, row)

    def row_details(self, row: int) -> list[tuple[str, str]]:
        if self.details is not None:
            return list(self.details(self.source_index(row)))
        labels = [c.plain for c in self._labels] or [c.label.plain for c in self.ordered_columns]
        return list(zip(labels, self.row_text(row)))

    def action_details(self) -> None:
        if not self.row_count:
            return

        fields = self.row_details(self.cursor_row)
        title = self.details_title or (fields[0][1] if fields else "")
        self.app.push_screen(DetailScreen(title, fields))

    def selected_key(self) -> str | None:
        key = self._cursor_key()
        return None if key is None else key.value

    def row_text(self, row: int | None = None) -> list[str]:
        """The plain text of every cell of a row (the cursor's by default), as added: not as wrapped."""
        row = self.cursor_row if row is None else row
        if not self.row_count or row < 0 or row >= self.row_count:
            return []
        index = self.source_index(row)
        if 0 <= index < len(self.source):
            return [plain(c) for c in self.source[index][0]]
        return [plain(c) for c in self.get_row_at(row)]

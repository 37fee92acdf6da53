"""The live progress grid: benchmarks (or task groups) as rows, seeds as columns, one tab per model."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static, Tab, Tabs

from trace_tui.tui.progress import ProgressModel, SliceProgress, format_duration, format_rate, group_rate
from trace_tui.tui.widgets.table import LiteralTable

BAR_WIDTH = 6
FILTER_SHOWN = 24  # characters of the filter the summary line repeats


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    if total <= 0:
        return "·" * width
    filled = min(width, int(width * done / total))
    return "█" * filled + "░" * (width - filled)


def cell_text(cell: SliceProgress | None) -> Text:
    if cell is None:
        return Text("")
    style = "green" if cell.complete else ("" if cell.done else "dim")
    score = f" {cell.score:.2f}" if cell.score is not None else ""  # the slice's score, as `status` shows it
    return Text(f"{bar(cell.done, cell.total)} {cell.done}/{cell.total}{score}", style=style)


def _tab_id(index: int) -> str:
    return f"model-{index}"


class ProgressGrid(Vertical):
    """Redrawn from a ProgressModel by the run screen's timer, never per event."""

    def __init__(self, model: ProgressModel, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.filter_text = ""
        self._models_shown: list[str] = []
        self._structure_seen = -1
        self._current: str | None = None
        self._rows: list[str] = []
        self._seeds: list[int | None] = []
        self.redraws = 0
        self._scored = False  # the seed columns' titles say "score" (a scoring step's cells carry one)
        self.selected: tuple[str, str, int | None] | None = None  # the slice under the cursor

    def compose(self) -> ComposeResult:
        yield Tabs(id="grid-tabs")
        yield Input(placeholder="filter benchmarks (esc clears)", id="grid-filter", classes="hidden")
        yield LiteralTable(id="grid-table", cursor_type="cell", zebra_stripes=True)
        yield Static("", id="grid-summary", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#grid-table", LiteralTable)
        table.details = lambda _row: self.cell_details()
        table.filterable = table.sortable = False  # the grid has its own filter (/) and a fixed benchmark order
        table.fixed_columns = 1  # the benchmark names stay when the seeds scroll sideways

    def cell_details(self) -> list[tuple[str, str]]:
        """The slice under the cursor in full (the grid's cells are short)."""
        cell = self.model.slices.get(self.selected) if self.selected else None
        if cell is None:
            return []
        seed = "—" if cell.seed is None else str(cell.seed)
        rows = [("model", cell.model), ("benchmark", cell.benchmark), ("seed", seed),
                ("step", self.model.grid_step or ""), ("state", cell.state), ("rows", f"{cell.done:,}/{cell.total:,}")]
        if cell.phase:
            rows.append(("phase", cell.phase))
        if cell.score is not None:
            rows.append(("score", f"{cell.score:.4f}"))
        rows += [("rate", format_rate(cell.rate())), ("ETA", format_duration(cell.eta()))]
        return rows

    # -- filter ------------------------------------------------------------------
    def open_filter(self) -> None:
        box = self.query_one("#grid-filter", Input)
        box.remove_class("hidden")
        box.focus()

    def close_filter(self) -> None:
        box = self.query_one("#grid-filter", Input)
        box.value = ""
        box.add_class("hidden")
        self.set_filter("")
        self.query_one("#grid-table", DataTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "grid-filter":
            self.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "grid-filter":
            self.query_one("#grid-table", DataTable).focus()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._structure_seen = -1  # rebuild rows
        self.redraw(force=True)

    # -- tabs --------------------------------------------------------------------
    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        if event.tab is None or event.tab.id is None:
            return
        index = int(event.tab.id.split("-")[1])
        if index < len(self._models_shown) and self._models_shown[index] != self._current:
            self._current = self._models_shown[index]
            self._structure_seen = -1
            self.redraw(force=True)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        event.stop()
        column = event.cell_key.column_key.value or ""
        bench = event.cell_key.row_key.value
        if self._current is None or bench is None or not column.startswith("seed-"):
            self.selected = None
        else:
            raw = column[len("seed-"):]
            self.selected = (self._current, bench, None if raw == "None" else int(raw))
        self._summary()

    @property
    def current_model(self) -> str | None:
        return self._current

    # -- drawing -----------------------------------------------------------------
    def redraw(self, force: bool = False) -> None:
        model = self.model
        if not force and not model.dirty:
            return
        self.redraws += 1
        tabs = self.query_one(Tabs)
        for name in model.models[len(self._models_shown):]:
            tabs.add_tab(Tab(Text(name), id=_tab_id(len(self._models_shown))))
            self._models_shown.append(name)
        if self._current is None and model.models:
            self._current = model.models[0]
        table = self.query_one("#grid-table", DataTable)
        current = self._current
        if current is None:
            self._summary()
            return
        if self._structure_seen != model.structure_version:
            # Rows, columns, the model tab or the step shown changed: redraw every cell (rare).
            self._structure_seen = model.structure_version
            rows = [b for b in model.benchmarks.get(current, []) if self.filter_text in b.lower()]
            seeds = list(model.seeds.get(current, []))
            cursor = table.cursor_coordinate
            table.clear(columns=True)
            table.add_column("benchmark", key="benchmark")
            self._scored = self._has_scores(current)
            for seed in seeds:
                title = "seed " + ("—" if seed is None else str(seed))
                # a scoring step's cells end with the slice's score: its column says so
                table.add_column(f"{title}: rows, score" if self._scored else title, key=f"seed-{seed}")
            table.add_column("rows/s", key="rate")
            table.add_column("ETA", key="eta")
            for bench in rows:
                table.add_row(*self._row_cells(current, bench, seeds), key=bench)
            if rows:
                table.cursor_coordinate = table.validate_cursor_coordinate(cursor)
            self._rows, self._seeds = rows, seeds
            model.dirty_slices = {k for k in model.dirty_slices if k[0] != current}
        dirty = [k for k in model.dirty_slices if k[0] == current]
        if dirty and not self._scored and self._has_scores(current):
            self._structure_seen = -1  # the first score: the columns' titles say what the number is
            self.redraw(force=True)
            return
        for key in dirty:
            _, bench, seed = key
            if bench in self._rows and seed in self._seeds:
                table.update_cell(bench, f"seed-{seed}", cell_text(model.slices.get(key)), update_width=True)
                rate, eta = self._row_rate(current, bench)
                table.update_cell(bench, "rate", rate, update_width=True)
                table.update_cell(bench, "eta", eta, update_width=True)
        model.dirty_slices = {k for k in model.dirty_slices if k[0] != current}
        self._summary()

    def _has_scores(self, model_name: str) -> bool:
        return any(c.score is not None for c in self.model.slices.values() if c.model == model_name)

    def _row_rate(self, model_name: str, bench: str) -> tuple[str, str]:
        cells = [c for (m, b, _), c in self.model.slices.items() if m == model_name and b == bench]
        rate = group_rate(cells)  # a row's seeds may run one after another: never the sum of their rates
        left = sum(max(c.total - c.done, 0) for c in cells)
        eta = None if rate is None else left / rate
        if cells and left == 0:
            return format_rate(rate), "done"
        return format_rate(rate), format_duration(eta)

    def _row_cells(self, model_name: str, bench: str, seeds: list[int | None]) -> list:
        cells: list = [bench]
        for seed in seeds:
            cells.append(cell_text(self.model.slices.get((model_name, bench, seed))))
        cells.extend(self._row_rate(model_name, bench))
        return cells

    def _summary(self) -> None:
        model = self.model
        done, total = model.totals()
        step = f"{model.grid_step}: " if model.grid_step else ""
        text = (f"{step}{done:,}/{total:,} rows · {format_rate(model.overall_rate())} · "
                f"ETA {format_duration(model.overall_eta())}")
        if self._current is not None and len(model.models) > 1:
            mdone, mtotal = model.totals(self._current)
            text += f"   ·   {self._current}: {mdone:,}/{mtotal:,}"
        cell = self.model.slices.get(self.selected) if self.selected else None
        if cell is not None:
            seed = "—" if cell.seed is None else cell.seed
            text += (f"   ·   {cell.benchmark} seed {seed}: {cell.done:,}/{cell.total:,} "
                     f"{format_rate(cell.rate())} ETA {format_duration(cell.eta())}")
        if self.filter_text:
            # the box above the grid holds the whole text: a long one is named by its start and its length
            shown = self.filter_text if len(self.filter_text) <= FILTER_SHOWN else (
                f"{self.filter_text[:FILTER_SHOWN]}… ({len(self.filter_text):,} characters)")
            if self._current is not None and not self._rows:
                text += "   ·   no benchmark matches (esc clears the filter)"
            text += f"   ·   filter: {shown}"
        self.query_one("#grid-summary", Static).update(text)
        model.dirty = False

"""Hardware: the first screen. GPUs, Docker and images, store, disk, and which recipes can run here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from trace_tui.tui.messages import HardwareReady, RuntimesFound
from trace_tui.tui.views import (
    VERDICT_STYLE,
    HardwareView,
    RecipeRow,
    again,
    hardware_view,
    recipe_details,
    recipe_reason_cell,
    recipe_row,
    store_text,
)
from trace_tui.tui.widgets.table import LiteralTable

if TYPE_CHECKING:
    from trace_tui.hardware import HardwareReport
    from trace_tui.tui.backends import Backends

NO_GPU_RECIPES = ("verify", "eval-preview", "demo")


def probe_all(backends: Backends) -> tuple[HardwareView, HardwareReport | None, str]:
    """The hardware report and each recipe's verdict on it (runs in a thread)."""
    # Imported here, in the probe's thread: the screen's first paint needs none of the views.

    try:
        report = backends.hardware_probe()
    except Exception as exc:  # noqa: BLE001 - shown on screen, the UI keeps working
        return HardwareView(gpu_message=f"hardware probe failed: {exc}"), None, str(exc)
    rows: list[RecipeRow] = []
    try:
        names = backends.known_recipes()
    except Exception:  # noqa: BLE001
        names = []
    for name in names:
        title = name
        try:
            recipe = backends.load_recipe(name)
            title = recipe.title
            checks = backends.check_recipe(backends.resolve_recipe(recipe), report)
            rows.append(recipe_row(name, title, checks))
        except Exception as exc:  # noqa: BLE001 - a recipe that cannot be checked says why
            rows.append(RecipeRow(name=name, title=title, verdict="fail", reasons=(str(exc),)))
    return hardware_view(report, rows), report, ""


def system_text(view: HardwareView) -> str:
    """Docker, the images, the store and the disk. Images in the same state are one line: without an image
    lock all three said the same sentence (three times at 80x24, where it is most of the screen)."""
    lines = [f"Docker: {view.docker}   GPU runtime: {view.gpu_runtime}"]
    by_status: dict[str, list[str]] = {}
    for stage, status in view.images:
        by_status.setdefault(status, []).append(stage)
    for status, stages in by_status.items():
        if len(stages) == 1:
            lines.append(f"  image {stages[0]:<10} {status}")
        else:
            lines.append(f"  images {', '.join(stages)}: {status}")
    lines.append(f"Store: {view.store}   Disk: {view.free_disk}")
    return "\n".join(lines)


class HardwareScreen(Screen):
    TITLE = "Hardware"
    BINDINGS = [
        Binding("enter", "open_recipe", "Preview recipe", show=False),
        # r and f5 are named in the recipes' title line (and in ? help): the footer has room for e and d
        # and stays whole, q Quit included, at 80 columns
        Binding("r", "recipes", "Recipes", show=False),
        Binding("c", "app.show_campaigns", "Campaigns"),
        Binding("v", "verify", "Verify"),
        Binding("e", "recipe('eval-preview')", "Eval preview"),
        Binding("d", "recipe('demo')", "Demo"),
        Binding("f5", "probe", "Re-check", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.view: HardwareView | None = None
        self.probes = 0  # probes finished (f5 says it checked again)

    def compose(self) -> ComposeResult:
        yield Static("trace-tui · Hardware", id="screen-title", classes="title", markup=False)
        with VerticalScroll(id="hw-body"):
            yield Static("Checking the hardware…", id="hw-gpu-message", markup=False)
            # The GPU table (#hw-gpus) is mounted here once a probe finds a GPU: nothing shows it before.
            yield Static("", id="hw-system", markup=False)
            yield Static("", id="hw-runtimes", markup=False)
        # The recipes stay on screen at 80x24: the hardware details scroll above them.
        yield Static("Recipes on this machine (enter: preview · r: all recipes · f5: check again)", classes="section",
                     id="hw-recipes-title", markup=False)
        recipes = LiteralTable(id="hw-recipes", cursor_type="row", zebra_stripes=True)
        recipes.wrap_column = 2  # "why not": every reason whole, at any terminal width
        yield recipes
        yield Static("", id="hw-recipe-detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#hw-runtimes", Static).display = False  # until the backends say which there are
        # After the first paint: the probe's thread imports the engine, pydantic and Docker's client,
        # which would hold the interpreter while the screen is being drawn.
        self.call_after_refresh(self.action_probe)

    def action_probe(self) -> None:
        self.query_one("#hw-gpu-message", Static).update("Checking the hardware…")
        self._probe()

    @work(thread=True, exclusive=True, group="hardware")
    def _probe(self) -> None:
        view, report, error = probe_all(self.app.backends)
        self.post_message(HardwareReady(view, report, error))

    def on_hardware_ready(self, message: HardwareReady) -> None:
        self.probes += 1
        self.view = message.view
        self.app.hardware_report = message.report
        self.app.hardware_view = message.view
        self.show(message.view)
        if message.report is not None and self.app.backends.runtimes is not None:
            runtimes = self.query_one("#hw-runtimes", Static)
            runtimes.display = True
            runtimes.update("Runtimes: checking which this machine has…")
            self._runtimes(message.report)

    @work(thread=True, exclusive=True, group="runtimes")
    def _runtimes(self, report: HardwareReport) -> None:
        runtimes = self.app.backends.runtimes
        assert runtimes is not None
        try:
            self.post_message(RuntimesFound(runtimes(report)))
        except Exception as exc:  # noqa: BLE001 - shown on screen, the UI keeps working
            self.post_message(RuntimesFound([], error=str(exc)))

    def on_runtimes_found(self, message: RuntimesFound) -> None:
        text = ("Runtimes: " + message.error) if message.error else "\n".join(
            ["Runtimes (run a recipe in one: o in its preview, or --runtime NAME):",
             *(f"  {line}" for line in message.lines)])
        self.query_one("#hw-runtimes", Static).update(text)

    def show(self, view: HardwareView) -> None:
        found = self.query("#hw-gpus")
        if view.has_gpu and not found:
            self.query_one("#hw-body").mount(LiteralTable(id="hw-gpus", cursor_type="none", show_cursor=False),
                                             after="#hw-gpu-message")
        gpus = self.query_one("#hw-gpus", DataTable) if view.has_gpu or found else None
        if gpus is not None:
            gpus.clear(columns=True)
        msg = self.query_one("#hw-gpu-message", Static)
        if view.has_gpu:
            assert gpus is not None
            gpus.display = True
            gpus.add_columns("#", "GPU", "memory", "CC", "MIG", "ECC")
            for g in view.gpus:
                gpus.add_row(str(g.index), g.name, g.memory, g.compute_capability, g.mig, g.ecc)
            msg.update(f"{len(view.gpus)} GPU(s) · driver {view.driver} · CUDA {view.cuda}{self._again()}")
        else:
            if gpus is not None:
                gpus.display = False
            msg.update(Text.assemble(
                ("No GPU: ", "bold yellow"), (view.gpu_message or "no NVIDIA GPU found", ""),
                "\nThis machine can still run ", ("verify", "bold"), " (v), ", ("eval-preview", "bold"),
                " (e) and ", ("demo", "bold"), " (d).", self._again()))
        self.query_one("#hw-system", Static).update(system_text(view))
        table = self.query_one("#hw-recipes", LiteralTable)
        table.details = lambda i: recipe_details(view.recipes[i]) if i < len(view.recipes) else []
        table.clear(columns=True)
        table.add_columns("recipe", "here", "why not")
        for row in view.recipes:
            table.add_row(row.name, Text(row.status, style=VERDICT_STYLE["warn" if row.local_runtime else row.verdict] if row.verdict in VERDICT_STYLE else ""),
                          recipe_reason_cell(row), key=row.name)
        if view.recipes:
            table.focus(scroll_visible=False)

    def _again(self) -> str:
        return again("checked", self.probes)

    def on_screen_resume(self) -> None:
        """Back from a run (the demo fills the store): the store's line says what is there now, not what
        the first probe found ("empty: nothing fetched yet" after the demo had filled it)."""
        report = self.app.hardware_report
        if self.view is None or report is None:
            return
        from dataclasses import replace

        store = store_text(report)
        if store != self.view.store:
            self.view = replace(self.view, store=store)
            self.app.hardware_view = self.view
            self.query_one("#hw-system", Static).update(system_text(self.view))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "hw-recipes" or self.view is None:
            return
        row = next((r for r in self.view.recipes if r.name == event.row_key.value), None)
        # The reasons are whole in the table's wrapped column; this line names the row and what keys do.
        self.query_one("#hw-recipe-detail", Static).update(
            f"{row.name}: {row.title} — {row.status} (enter: preview · i: details)" if row else "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "hw-recipes" and event.row_key.value:
            self.app.open_recipe(event.row_key.value)

    def action_open_recipe(self) -> None:
        table = self.query_one("#hw-recipes", DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
            self.app.open_recipe(key)

    def action_recipes(self) -> None:
        self.app.action_show_recipes()

    def action_verify(self) -> None:
        self.app.action_show_verify()

    def action_recipe(self, name: str) -> None:
        self.app.open_recipe(name)

"""Recipes: the list with their status on this machine; enter opens the preview."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from trace_tui.tui.views import VERDICT_STYLE, recipe_details, recipe_reason
from trace_tui.tui.widgets.table import LiteralTable


class RecipesScreen(Screen):
    TITLE = "Recipes"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def compose(self) -> ComposeResult:
        yield Static("trace-tui · Recipes (enter: preview, then the steps one at a time)", classes="title",
                     markup=False)
        yield LiteralTable(id="recipes-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="recipe-detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("recipe", "title", "here")
        view = self.app.hardware_view
        rows = {r.name: r for r in (view.recipes if view else ())}
        names = list(rows) or self.app.safe_known_recipes()
        table.details = lambda i: (recipe_details(rows[names[i]]) if names[i] in rows
                                   else [("recipe", names[i]), ("here", "not checked")])
        for name in names:
            row = rows.get(name)
            # yellow, not red, where only the images are missing: it runs here with --runtime local
            verdict = ("warn" if row.local_runtime else row.verdict) if row else "unknown"
            status = Text(row.status if row else "not checked", style=VERDICT_STYLE.get(verdict, ""))
            table.add_row(name, row.title if row else "", status, key=name)
        table.focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        view = self.app.hardware_view
        rows = {r.name: r for r in (view.recipes if view else ())}
        row = rows.get(event.row_key.value) if event.row_key else None
        self.query_one("#recipe-detail", Static).update(recipe_reason(row) if row else "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.app.open_recipe(event.row_key.value)

"""LiteralTable, the one table of the UI, in a real Textual app driven by its Pilot.

A screen that updates a cell in place (the Slurm shard table, the progress grid, the step list) must
see the new value everywhere the table re-shows rows from what was added: `row_text`, the filter,
the sort and the wrapped column.
"""

from __future__ import annotations

from textual.app import App, ComposeResult

from trace_tui.tui.widgets.table import LiteralTable


class TableApp(App):
    def __init__(self, wrap: bool = False) -> None:
        super().__init__()
        self.wrap = wrap

    def compose(self) -> ComposeResult:
        table = LiteralTable(id="t", cursor_type="row")
        if self.wrap:
            table.wrap_column = 2
        yield table

    def on_mount(self) -> None:
        table = self.query_one(LiteralTable)
        table.add_columns("id", "state", "note")
        table.add_row("seed-7", "PENDING", "[queued]", key="seed-7")
        table.add_row("seed-8", "PENDING", "", key="seed-8")


async def test_an_updated_cell_is_what_row_text_filter_and_sort_show() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(LiteralTable)
        table.update_cell("seed-7", table.ordered_columns[1].key, "RUNNING")
        await pilot.pause()
        assert table.row_text(0) == ["seed-7", "RUNNING", "[queued]"]
        table.set_filter("seed-8")  # seed-7 hidden: updating it must not fail, and must not be lost
        table.update_cell("seed-7", table.ordered_columns[1].key, "COMPLETED")
        await pilot.pause()
        assert table.row_count == 1
        table.set_filter("")
        await pilot.pause()
        assert table.row_text(0) == ["seed-7", "COMPLETED", "[queued]"]
        await pilot.press("s")  # sorted by id: rows re-added from what was added, with the update
        await pilot.pause()
        assert [table.row_text(i)[1] for i in range(2)] == ["COMPLETED", "PENDING"]


async def test_an_updated_wrapped_cell_is_wrapped_again() -> None:
    app = TableApp(wrap=True)
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(LiteralTable)
        long = "a reason long enough to need several lines at forty columns [sic]"
        table.update_cell("seed-8", table.ordered_columns[2].key, long)
        await pilot.pause(0.2)
        assert table.row_text(1)[2] == long
        shown = table.get_row_at(1)[2].plain
        assert "\n" in shown and shown.replace("\n", " ").split() == long.split()
        assert table.virtual_size.width <= table.size.width


async def test_step_states_drawn_before_the_list_is_mounted_still_size_its_column() -> None:
    """A resumed run's first events can reach the step list before it is mounted: the state column must
    still be as wide as "✓ already complete" once it shows (it was cut to the header's width)."""
    from trace_tui.engine.events import StepState
    from trace_tui.tui.progress import ProgressModel
    from trace_tui.tui.widgets.step_list import StepList

    model = ProgressModel()
    model.apply(StepState(step="generate", state="skipped", message="already complete"))
    steps = StepList(model, id="steps")
    steps.redraw()  # before mounting, as a fast event would

    class StepsApp(App):
        def compose(self) -> ComposeResult:
            yield steps

    async with StepsApp().run_test(size=(60, 8)) as pilot:
        await pilot.pause()
        assert steps.row_text(0) == ["generate", "✓ already complete"]
        assert steps.ordered_columns[1].get_render_width(steps) >= len("✓ already complete")


async def test_a_cell_drawn_before_its_column_widens_is_drawn_again_in_full() -> None:
    """DataTable widens a column on its next idle, after the cell that needs it was updated; a frame drawn
    in between (the screen refreshing first, as under load) cached the cell cut to the old width, and the
    cache outlived the widening: a resumed run's step state showed "✓ alre" for "✓ already complete"."""
    app = TableApp()
    async with app.run_test(size=(80, 12)) as pilot:
        table = app.query_one(LiteralTable)
        await pilot.pause()
        state = table.ordered_columns[1].key
        for value, how in (("✓ already complete", "update"), ("COMPLETED after a long wait", "rebuild")):
            if how == "update":
                table.update_cell("seed-7", state, value, update_width=True)
            else:
                table.clear()
                table.add_row("seed-7", value, "[queued]", key="seed-7")
            table.render_line(1)  # a frame drawn before the table's idle: the cell at the old width
            await pilot.pause()
            await pilot.pause()
            assert value in table.render_line(1).text, (how, table.render_line(1).text)

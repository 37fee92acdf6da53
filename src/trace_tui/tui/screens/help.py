"""`?`: every key binding of the screen underneath, generated from the bindings themselves."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from trace_tui.tui.widgets.table import LiteralTable

# What the UI does, as commands (each parses with `trace-tui`'s own parser; NAME and DIR are placeholders).
SHELL_COMMANDS = (
    "trace-tui hw",
    "trace-tui recipes",
    "trace-tui preview --recipe NAME",
    "trace-tui --recipe NAME --yes",
    "trace-tui --campaign DIR",
    "trace-tui status --campaign DIR",
    "trace-tui verify --release-dir DIR",
    "trace-tui verify --campaign DIR",
)


# Keys of every table (trace_tui.tui.widgets.table.LiteralTable) that the help lists with the screen's,
# whatever has the focus now; the rest of a table's keys (page up, home, ...) are the terminal's usual ones.
TABLE_KEYS = ("up", "down", "j", "k", "g", "G", "enter", "i", "slash", "s")


def binding_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """(keys, description, where) for every binding of the app, the screen and its tables, once each: also
    those that do not apply to the row selected now (they say why when pressed), never the keys of whatever
    has the focus (a text box's editing keys), nor the terminal's own (super+...)."""
    app = screen.app
    rows: list[tuple[tuple[bool, bool, int], str, str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(binding, rank: int, where: str) -> None:
        if binding.key.startswith("super+") or binding.system:
            return
        display = app.get_key_display(binding)
        description = binding.description or binding.action.replace("_", " ")
        sig = (display, description)
        if sig in seen:
            return
        seen.add(sig)
        rows.append(((rank == 2, not binding.show, rank), display, description, where))

    for _, binding in app._bindings:
        add(binding, 0, "everywhere")
    for _, binding in screen._bindings:
        add(binding, 1, "this screen")
    tables = list(screen.query(LiteralTable))
    if tables:
        where = "the table" if len(tables) == 1 else "tables"
        for key, binding in tables[0]._bindings:
            if key not in TABLE_KEYS:
                continue
            if (binding.action == "filter" and not any(t.filterable for t in tables)) or (
                    binding.action == "sort" and not any(t.sortable for t in tables)):
                continue  # the screen's own key (its / filters its way), listed above
            add(binding, 2, where)
    # The keys shown in the footer first, then the screen's other keys, then the tables' keys.
    rows.sort(key=lambda r: r[0])
    return [r[1:] for r in rows]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def __init__(self, target: Screen) -> None:
        super().__init__()
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(f"Keys — {self.target.title or type(self.target).__name__}", id="help-title", markup=False)
            yield LiteralTable(id="help-table", cursor_type="row", zebra_stripes=True)
            shell = " · ".join(f"`{c}`" for c in SHELL_COMMANDS)
            yield Static("arrows or j/k move · enter chooses · i: details of the row · / filters · s sorts (failures first) · "
                         f"ctrl+p commands · esc closes\nThe same from the shell: {shell}",
                         id="help-foot", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "action", "where")
        for row in binding_rows(self.target):
            table.add_row(*row)
        table.focus()

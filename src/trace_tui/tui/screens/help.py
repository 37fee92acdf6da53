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


def binding_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """(keys, description, where) for each active binding, app bindings included, once each."""
    rows: list[tuple[tuple[bool, bool, int], str, str, str]] = []
    seen: set[tuple[str, str]] = set()
    for key, active in screen.active_bindings.items():
        binding = active.binding
        description = binding.description or binding.action.replace("_", " ")
        node = active.node
        if node is screen.app:
            rank, where = 0, "everywhere"
        elif node is screen:
            rank, where = 1, "this screen"
        else:
            rank, where = 2, type(node).__name__
        display = screen.app.get_key_display(binding)
        sig = (display, description)
        if sig in seen:
            continue
        seen.add(sig)
        rows.append(((rank == 2, not binding.show, rank), display, description, where))
    # The keys shown in the footer first, then the screen's other keys, then widget keys (cursor moves...).
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

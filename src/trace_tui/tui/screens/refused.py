"""A run this machine cannot do: every reason in full, and nothing created (headless exits 3 here); and a
campaign that cannot be opened, with its reason in full."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class RefusedScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("enter", "dismiss", "Close", show=False),
    ]

    def __init__(self, recipe: str, problems: list[str], *, title: str | None = None,
                 foot: str | None = None) -> None:
        super().__init__()
        self.recipe = recipe
        self.problems = list(problems)
        self.title_text = title or f"{recipe} cannot run on this machine — nothing was started or created"
        self.foot = foot or f"(`trace-tui --recipe {recipe} --yes` refuses the same way, exit 3) · esc: back"

    def compose(self) -> ComposeResult:
        with Vertical(id="refused-box"):
            yield Static(Text(self.title_text, style="bold red"), id="refused-title")
            with VerticalScroll(id="refused-reasons"):
                for problem in self.problems:
                    yield Static(f"• {problem}", classes="refused-reason", markup=False)
            yield Static(self.foot, id="refused-foot", markup=False)

    def on_mount(self) -> None:
        # A reason often holds a path or a command to copy (`mv DIR/state.sqlite DIR/state.sqlite.broken`):
        # where the screen has room, the box is wide enough for its longest word, so none is folded in
        # the middle (the usual 120 columns cut a long campaign path inside its file name)
        words = [word for text in (self.title_text, *self.problems) for word in text.split()]
        longest = max((len(word) for word in words), default=0) + len("• ")
        frame = 4  # the thick border and the padding, both sides
        if longest + frame > 120:
            self.query_one("#refused-box").styles.max_width = longest + frame


def cannot_open(campaign: object, line: str) -> RefusedScreen:
    """A campaign that cannot be opened: the whole reason (often a command to run first), until esc; a toast
    would cut it and go away."""
    return RefusedScreen("", [line], title=f"cannot open campaign {campaign}",
                         foot="esc: back")

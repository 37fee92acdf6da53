"""A run this machine cannot do: every reason in full, and nothing created (headless exits 3 here)."""

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

    def __init__(self, recipe: str, problems: list[str]) -> None:
        super().__init__()
        self.recipe = recipe
        self.problems = list(problems)

    def compose(self) -> ComposeResult:
        with Vertical(id="refused-box"):
            yield Static(Text(f"{self.recipe} cannot run on this machine — nothing was started or created",
                              style="bold red"), id="refused-title")
            with VerticalScroll(id="refused-reasons"):
                for problem in self.problems:
                    yield Static(f"• {problem}", classes="refused-reason", markup=False)
            yield Static(f"(`trace-tui --recipe {self.recipe} --yes` refuses the same way, exit 3) · esc: back",
                         id="refused-foot", markup=False)

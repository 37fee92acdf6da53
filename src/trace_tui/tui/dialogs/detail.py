"""The selected row of a table in full: every field wrapped, hashes whole, every reason on its own line."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class DetailScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("i", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, title: str, fields: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.fields = fields

    def compose(self) -> ComposeResult:
        with Vertical(id="detail-box"):
            yield Static(Text(self.title_text, style="bold"), id="detail-title")
            with VerticalScroll(id="detail-body"):
                width = max((len(label) for label, _ in self.fields), default=0)
                for label, value in self.fields:
                    text = Text.assemble((f"{label:<{width}}  ", "bold"), value)
                    yield Static(text, classes="detail-field")
            yield Static("esc: close", id="detail-foot", markup=False)

    @property
    def text(self) -> str:
        return "\n".join(f"{label}: {value}" for label, value in self.fields)

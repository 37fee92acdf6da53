"""Campaigns: every campaign under the home, with its state; pick one to watch, resume or verify.

The rows come from the same status `trace-tui status --campaign DIR` prints
(trace_tui.engine.campaign_list); the list is read again every few seconds, so a
run going on here or elsewhere shows its rows moving.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from trace_tui.engine.campaign_list import CampaignSummary, read_summary, sort_key
from trace_tui.tui.messages import CampaignsRead
from trace_tui.tui.widgets.table import LiteralTable

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.tui.backends import Backends

REFRESH_INTERVAL_S = 3.0
STATE_STYLE = {"running": "bold cyan", "failed": "bold red", "unreadable": "bold red", "partial": "yellow",
               "complete": "green"}


def when(t: float | None) -> str:
    """Absolute UTC time: the same on every screen and in every log, whatever the terminal's zone."""
    return "—" if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def rows_cell(s: CampaignSummary) -> str:
    return f"{s.rows_done}/{s.rows_total}" if s.rows_total else "—"


def open_problem(backends: Backends, path: Path, seen: dict[Path, tuple[tuple[tuple[int, int], ...], str]]) -> str:
    """Why the campaign at PATH cannot be opened to watch or resume (its recipe.json is not a resolved
    recipe, ...), or "". `trace-tui status` reads only the database, so a campaign it calls complete may
    still be one that `w` and `r` cannot open: the list says so before the user tries. The answer is kept
    while its files are unchanged (the list is read again every few seconds)."""
    stamp = []
    for name in ("recipe.json", "state.sqlite", "state.sqlite-wal"):
        try:
            st = (Path(path) / name).stat()
            stamp.append((st.st_mtime_ns, st.st_size))
        except OSError:
            stamp.append((0, -1))
    key = tuple(stamp)
    cached = seen.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        backends.open_campaign(Path(path))
        problem = ""
    except Exception as exc:  # noqa: BLE001 - the reason is the row's message
        problem = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
    seen[path] = (key, problem)
    return problem


def with_open_problems(backends: Backends, found: list[CampaignSummary], seen: dict) -> list[CampaignSummary]:
    """The summaries, a campaign that cannot be opened shown as unreadable with its reason (in order again)."""
    from dataclasses import replace

    out = []
    for s in found:
        problem = open_problem(backends, s.path, seen) if s.scheduler == "local" and s.state != "unreadable" else ""
        out.append(replace(s, state="unreadable", message=problem) if problem else s)
    return sorted(out, key=sort_key)


def campaign_details(s: CampaignSummary) -> list[tuple[str, str]]:
    out = [("campaign", str(s.path)), ("recipe", s.recipe), ("run tag", s.run_tag), ("state", s.state),
           ("rows", rows_cell(s)), ("last change", when(s.last_change)), ("scheduler", s.scheduler)]
    if s.message:
        out.append(("why", s.message))
    out.append(("status", f"trace-tui status --campaign {s.path}"))
    return out


class CampaignsScreen(Screen):
    TITLE = "Campaigns"
    BINDINGS = [
        Binding("escape", "back", "Back"),
        # enter (the table's own key) watches too; w is the key the footer can show
        Binding("w", "watch", "Watch"),
        Binding("r", "resume", "Resume"),
        Binding("v", "verify", "Verify"),
        Binding("f5", "refresh", "Refresh"),
    ]

    def __init__(self, root: Path | None = None) -> None:
        super().__init__()
        self.root = root
        self.summaries: list[Any] | None = None
        self.reads = 0
        self._opened: dict[Path, Any] = {}  # open_problem's answers, per campaign (read on the worker only)

    def compose(self) -> ComposeResult:
        yield Static(f"trace-tui · Campaigns · {self.root or 'no home'}", id="campaigns-title", classes="title",
                     markup=False)
        yield LiteralTable(id="campaigns-table", cursor_type="row", zebra_stripes=True)
        yield Static("Reading the campaigns…", id="campaigns-detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()
        self.set_interval(REFRESH_INTERVAL_S, self.action_refresh)

    def action_refresh(self) -> None:
        self._read(self.shown_elsewhere())

    def shown_elsewhere(self) -> list[Path]:
        """The campaigns this UI shows on a run screen that are not under the home's campaigns (a --campaign
        DIR): esc from a run going on there promises that enter on it here comes back to it."""
        root = Path(self.root).resolve() if self.root else None
        out = []
        for screen in self.app.screen_stack:
            if getattr(screen, "shows_a_run", False):  # a run screen (screens do not import each other)
                where = screen.campaign_dir.expanduser().resolve()
                if (root is None or where.parent != root) and where not in out:
                    out.append(where)
        return out

    @work(thread=True, exclusive=True, group="campaigns")
    def _read(self, elsewhere: list[Path]) -> None:
        try:
            found = self.app.backends.campaigns()
            found += [read_summary(p) for p in elsewhere]
            found = with_open_problems(self.app.backends, found, self._opened)
        except Exception as exc:  # noqa: BLE001 - shown on screen; the next refresh tries again
            self.post_message(CampaignsRead([], error=exc.line() if hasattr(exc, "line") else str(exc)))
            return
        self.post_message(CampaignsRead(found))

    def on_campaigns_read(self, message: CampaignsRead) -> None:
        message.stop()
        self.reads += 1
        detail = self.query_one("#campaigns-detail", Static)
        if message.error:
            detail.update(f"cannot read the campaigns: {message.error}")
            return
        self.summaries = summaries = list(message.summaries)
        table = self.query_one(LiteralTable)
        if not table.ordered_columns:
            table.noun = "campaigns"
            # the folder and the last change wrap at a narrow width ("2026-12-02" over "16:48 UTC"), never cut
            table.wrap_column = (2, 4)
            table.MIN_WRAP_WIDTH = 9
            table.reserve_scrollbar = False  # refitted at every read (3 s): the scrollbar's room once it shows
            # the folder, not the run tag: copies of a campaign share its run tag (i shows both)
            table.add_columns("state", "recipe", "folder", "rows", "last change")
        table.details = lambda i: campaign_details(summaries[i]) if i < len(summaries) else []
        chosen = table.selected_key()
        table.clear()  # the rows only: the filter and the sort stay as the user set them
        for s in summaries:
            table.add_row(Text(s.state, style=STATE_STYLE.get(s.state, "")), s.recipe, s.path.name, rows_cell(s),
                          when(s.last_change), key=str(s.path))
        if chosen is not None and chosen in table.rows:
            table.move_cursor(row=table.get_row_index(chosen), animate=False)  # a refresh keeps the selection
        if self.reads == 1:
            table.focus()
        self.refresh_bindings()
        if not self.summaries:
            detail.update(f"no campaigns under {self.root} yet · a run of a recipe (r on the hardware screen) "
                          "creates one")
        else:
            self._show_selected()

    def selected(self) -> CampaignSummary | None:
        key = self.query_one(LiteralTable).selected_key()
        return next((s for s in self.summaries or () if str(s.path) == key), None)

    def _show_selected(self) -> None:
        s = self.selected()
        detail = self.query_one("#campaigns-detail", Static)
        if s is None:
            detail.update("")
            return
        what = {"running": "running: enter (or w) follows it live",
                "failed": "failed: r resumes it, i shows why, v verifies what is there",
                "partial": "partial: r resumes it (finished slices are kept)",
                "complete": "complete: v verifies it",
                "unreadable": "cannot be read: i shows why"}.get(s.state, s.state)
        slurm = " · a Slurm campaign: `trace-tui status --campaign DIR` follows its shards" if s.scheduler == "slurm" \
            else ""
        detail.update(f"{s.path} · {what}{slurm}")

    def on_data_table_row_highlighted(self, event) -> None:
        self._show_selected()
        self.refresh_bindings()

    def on_data_table_row_selected(self, event) -> None:
        event.stop()
        self.action_watch()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Footer hints only for what the selected campaign allows."""
        s = self.selected() if self.is_mounted and self.summaries is not None else None
        if action == "watch":
            return s is not None and s.scheduler == "local" and s.state != "unreadable"
        if action == "resume":
            return s is not None and s.resumable
        if action == "verify":
            return s is not None and s.state != "unreadable"
        return True

    # keys whose action the footer hides where it does not apply: pressed anyway, they say why
    REFUSED_KEYS = {"w": "watch", "r": "resume", "v": "verify"}

    def why_not(self, action: str) -> str:
        """One line: why the selected campaign does not allow ACTION."""
        s = self.selected()
        if s is None:
            return "no campaign selected" if self.summaries else "no campaigns here yet"
        name = s.path.name
        if s.state == "unreadable":
            return f"cannot {action} {name}: it cannot be read · i shows why"  # the reason is long: i has it whole
        if action == "watch" and s.scheduler != "local":
            return f"{name} runs on Slurm: `trace-tui status --campaign {s.path}` follows its shards"
        if action == "resume":
            return f"{name} is {s.state}: it cannot be resumed here"
        return f"cannot {action} {name}"

    def on_key(self, event) -> None:
        action = self.REFUSED_KEYS.get(event.key)
        if action is None or isinstance(self.focused, Input) or self.check_action(action, ()):
            return  # the binding runs (or the filter box takes the letter)
        event.stop()
        event.prevent_default()
        self.notify(self.why_not(action), severity="warning", markup=False)

    def action_watch(self) -> None:
        if not self.check_action("watch", ()):  # enter on a row that cannot be watched
            self.notify(self.why_not("watch"), severity="warning", markup=False)
            return
        self.app.reattach(self.selected().path)

    def action_resume(self) -> None:
        s = self.selected()
        if s is None or not s.resumable:
            self.notify(self.why_not("resume"), severity="warning", markup=False)
            return
        self.app.reattach(s.path, resume=True)

    def action_verify(self) -> None:
        s = self.selected()
        if s is None or s.state == "unreadable":
            self.notify(self.why_not("verify"), severity="warning", markup=False)
            return
        self.app.show_verify("campaign", s.path)

    def action_back(self) -> None:
        self.app.pop_screen()

"""Run on Slurm: a sharded campaign's shards live — Slurm state, node or reason, rows, rate, ETA, log.

Everything goes through the app's ``backends.cluster`` (trace_tui.tui.cluster_backend), which is the
command line's own code: the table is the dict `trace-tui status --campaign DIR --json` prints, `r`
submits as `trace-tui --recipe NAME --scheduler slurm` does (only shards that are not complete, never a
queued or running one), `c` scancels as Ctrl-C does. The jobs run on the cluster, not in this process:
leaving the screen or the app leaves them running, and opening the campaign again follows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.messages import ClusterDone, ClusterRead
from trace_tui.tui.progress import CLUSTER_COLUMNS, cluster_details, cluster_rows, cluster_summary
from trace_tui.tui.widgets.table import LiteralTable

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.tui.cluster_backend import SchedulerChoice

POLL_S = 2.0


def _line(exc: BaseException) -> str:
    return exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"


class ClusterScreen(Screen):
    TITLE = "Run on Slurm"
    AUTO_FOCUS = "#cluster-table"
    BINDINGS = [
        Binding("c", "cancel", "Cancel jobs"),
        Binding("r", "resume", "Resume"),
        Binding("v", "verify", "Verify"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, campaign_dir: Path, *, resolved: ResolvedRecipe | None = None,
                 choice: SchedulerChoice | None = None, submit: bool = False,
                 run_options: dict[str, Any] | None = None, note: str = "", poll_s: float = POLL_S) -> None:
        super().__init__()
        self.campaign_dir = Path(campaign_dir)
        self.resolved = resolved
        self.choice = choice
        self.run_options = dict(run_options or {})
        self.note = note
        self.poll_s = poll_s
        self._submit_on_mount = submit
        self.status: dict[str, Any] | None = None
        self.busy = ""  # "submit" or "cancel" while one is in flight
        self.reads = 0

    def compose(self) -> ComposeResult:
        name = self.resolved.recipe.name if self.resolved is not None else self.campaign_dir.name
        how = f" · {self.choice.describe()}" if self.choice is not None else " · Slurm"
        yield Static(f"trace-tui · Run · {name}{how}", id="cluster-title", classes="title", markup=False)
        yield LiteralTable(id="cluster-table", cursor_type="row", zebra_stripes=True)
        yield Static("reading the campaign…", id="cluster-summary", markup=False)
        yield Static(self.note, id="cluster-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#cluster-table", LiteralTable)
        for label in CLUSTER_COLUMNS:
            table.add_column(label, key=label)
        self.set_interval(self.poll_s, self.refresh_status)
        if self._submit_on_mount:
            self.submit()
        else:
            self.refresh_status()

    # -- reading ------------------------------------------------------------------
    def refresh_status(self) -> None:
        self._read()

    @work(thread=True, exclusive=True, group="cluster-read")
    def _read(self) -> None:
        try:
            st = self.app.backends.cluster.status(self.campaign_dir)
        except Exception as exc:  # noqa: BLE001 - shown; the next poll tries again
            self.post_message(ClusterRead(None, _line(exc)))
            return
        self.post_message(ClusterRead(st))

    def on_cluster_read(self, message: ClusterRead) -> None:
        message.stop()
        self.reads += 1
        if message.status is None:
            self.query_one("#cluster-summary", Static).update(f"cannot read the campaign: {message.error}")
            return
        self.status = status = message.status
        table = self.query_one("#cluster-table", LiteralTable)
        table.details = lambda i: cluster_details(status, i)  # i: a shard in full, every failure of it
        rows = cluster_rows(message.status)
        if table.row_count != len(rows):
            table.clear()
            for row in rows:
                table.add_row(*row, key=row[0])
        else:
            for row in rows:
                for label, value in zip(CLUSTER_COLUMNS, row):
                    table.update_cell(row[0], label, value, update_width=True)
        self.query_one("#cluster-summary", Static).update(cluster_summary(message.status))
        self.refresh_bindings()

    @property
    def jobs_active(self) -> bool:
        """Whether any shard or finishing job is queued or running (what `c` would cancel)."""
        st = self.status or {}
        return bool(st.get("running")) or any(
            f["slurm_state"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for f in st.get("finishing", []))

    # -- submitting (the first submission, and r: resume) -------------------------
    def submit(self) -> None:
        self.busy = "submit"
        self.refresh_bindings()
        self._say("submitting to Slurm…")
        self._run_submit()

    @work(thread=True, exclusive=True, group="cluster-act")
    def _run_submit(self) -> None:
        try:
            done = self.app.backends.cluster.submit(self.resolved, self.choice, self.campaign_dir, self.run_options)
        except Exception as exc:  # noqa: BLE001 - the one line on screen
            self.post_message(ClusterDone("submit", f"could not submit: {_line(exc)}", error=True))
            return
        text = done.line()
        if done.record is not None:
            text += " · c: cancel the jobs · q: leave them running"
        else:
            text += " · v: verify"
        self.post_message(ClusterDone("submit", text))

    @work(thread=True, exclusive=True, group="cluster-act")
    def _run_cancel(self) -> None:
        try:
            jobs = self.app.backends.cluster.cancel(self.campaign_dir)
        except Exception as exc:  # noqa: BLE001
            self.post_message(ClusterDone("cancel", f"could not cancel: {_line(exc)}", error=True))
            return
        self.post_message(ClusterDone("cancel", f"cancelled {len(jobs)} Slurm job(s); the shards keep what they "
                                                f"finished · r: resume (resubmits the shards that are not complete)"))

    def on_cluster_done(self, message: ClusterDone) -> None:
        message.stop()
        self.busy = ""
        self.refresh_bindings()
        self._say(message.text)
        if message.error:
            self.notify(message.text, severity="error", markup=False)
        self.refresh_status()

    def _say(self, text: str) -> None:
        self.query_one("#cluster-status", Static).update(text)

    # -- actions ------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.jobs_active and not self.busy
        if action == "resume":
            return self.resolved is not None and not self.busy
        if action == "verify":
            return bool((self.status or {}).get("merged"))
        return True

    def action_cancel(self) -> None:
        if self.busy or not self.jobs_active:
            self.notify("no job of this campaign is queued or running")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.busy = "cancel"
                self.refresh_bindings()
                self._say("cancelling the campaign's Slurm jobs…")
                self._run_cancel()

        self.app.push_screen(ConfirmScreen(
            "Cancel this campaign's Slurm jobs (scancel)? The shards keep what they finished; r resubmits the "
            "ones that are not complete.", yes="Cancel jobs", no="Keep running"), answer)

    def action_resume(self) -> None:
        if self.busy:
            self.notify(f"a {self.busy} is in progress")
            return
        if self.resolved is None:
            self.notify("this campaign's recipe could not be read: run the same command again")
            return
        self.submit()

    def action_verify(self) -> None:
        if not (self.status or {}).get("merged"):
            self.notify("not merged yet: the merge job runs once every shard is complete")
            return
        self.app.show_verify("campaign", self.campaign_dir)

    def action_back(self) -> None:
        self.app.pop_screen()

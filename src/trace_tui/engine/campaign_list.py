"""Every campaign under a home's campaigns directory, summarised from the same status `trace-tui status` reads.

One row per directory: recipe, run tag, state (running, failed, partial, complete), rows done of
total and when it last changed. The status itself comes from :func:`trace_tui.engine.status.campaign_status`
(or, for a Slurm campaign, :func:`trace_tui.engine.cluster_status.cluster_status` without asking Slurm), so the
list and `trace-tui status --campaign DIR` never disagree. Read-only: works while runs go on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Files whose modification time is "the last change" of a campaign (what a runner or a merge writes).
CHANGING_FILES = ("state.sqlite", "state.sqlite-wal", "events.jsonl", "recipe.json", "shards.json", "merged.json",
                  "slurm/submissions.json")
# The order of the list: what needs attention first.
STATE_ORDER = {"running": 0, "failed": 1, "unreadable": 2, "partial": 3, "complete": 4}


@dataclass(frozen=True)
class CampaignSummary:
    path: Path
    recipe: str
    run_tag: str
    state: str  # running | failed | partial | complete | unreadable
    rows_done: int
    rows_total: int
    last_change: float | None  # seconds since the epoch; None when nothing in it could be read
    scheduler: str = "local"  # local | slurm
    message: str = ""  # why it is failed or unreadable, in full

    @property
    def resumable(self) -> bool:
        return self.scheduler == "local" and self.state in ("partial", "failed", "complete")


def summary_state(st: dict[str, Any]) -> tuple[str, str]:
    """(state, why) of a status dict: running beats everything, then failures, then complete, else partial."""
    if st.get("running"):
        return "running", ""
    if st.get("damaged"):
        return "unreadable", st["damaged"]
    failures = [f"{s['step']}: {m}" for s in st.get("steps", []) for m in s.get("failures") or []]
    failures += [f"{s['id']}: {m}" for s in st.get("shards", []) for m in s.get("failures") or []]
    failed_steps = [s["step"] for s in st.get("steps", []) if s.get("state") == "failed"]
    if failures or failed_steps or st.get("last_run_state") == "failed":
        why = "; ".join(failures) or (f"step {', '.join(failed_steps)} failed" if failed_steps else "the last run failed")
        return "failed", why
    if st.get("complete"):
        return "complete", ""
    return "partial", ""


def summarise(path: Path, st: dict[str, Any], last_change: float | None) -> CampaignSummary:
    state, why = summary_state(st)
    return CampaignSummary(path=Path(path), recipe=str(st.get("recipe") or "?"), run_tag=str(st.get("run_tag") or "?"),
                           state=state, rows_done=int(st.get("rows_done") or 0),
                           rows_total=int(st.get("rows_total") or 0), last_change=last_change,
                           scheduler=str(st.get("scheduler") or "local"), message=why)


def last_change(path: Path) -> float | None:
    times = []
    for name in CHANGING_FILES:
        try:
            times.append((Path(path) / name).stat().st_mtime)
        except OSError:
            continue
    return max(times) if times else None


def read_summary(path: Path) -> CampaignSummary:
    """One campaign's row; a directory that is not (or no longer) a readable campaign says why, in full."""
    from trace_tui.campaign_files.shard_files import is_sharded

    path = Path(path)
    try:
        if is_sharded(path):
            from trace_tui.engine.cluster_status import cluster_status

            st = cluster_status(path, query=False)  # the list never waits on squeue/sacct
        else:
            from trace_tui.engine.status import campaign_status

            if not (path / "state.sqlite").is_file():
                raise FileNotFoundError(f"{path} has no state.sqlite: not a campaign (or one that never started)")
            st = campaign_status(path)
    except Exception as exc:  # noqa: BLE001 - one unreadable directory must not hide the others
        line = exc.line() if hasattr(exc, "line") else str(exc)
        return CampaignSummary(path=path, recipe="?", run_tag=path.name, state="unreadable", rows_done=0,
                               rows_total=0, last_change=last_change(path), message=line)
    return summarise(path, st, last_change(path))


def sort_key(s: CampaignSummary) -> tuple[int, float, str]:
    return (STATE_ORDER.get(s.state, 9), -(s.last_change or 0.0), s.run_tag)


def list_campaigns(root: Path) -> list[CampaignSummary]:
    """Every campaign directory under root, running and failed first, then most recently changed first."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted((read_summary(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=sort_key)

"""A Slurm campaign's status, read-only: each shard's own campaign, and Slurm's word on its jobs.

``cluster_status`` is what `trace-tui status`, `--scheduler slurm` and the TUI's cluster screen show:
every shard's progress from its directory (trace_tui.engine.status) beside the state squeue, sacct or
the batch scripts' exit records give its array task, and the merge and verify jobs after them.
Submitting, merging and cancelling are trace_tui.engine.cluster.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path
from typing import Any

from trace_tui.campaign_files.shard_files import merged_problem, read_plan, shard_dir
from trace_tui.campaign_files.shards import Shard
from trace_tui.campaign_files.state import MIB, cut, read_campaign_json
from trace_tui.engine.printer import fmt_duration
from trace_tui.engine.status import campaign_status
from trace_tui.errors import CheckFailed, ExitCode, UsageError
from trace_tui.runtime import slurm

SLURM_DIR = "slurm"
SUBMISSIONS = f"{SLURM_DIR}/submissions.json"
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT",
          "SIGNALING", "REQUEUE_HOLD", "REQUEUE_FED"}


# Slurm's job ids: the ids go to squeue/sacct/scancel and name the exit records under slurm/tasks/.
JOB_ID = re.compile(r"[0-9]{1,20}")
TASK_INDEX = re.compile(r"[0-9]{1,9}")


def read_submissions(parent: Path) -> list[dict[str, Any]]:
    """PARENT/slurm/submissions.json: one record per submission (CheckFailed naming the entry when damaged)."""
    path = Path(parent) / SUBMISSIONS
    try:
        data = read_campaign_json(path, limit=64 * MIB)
    except FileNotFoundError:
        return []
    except CheckFailed as exc:
        raise CheckFailed(exc.message, hint=_RESUBMIT) from None
    if not isinstance(data, list):
        raise CheckFailed(f"{path}: not a list of submissions (a JSON {type(data).__name__} at the top level)",
                          hint=_RESUBMIT)
    for i, record in enumerate(data):
        problem = _submission_problem(record)
        if problem:
            raise CheckFailed(f"{path}: submission [{i}]: {problem}", hint=_RESUBMIT)
    return data


_RESUBMIT = ("trace-tui writes it when it submits: move it aside and run the same `--scheduler slurm` command "
             "again (finished shards are kept)")


def _submission_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for key in ("array_job", "merge_job", "verify_job"):
        value = record.get(key)
        if value is not None and not (isinstance(value, (str, int)) and not isinstance(value, bool)
                                      and JOB_ID.fullmatch(str(value))):
            return f"{key} = {cut(value)} is not a Slurm job id"
    tasks = record.get("tasks", {})
    if not isinstance(tasks, dict):
        return f"tasks = {cut(tasks)} is not an object of array index -> shard id"
    for index, shard_id in tasks.items():
        if not TASK_INDEX.fullmatch(index) or not isinstance(shard_id, str):
            return f"tasks[{cut(index)}] = {cut(shard_id)} is not an array index and a shard id"
    if tasks and record.get("array_job") is None:
        return "it lists array tasks but no array_job"
    return None


# --------------------------------------------------------------------------- shard progress


def _no_progress(state: str) -> dict[str, Any]:
    """A shard whose runner has written nothing to read yet."""
    return {"campaign_state": state, "complete": False, "rows_done": 0, "rows_total": 0,
            "rate": None, "eta_s": None, "slices": [], "failures": [], "last_run_state": None}


def shard_progress(parent: Path, shard: Shard, *, now: float | None = None) -> dict[str, Any]:
    """A shard campaign's own state: not started, incomplete or complete; rows, rate and ETA."""
    where = shard_dir(parent, shard)
    if where is None or not (where / "state.sqlite").exists():
        return _no_progress("not started")
    try:
        st = campaign_status(where, now=now)
    except (sqlite3.OperationalError, UsageError) as exc:
        if "no such table" not in str(exc):  # a broken database is the shard's failure, said as it is
            raise
        # the node's runner has created the database but not its tables yet
        return _no_progress("starting")
    rates = [x["rate"] for x in st["slices"] if x["rate"]]
    rate = sum(rates) if rates else None
    left = st["rows_total"] - st["rows_done"]
    failures = [m for s in st["steps"] for m in s.get("failures", [])]
    if st.get("damaged"):  # its recipe.json: the shard cannot be resumed, merged or verified
        failures.append(st["damaged"])
    state = "complete" if st["complete"] else ("damaged" if st.get("damaged") else "running" if st["running"] else
                                               (st["last_run_state"] or "incomplete"))
    return {"campaign_state": state, "complete": st["complete"], "rows_done": st["rows_done"],
            "rows_total": st["rows_total"], "rate": rate, "eta_s": left / rate if rate and left > 0 else None,
            "slices": st["slices"], "failures": failures, "last_run_state": st["last_run_state"]}


def _task_record(parent: Path, key: str) -> dict[str, Any] | None:
    """The exit record a batch script wrote; None when there is none, or none that can be trusted to be one."""
    try:
        data = read_campaign_json(parent / SLURM_DIR / "tasks" / f"{key}.json", limit=MIB)
    except (OSError, CheckFailed):
        return None
    return data if isinstance(data, dict) else None


def _state_from_record(rec: dict[str, Any] | None) -> slurm.TaskState | None:
    if rec is None:
        return None
    try:
        rc = int(rec.get("exit_code", 1))
    except (TypeError, ValueError, OverflowError):
        rc = 1
    state = "COMPLETED" if rc == 0 else ("CANCELLED" if rc in (ExitCode.INTERRUPTED, 143) else "FAILED")
    return slurm.TaskState(job_id=str(rec.get("job_id", "")), state=state, node=str(rec.get("node", "")),
                           exit_code=f"{rc}:0")


def fill_array_tasks(states: dict[str, slurm.TaskState], array: str, indices: list[str]) -> None:
    """Give each task of array job ARRAY that Slurm does not list on its own the state of the array's record.

    Slurm lists the tasks it has not yet split off under one record: ``123`` or ``123_[0-1%2]`` (cancelled
    while pending, every task of an array stays there). Without this such tasks read as UNKNOWN forever.
    """
    whole = states.get(array) or next((v for k, v in states.items() if k.startswith(f"{array}_[")), None)
    if whole is None:
        return
    for i in indices:
        states.setdefault(f"{array}_{i}", dataclasses.replace(whole, job_id=f"{array}_{i}"))


def slurm_states(parent: Path, subs: list[dict[str, Any]]) -> dict[str, slurm.TaskState]:
    """Every job and array task of the campaign's submissions: squeue (live and recent), then sacct, then the
    exit records the batch scripts wrote (for clusters without accounting)."""
    ids = [str(s[k]) for s in subs for k in ("array_job", "merge_job", "verify_job") if s.get(k)]
    if not ids:
        return {}
    out = slurm.accounting(ids)
    out.update(slurm.queue(ids))
    for s in subs:
        if s.get("array_job"):
            fill_array_tasks(out, str(s["array_job"]), list(s.get("tasks", {})))
        keys = [f"{s['array_job']}_{i}" for i in s.get("tasks", {})] + \
               [str(s[k]) for k in ("merge_job", "verify_job") if s.get(k)]
        for key in keys:
            rec = _state_from_record(_task_record(parent, key))
            if rec is None:
                continue
            have = out.get(key)
            if have is None or (have.state not in slurm.TERMINAL and have.state not in ACTIVE):
                out[key] = rec
            elif not have.exit_code:  # squeue knows the state but not the exit status
                out[key] = dataclasses.replace(have, exit_code=rec.exit_code, node=have.node or rec.node)
    return out


def latest_task(subs: list[dict[str, Any]], shard: Shard) -> tuple[dict[str, Any], str] | None:
    for s in reversed(subs):
        if str(shard.index) in s.get("tasks", {}):
            return s, f"{s['array_job']}_{shard.index}"
    return None


def cluster_status(parent: Path | str, *, now: float | None = None, query: bool = True) -> dict[str, Any]:
    """The whole campaign from the shard directories plus squeue/sacct (read-only)."""
    parent = Path(parent).resolve()
    plan = read_plan(parent)
    subs = read_submissions(parent)
    states = slurm_states(parent, subs) if (query and subs) else {}
    shards = []
    slices = []
    for shard in plan.shards:
        prog = shard_progress(parent, shard, now=now)
        latest = latest_task(subs, shard)
        st = states.get(latest[1]) if latest else None
        log = str(parent / SLURM_DIR / "logs" / f"shard-{latest[1]}.log") if latest else None
        shards.append({"index": shard.index, "id": shard.id, "dir": str(parent / shard.dir),
                       "slurm_job": latest[1] if latest else None,
                       "slurm_state": st.state if st else ("NOT SUBMITTED" if not latest else "UNKNOWN"),
                       "reason": st.reason if st else "", "node": st.node if st else "",
                       "exit_code": st.exit_code if st else "", "log": log,
                       **{k: v for k, v in prog.items() if k != "slices"}})
        slices += [{**x, "shard": shard.id} for x in prog["slices"]]
    finishing = []
    last = subs[-1] if subs else {}
    for kind in ("merge", "verify"):
        jid = last.get(f"{kind}_job")
        if jid:
            st = states.get(str(jid))
            finishing.append({"kind": kind, "job_id": str(jid), "slurm_state": st.state if st else "UNKNOWN",
                              "reason": st.reason if st else "", "exit_code": st.exit_code if st else "",
                              "log": str(parent / SLURM_DIR / "logs" / f"{kind}-{jid}.log")})
    merged = merged_problem(parent, plan) is None
    complete = all(s["complete"] for s in shards) and merged
    rates = [s["rate"] for s in shards if s["rate"]]
    rows_done, rows_total = sum(s["rows_done"] for s in shards), sum(s["rows_total"] for s in shards)
    rate = sum(rates) if rates else None
    return {"campaign": str(parent), "recipe": plan.recipe, "run_tag": plan.run_tag, "scheduler": "slurm",
            "shard_by": plan.shard_by, "running": any(s["slurm_state"] in ACTIVE for s in shards),
            "complete": complete, "merged": merged, "last_run_state": None,
            "shards_total": len(shards), "shards_completed": sum(1 for s in shards if s["complete"]),
            "rows_done": rows_done, "rows_total": rows_total, "rate": rate,
            "eta_s": (rows_total - rows_done) / rate if rate and rows_total > rows_done else None,
            "shards": shards, "finishing": finishing, "slices": slices,
            "slices_total": len(slices), "slices_completed": sum(1 for x in slices if x["state"] == "completed")}


def render_cluster_status(st: dict[str, Any]) -> str:
    lines = [f"campaign {st['campaign']}",
             f"recipe {st['recipe']}  run tag {st['run_tag']}  Slurm, {st['shards_total']} shards by {st['shard_by']}"
             f"  {'COMPLETE' if st['complete'] else 'incomplete'}  shards {st['shards_completed']}/"
             f"{st['shards_total']}  rows {st['rows_done']}/{st['rows_total']}"
             + (f"  ETA {fmt_duration(st['eta_s'])}" if st["eta_s"] is not None else ""), ""]
    lines.append(f"{'shard':<28} {'slurm':<14} {'where / why':<20} {'campaign':<12} {'rows':>15} {'rows/s':>7} "
                 f"{'ETA':>7}  log")
    for s in st["shards"]:
        where = s["node"] if s["slurm_state"] == "RUNNING" else (s["reason"] or s["node"])
        rate = f"{s['rate']:.1f}" if s["rate"] else "-"
        eta = fmt_duration(s["eta_s"]) if s["eta_s"] is not None else "-"
        lines.append(f"{s['id']:<28} {s['slurm_state']:<14} {where[:20]:<20} {s['campaign_state']:<12} "
                     f"{s['rows_done']:>7}/{s['rows_total']:<7} {rate:>7} {eta:>7}  {s['log'] or '-'}")
    for f in st["finishing"]:
        lines.append(f"{f['kind']:<28} {f['slurm_state']:<14} {f['reason'][:20]:<20} {'':<12} {'':>15} {'':>7} "
                     f"{'':>7}  {f['log']}")
    for s in st["shards"]:
        for msg in s["failures"]:
            lines.append(f"failed: {s['id']}: {msg}")
    if st["merged"]:
        lines.append(f"merged: trace-tui verify --campaign {st['campaign']}")
    return "\n".join(lines)

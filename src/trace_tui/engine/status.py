"""A campaign's status from its state database, read-only (`trace-tui status`, the TUI)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

from trace_tui.engine.campaign import STEP_SLICE, read_snapshot

STALE_S = 30.0  # a running job whose record has not moved for this long shows no rate/ETA


def runner_active(path: Path) -> bool:
    """Whether a runner holds the campaign's lock now (flock probe: reads nothing, writes nothing)."""
    try:
        fd = os.open(Path(path) / ".lock", os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def campaign_status(path: Path | str, *, now: float | None = None) -> dict[str, Any]:
    path = Path(path).resolve()
    meta, steps, jobs, subs = read_snapshot(path)
    now = time.time() if now is None else now
    active = runner_active(path)
    pos = {s["step"]: s["position"] for s in steps}
    jobs.sort(key=lambda j: (pos.get(j.step, 1 << 30), j.model or "", j.seed or 0, j.benchmark or ""))
    out_steps = []
    for s in steps:
        mine = [j for j in jobs if j.step == s["step"]]
        out_steps.append({"step": s["step"], "title": s["title"], "state": s["state"], "message": s["message"],
                          "jobs": len(mine), "completed": sum(1 for j in mine if j.state == "completed"),
                          "failed": sum(1 for j in mine if j.state == "failed"),
                          "failures": [j.message for j in mine if j.state == "failed"],
                          "rows_done": sum(j.done for j in mine), "rows_total": sum(j.total for j in mine)})
    slices = []
    subs.sort(key=lambda j: (pos.get(j.step, 1 << 30), j.model or "", j.seed or 0, j.benchmark or ""))
    for j in [j for j in jobs if j.slice != STEP_SLICE] + subs:  # per-slice jobs, then slices of whole-step jobs
        running = j.state == "running" and active
        fresh = j.updated_at is not None and now - j.updated_at < STALE_S
        rate = j.rate if running and fresh else None
        eta = (j.total - j.done) / rate if rate and j.total else None
        slices.append({"step": j.step, "slice": j.slice, "model": j.model,
                       "seed": j.seed, "benchmark": j.benchmark, "state": j.state if (active or j.state != "running")
                       else "interrupted", "phase": j.phase, "done": j.done, "total": j.total, "score": j.score,
                       "rate": rate, "eta_s": eta, "message": j.message})
    complete = bool(jobs) and all(j.state == "completed" for j in jobs)
    return {"campaign": str(path), "recipe": meta.get("recipe"), "run_tag": meta.get("run_tag"),
            "runtime": meta.get("runtime"), "running": active, "complete": complete,
            "last_run_state": meta.get("last_run_state"),
            "jobs": len(jobs), "jobs_completed": sum(1 for j in jobs if j.state == "completed"),
            "rows_done": sum(j.done for j in jobs), "rows_total": sum(j.total for j in jobs),
            "slices_total": len(slices), "slices_completed": sum(1 for x in slices if x["state"] == "completed"),
            "steps": out_steps, "slices": slices, "superseded": _superseded(Path(path)),
            "gpu_plan": _gpu_plan(meta)}


def _superseded(path: Path) -> list[dict[str, Any]]:
    """Outputs moved aside when their inputs changed (kept under superseded/STAMP, restorable)."""
    from trace_tui.engine.recovery import superseded

    return [{"stamp": e["stamp"], "step": e["step"], "slice": e["slice"], "changes": e.get("changes", [])}
            for e in superseded(path)]


def _gpu_plan(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU plan the last run gave its steps (trace_tui.plan.RunPlan, as the runner recorded it)."""
    import json

    try:
        steps = json.loads(meta.get("gpu_plan") or "[]")
    except ValueError:
        return []
    return steps if isinstance(steps, list) else []


def gpu_plan_lines(steps: list[dict[str, Any]]) -> list[str]:
    from trace_tui.plan import StepGpus

    out = []
    for raw in steps:
        try:
            out.append(StepGpus.model_validate(raw).line())
        except ValueError:
            continue
    return out


def render_status(st: dict[str, Any]) -> str:
    from trace_tui.engine.printer import fmt_duration

    lines = [f"campaign {st['campaign']}", f"recipe {st['recipe']}  run tag {st['run_tag']}  "
             f"{'running' if st['running'] else 'not running'}  "
             f"{'COMPLETE' if st['complete'] else 'incomplete'}  jobs {st['jobs_completed']}/{st['jobs']}"]
    lines.append("")
    lines.append(f"{'step':<20} {'state':<10} {'jobs':>9} {'rows':>17}")
    for s in st["steps"]:
        lines.append(f"{s['step']:<20} {s['state']:<10} {s['completed']:>4}/{s['jobs']:<4} "
                     f"{s['rows_done']:>8}/{s['rows_total']:<8}" + (f"  {s['message']}" if s["message"] else ""))
    rows = st["slices"]
    if rows:
        lines.append("")
        lines.append(f"{'step':<14} {'model':<28} {'seed':>5} {'benchmark':<22} {'state':<11} {'phase':<10} "
                     f"{'done':>7} {'total':>7} {'score':>7} {'rows/s':>7} {'ETA':>7}")
        for x in rows:
            score = f"{x['score']:.2f}" if x["score"] is not None else "-"
            rate = f"{x['rate']:.1f}" if x["rate"] else "-"
            eta = fmt_duration(x["eta_s"]) if x["eta_s"] is not None else "-"
            lines.append(f"{x['step']:<14} {x['model'] or '':<28} {x['seed'] if x['seed'] is not None else '':>5} "
                         f"{x['benchmark'] or '':<22} {x['state']:<11} {x['phase'] or '':<10} {x['done']:>7} "
                         f"{x['total']:>7} {score:>7} {rate:>7} {eta:>7}")
    for e in st.get("superseded") or []:
        lines.append(f"superseded: {e['step']} {e['slice']} kept under superseded/{e['stamp']} "
                     f"({'; '.join(e['changes'])})")
    plan = gpu_plan_lines(st.get("gpu_plan") or [])
    if plan:
        lines.append("")
        lines.append("GPU plan (as given to this campaign's last run)")
        lines += [f"  {line}" for line in plan]
    for s in st["steps"]:
        if s["state"] == "failed" and s.get("failures"):
            for msg in s["failures"]:
                lines.append(f"failed: {msg}")
    return "\n".join(lines)

"""A campaign's status from its state database, read-only (`trace-tui status`, the TUI)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

from trace_tui.campaign_files.presence import damaged_jobs, read_presence
from trace_tui.campaign_files.recipe_file import RECIPE_FILE, campaign_recipe_name
from trace_tui.campaign_files.state import STEP_SLICE, connect_readonly, read_snapshot
from trace_tui.engine.recovery import superseded
from trace_tui.errors import TraceTuiError

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
    damaged = recipe_damage(path)
    # Finished jobs whose receipt or outputs are gone or cut short (presence and sizes: a few stat calls a job)
    # are not finished: a resume redoes exactly those.
    lost = output_damage(path, jobs)
    # Finished jobs of a campaign whose recipe.json cannot be read are not a result anyone can resume,
    # verify or report: never COMPLETE.
    complete = bool(jobs) and all(j.state == "completed" for j in jobs) and damaged is None and not lost
    return {"campaign": str(path), "recipe": meta.get("recipe"), "run_tag": meta.get("run_tag"),
            "runtime": meta.get("runtime"), "running": active, "complete": complete, "damaged": damaged,
            "outputs_damaged": [{"step": step, "slice": slice_, "why": why} for (step, slice_), why in lost.items()],
            "last_run_state": meta.get("last_run_state"),
            "jobs": len(jobs),
            "jobs_completed": sum(1 for j in jobs if j.state == "completed" and (j.step, j.slice) not in lost),
            # the rows of the slices (per-slice jobs and the slices of whole-step jobs), as the run's own summary
            # and its progress lines count them: a preparation step's own rows are in neither (the list said 99/99
            # rows where the run said 96/96)
            "rows_done": sum(min(x["done"], x["total"]) for x in slices), "rows_total": sum(x["total"] for x in slices),
            "slices_total": len(slices), "slices_completed": sum(1 for x in slices if x["state"] == "completed"),
            "steps": out_steps, "slices": slices, "superseded": _superseded(Path(path)),
            "gpu_plan": _gpu_plan(meta)}


def output_damage(path: Path, jobs: list[Any]) -> dict[tuple[str, str], str]:
    """{(step, slice): why} for the completed jobs whose receipt or outputs are missing or changed in size."""
    conn = connect_readonly(path)
    try:
        noted = read_presence(conn)
    finally:
        conn.close()
    return damaged_jobs(path, jobs, noted)


def recipe_damage(path: Path) -> str | None:
    """Why the campaign's recipe.json cannot say what the campaign ran, in one line; None when it can.

    Read as the TUI and a resume find which recipe a campaign holds (recipe_file.campaign_recipe_name),
    so that status, the campaign list and opening the campaign agree on what is damaged.
    """
    try:
        if campaign_recipe_name(path) is None:
            return f"{Path(path) / RECIPE_FILE}: missing (a run writes it when it starts)"
    except TraceTuiError as exc:
        return exc.line()
    return None


def _superseded(path: Path) -> list[dict[str, Any]]:
    """Outputs moved aside when their inputs changed (kept under superseded/STAMP, restorable)."""
    return [{"stamp": e["stamp"], "step": e["step"], "slice": e["slice"], "changes": e.get("changes", [])}
            for e in superseded(path)]


def _gpu_plan(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU plan the last run gave its steps (trace_tui.gpu_plan.RunPlan, as the runner recorded it)."""
    import json

    try:
        steps = json.loads(meta.get("gpu_plan") or "[]")
    except ValueError:
        return []
    return steps if isinstance(steps, list) else []


def gpu_plan_lines(steps: list[dict[str, Any]]) -> list[str]:
    if not steps:
        return []
    from trace_tui.gpu_plan import StepGpus

    out = []
    for raw in steps:
        try:
            out.append(StepGpus.model_validate(raw).line())
        except ValueError:
            continue
    return out


def format_columns(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    """Aligned text columns, each as wide as its widest cell (long model ids and step names included)."""
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return [line(header)] + [line(r) for r in rows]


def render_status(st: dict[str, Any]) -> str:
    def fmt_duration(seconds: float) -> str:  # the printer's (its module imports the event models: ~1 s cold)
        from trace_tui.engine.printer import fmt_duration

        return fmt_duration(seconds)

    verdict = "DAMAGED" if st.get("damaged") else "COMPLETE" if st["complete"] else "incomplete"
    lines = [f"campaign {st['campaign']}", f"recipe {st['recipe']}  run tag {st['run_tag']}  "
             f"{'running' if st['running'] else 'not running'}  {verdict}  jobs {st['jobs_completed']}/{st['jobs']}"]
    if st.get("damaged"):
        lines.append(f"damaged: {st['damaged']}")
    lost = st.get("outputs_damaged") or []
    for x in lost[:10]:
        lines.append(f"not as finished: {x['step']} {x['slice']}: {x['why']}")
    if len(lost) > 10:
        lines.append(f"not as finished: {len(lost) - 10} more jobs")
    if lost:
        lines.append("run the recipe on this campaign again: a resume redoes exactly these (what is left of them "
                     "is moved aside under superseded/)")
    lines.append("")
    steps = [[s["step"], s["state"], f"{s['completed']}/{s['jobs']}", f"{s['rows_done']}/{s['rows_total']}",
              s["message"] or ""] for s in st["steps"]]
    lines += format_columns(["step", "state", "jobs", "rows", ""], steps, right={2, 3})
    rows = st["slices"]
    if rows:
        lines.append("")
        cells = []
        for x in rows:
            cells.append([x["step"], x["model"] or "", "" if x["seed"] is None else str(x["seed"]),
                          x["benchmark"] or "", x["state"], x["phase"] or "", str(x["done"]), str(x["total"]),
                          f"{x['score']:.2f}" if x["score"] is not None else "-",
                          f"{x['rate']:.1f}" if x["rate"] else "-",
                          fmt_duration(x["eta_s"]) if x["eta_s"] is not None else "-"])
        lines += format_columns(["step", "model", "seed", "benchmark", "state", "phase", "done", "total", "score",
                                 "rows/s", "ETA"], cells, right={2, 6, 7, 8, 9, 10})
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

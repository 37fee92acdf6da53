"""Slurm campaigns: merge and status over the 24-shard layout of `full`, and submit-to-first-task latency.

Merge and status run over synthetic shard directories (each a complete campaign of
one (model, seed): a state database with the release evaluator's whole-step jobs and
their 24 slices, as a finished shard has). Baselines, measured in the same run: the
same reads over ONE single-node campaign holding all 576 slices. The latency needs
Slurm: a one-node cluster started with .ci/slurm-cluster (as root, slurm-wlm
installed); without one it is reported as skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _complete_campaign(path: Path, resolved, slices) -> None:
    """A finished campaign of the `full` recipe over ``slices``: its state and each job's receipt (no outputs:
    merge and status read the state, and a job counts as done only while its receipt is there)."""
    from trace_tui.campaign_files.state import STEP_SLICE
    from trace_tui.engine.campaign import Campaign

    now = time.time()
    with Campaign(path) as c:
        c.set_meta(run_tag=resolved.run_tag, recipe=resolved.recipe.name, last_run_state="completed")
        c.upsert_steps([(s.id, i, s.title, s.run[0], s.per_slice) for i, s in enumerate(resolved.recipe.steps)])
        for s in resolved.recipe.steps:
            c.set_step_state(s.id, "completed")
        total = sum(resolved.rows_of(x.benchmark) for x in slices)
        c.record_plan([{"step": s.id, "slice": STEP_SLICE, "model": None, "seed": None, "benchmark": None,
                        "input_hash": f"h-{s.id}", "inputs": "{}", "state": "completed", "total": total,
                        "message": "", "now": now} for s in resolved.recipe.steps])
        for s in resolved.recipe.steps:
            receipt = path / "receipts" / s.id / "_step.json"
            receipt.parent.mkdir(parents=True, exist_ok=True)
            receipt.write_text(json.dumps({"step": s.id, "slice": STEP_SLICE, "outputs": {}}) + "\n")
            c.update_job(s.id, STEP_SLICE, done=total, receipt=f"receipts/{s.id}/_step.json")
        rows = [{"step": s.id, "slice": x.id, "model": x.model, "seed": x.seed, "benchmark": x.benchmark,
                 "input_hash": f"h-{s.id}-{x.id}", "inputs": "{}", "total": resolved.rows_of(x.benchmark),
                 "message": "", "now": now}
                for s in resolved.recipe.steps if s.stage in ("infer", "score") for x in slices]
        c.record_sub_slices(rows)
        for r in rows:
            c.update_slice(r["step"], r["slice"], state="completed", done=r["total"], score=50.0)
    data = resolved.model_dump(mode="json")
    data["slices"] = [x.model_dump() for x in slices]
    (path / "recipe.json").write_text(json.dumps(data), encoding="utf-8")


def synthetic_full_layout(parent: Path):
    """PARENT/shards.json and 24 complete shard campaigns of `full`; returns (resolved, plan)."""
    from trace_tui.campaign_files.shards import plan_shards
    from trace_tui.engine.cluster import prepare_parent
    from trace_tui.recipe.catalog import resolve_recipe

    resolved = resolve_recipe("full")
    plan = plan_shards(resolved)
    prepare_parent(parent, resolved, plan)
    by_id = {x.id: x for x in resolved.slices}
    for shard in plan.shards:
        _complete_campaign(parent / shard.dir, resolved, [by_id[i] for i in shard.slices])
    return resolved, plan


def _best(fn, n: int = 3) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _latency() -> str:
    if os.geteuid() != 0 or shutil.which("slurmctld") is None:
        return "submit-to-first-task latency: skipped (needs root and slurm-wlm: apt-get install slurm-wlm munge)"
    from trace_tui.runtime import slurm

    d = Path(tempfile.mkdtemp(prefix="trace-tui-bench-slurm-"))
    up = subprocess.run([str(REPO / ".ci" / "slurm-cluster"), "up", str(d / "cluster")], capture_output=True,
                        text=True)
    if up.returncode != 0:
        return f"submit-to-first-task latency: skipped (the local cluster did not start: {up.stderr.strip()[-200:]})"
    os.environ["SLURM_CONF"] = up.stdout.strip().splitlines()[-1]
    try:
        out = []
        for _ in range(3):
            stamp = d / f"started-{time.time_ns()}"
            script = d / "probe.sbatch"
            script.write_text(slurm.array_script(
                name="probe", log=str(d / "probe-%A_%a.log"), opts=slurm.BatchOptions(), array="0-1",
                commands={0: ["sh", "-c", f"date +%s.%N > {stamp}"], 1: ["true"]},
                record=str(d / "rec-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.json")))
            t0 = time.time()
            slurm.submit(script)
            while not stamp.is_file() or not stamp.read_text().strip():
                time.sleep(0.05)
                if time.time() - t0 > 120:
                    return "submit-to-first-task latency: FAILED (no task started in 120 s)"
            out.append(float(stamp.read_text()) - t0)
        return (f"submit-to-first-task latency on the local one-node cluster: best {min(out):.2f} s, "
                f"worst {max(out):.2f} s over 3 submissions (sched_interval=1)")
    finally:
        subprocess.run([str(REPO / ".ci" / "slurm-cluster"), "down", str(d / "cluster")], check=False)
        shutil.rmtree(d, ignore_errors=True)


def run() -> list[str]:
    from trace_tui.engine.cluster import merge_campaign
    from trace_tui.engine.cluster_status import cluster_status
    from trace_tui.engine.status import campaign_status

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        parent = Path(tmp) / "full-sharded"
        resolved, plan = synthetic_full_layout(parent)
        single = Path(tmp) / "full-single"
        _complete_campaign(single, resolved, resolved.slices)
        merge_s = _best(lambda: merge_campaign(parent))
        base_s = _best(lambda: campaign_status(single))
        status_s = _best(lambda: cluster_status(parent, query=False))
        lines.append(f"merge of {len(plan.shards)} shards ({len(resolved.slices)} slices): {merge_s * 1000:.0f} ms "
                     f"({merge_s / base_s:.1f}x one single-node status over the same 576 slices, "
                     f"{base_s * 1000:.0f} ms)")
        lines.append(f"status over {len(plan.shards)} shards (no Slurm query): {status_s * 1000:.0f} ms "
                     f"({status_s / base_s:.1f}x the single-node baseline)")
    lines.append(_latency())
    return lines

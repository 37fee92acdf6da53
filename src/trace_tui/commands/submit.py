"""`trace-tui --recipe NAME --scheduler slurm`: submit through the service, then follow the jobs on the terminal
(Ctrl-C asks whether to cancel them); `--dry-run` prints the sbatch commands instead."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.engine.cluster import campaign_jobs, cancel_campaign
from trace_tui.engine.cluster_status import ACTIVE, SLURM_DIR, cluster_status
from trace_tui.errors import ExitCode
from trace_tui.runtime import slurm
from trace_tui.service.requests import SubmitRequest
from trace_tui.service.submit import prepare_submission, submit_prepared

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe

POLL_S = 5.0


def submit_campaign(request: SubmitRequest, resolved: ResolvedRecipe) -> int:
    """Submit (or with --dry-run print how to), then follow the jobs unless --no-wait; the exit code of the run."""
    prep = prepare_submission(request, resolved)
    parent, plan, scripts = prep.parent, prep.plan, prep.scripts
    out = sys.stdout
    if request.dry_run:
        out.write(f"campaign {parent}: {len(plan.shards)} shards by {plan.shard_by}; scripts in {parent / SLURM_DIR}\n"
                  "submit them with:\n")
        out.write(f"  ARRAY=$({shlex.join(slurm.sbatch_argv(scripts['shards']))})\n")
        out.write(f"  MERGE=$({shlex.join(slurm.sbatch_argv(scripts['merge']))[:-len(str(scripts['merge']))]}"
                  f"--dependency=afterok:$ARRAY {scripts['merge']})\n")
        out.write(f"  {shlex.join(slurm.sbatch_argv(scripts['verify']))[:-len(str(scripts['verify']))]}"
                  f"--dependency=afterok:$MERGE {scripts['verify']}\n")
        return ExitCode.OK

    if not request.run.yes and sys.stdin.isatty() and not _ask(
            f"submit {len(plan.shards)} shards of {plan.recipe} ({plan.rows_total} rows) to Slurm? [y/N] "):
        out.write(f"nothing submitted; the scripts are in {parent / SLURM_DIR}\n")
        return ExitCode.OK
    done = submit_prepared(request, prep)
    out.write(done.line() + "\n")
    if done.record is None:
        out.write(f"verify: trace-tui verify --campaign {parent}\n")
        return ExitCode.OK
    out.flush()
    if request.no_wait:
        out.write(f"watch: trace-tui status --campaign {parent}\n")
        return ExitCode.OK
    return watch(parent, done.record)



def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return True  # no one to ask: Ctrl-C (or SIGINT) means stop, as on one node
    try:
        return input(question).strip().lower() in ("y", "yes")
    except (EOFError, KeyboardInterrupt):
        return False


def watch(parent: Path, record: dict[str, Any], *, poll_s: float | None = None) -> int:
    """Follow the submission until the verify job ends or a shard fails; Ctrl-C asks, then scancels."""
    poll = poll_s if poll_s is not None else float(os.environ.get("TRACE_TUI_SLURM_POLL_S", POLL_S))
    out = sys.stdout
    seen: dict[str, str] = {}
    rows: dict[str, int] = {}
    printed: dict[str, float] = {}
    try:
        while True:
            st = cluster_status(parent)
            for s in st["shards"]:
                line = f"{s['slurm_state']} {s['campaign_state']}"
                moved = s["rows_done"] != rows.get(s["id"]) and time.time() - printed.get(s["id"], 0.0) >= 30
                if seen.get(s["id"]) != line or moved:  # a change of state at once, progress every 30 s
                    seen[s["id"]], rows[s["id"]], printed[s["id"]] = line, s["rows_done"], time.time()
                    out.write(f"shard {s['id']}: {s['slurm_state'].lower()}"
                              + (f" on {s['node']}" if s["slurm_state"] == "RUNNING" and s["node"] else "")
                              + (f" ({s['reason']})" if s["reason"] and s["slurm_state"] == "PENDING" else "")
                              + f", {s['rows_done']}/{s['rows_total']} rows\n")
            for f in st["finishing"]:
                if seen.get(f["kind"]) != f["slurm_state"]:
                    seen[f["kind"]] = f["slurm_state"]
                    out.write(f"{f['kind']} job {f['job_id']}: {f['slurm_state'].lower()}\n")
            out.flush()
            failed = [s for s in st["shards"] if s["slurm_state"] in slurm.TERMINAL
                      and s["slurm_state"] != "COMPLETED" and not s["complete"]]
            fin = {f["kind"]: f for f in st["finishing"]}
            if failed and not any(s["slurm_state"] in ACTIVE for s in st["shards"]):
                waiting = [f["job_id"] for f in st["finishing"] if f["slurm_state"] in ACTIVE]
                slurm.cancel(waiting)  # afterok can never be met: do not leave them pending
                for s in failed:
                    out.write(f"failed: shard {s['id']}: Slurm {s['slurm_state']} (exit {s['exit_code'] or '?'}); "
                              f"log {s['log']}\n")
                out.write(f"the merge did not run; fix the cause and run the same command again "
                          f"(campaign {parent})\n")
                return ExitCode.FAILED
            for kind in ("merge", "verify"):
                f = fin.get(kind)
                if f and f["slurm_state"] in slurm.TERMINAL and f["slurm_state"] != "COMPLETED":
                    out.write(f"failed: {kind} job {f['job_id']}: Slurm {f['slurm_state']}; log {f['log']}\n")
                    return ExitCode.FAILED
            if fin.get("verify", {}).get("slurm_state") == "COMPLETED":
                out.write(f"campaign {parent}: {len(st['shards'])} shards complete, merged and verified\n"
                          f"status: trace-tui status --campaign {parent}\nverify: trace-tui verify --campaign "
                          f"{parent}\n")
                return ExitCode.OK
            time.sleep(poll)
    except KeyboardInterrupt:
        jobs = campaign_jobs(parent)
        if jobs and _ask(f"\ncancel this campaign's {len(jobs)} Slurm job(s)? [y/N] "):
            jobs = cancel_campaign(parent)
            out.write(f"cancelled {len(jobs)} job(s); the shards keep what they finished: run the same command "
                      f"again to resume (campaign {parent})\n")
        else:
            out.write(f"left running; watch: trace-tui status --campaign {parent}\n")
        return ExitCode.INTERRUPTED

"""Stage worker: the release's own evaluator (trace_eval_v1), run unchanged inside the GPU images.

    python -m trace_tui.stages.release_eval --phase generate|score

It asks the launcher for `--print-config` first and keeps that output in the
campaign as the proof of what was asked (refusing to start when it disagrees
with the job), then runs the launcher with only this step's phase switched on,
turns the evaluator's campaign layout into progress events while it runs,
and, for scoring, requires the evaluator's own verification (`--phase score`)
to pass. The evaluator's campaign lives in the campaign directory: the launcher
is given TMP_ROOT (and LMUData, HF_HOME) in the campaign's `evaluator/` by its
real path, EVAL_DEPS_ROOT in the checkout, so nothing is written under the
image's read-only root and no path vLLM checks goes through a link. An
interrupted run resumes through the evaluator's own resume when the step runs
again.

A generate-only launch (RUN_SCORING=0) ends with the launcher's
`status_trace_eval.py --fail-if-incomplete`, whose "complete" needs every score
slice too: it exits 1 after a complete generation. That exit is not the step's
verdict: the step passes when every slice holds the suite's rows and the
evaluator's own generation verification passes.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.atomic import atomic_write_bytes, atomic_write_json
from trace_tui.errors import RequirementsError
from trace_tui.stages import eval_prepare, protocol
from trace_tui.stages.entry import parse_options
from trace_tui.stages.eval_prepare import (
    EVAL_DEPS,
    hf_home,
    make_work_dirs,
    marker_revision,
    prepared_model_path,
    work_root,
)
from trace_tui.stages.jobs import WorkerContext, described_models, run_step

if TYPE_CHECKING:
    from trace_tui.release import ReleaseLock

POLL_S = 2.0
SCORES_SCHEMA = "trace-tui-release-eval-scores-v1"
DATASET_MANIFEST = "LMUData/trace_eval_v1_dataset_manifest.json"


def evaluator_models(job: dict[str, Any], lock: ReleaseLock, store: Path, campaign: Path | None = None) -> list[Any]:
    """The evaluator's `--model` arguments for the job's models: weights from the read-only store.

    Where this campaign's prepare step made the model's directory (links into the store plus the
    evaluator's revision marker, trace_tui.stages.eval_prepare), that directory is the path.
    """
    from trace_tui.evaluator.launcher import EvaluatorModel, local_source
    from trace_tui.store import Store, model_entry

    st = Store(store)
    work = work_root(campaign) if campaign is not None else None

    def where(slug: str, entry: str) -> str:
        prepared = prepared_model_path(work, slug) if work is not None else None
        return str(prepared) if prepared is not None else str(st.path_of(entry))

    ids = list(dict.fromkeys(s["model"] for s in job.get("slices") or []))
    described = {m.get("id"): m for m in described_models(job, campaign) if isinstance(m, dict)}
    out = []
    for model_id in ids:
        pin = next((m for m in lock.models if m.id == model_id), None)
        if pin is not None:
            entry = model_entry(pin.repo_id, pin.revision)
            out.append(EvaluatorModel(model_id=pin.id, slug=pin.evaluator_slug, path=where(pin.evaluator_slug, entry),
                                      revision=pin.revision, source=pin.ref, label=pin.label))
            continue
        local = described.get(model_id) or {}
        entry = local.get("store_entry")
        if not entry:
            raise SystemExit(f"model {model_id!r} is neither a release model nor a local store entry")
        record = st.record(entry)
        if record is None:
            from trace_tui.store import fix_command

            raise RequirementsError(f"model {model_id}: the store has no entry {entry}", hint=fix_command(entry))
        # A local checkpoint's immutable revision: what the evaluator's register-local recorded in its
        # marker (its content hash, equal to the store's sha256set), else the one given with it.
        revision = (marker_revision(work, model_id) if work is not None else None) \
            or local.get("revision") or record.sha256set
        out.append(EvaluatorModel(model_id=model_id, slug=model_id, path=where(model_id, entry), revision=revision,
                                  source=local_source(model_id, revision), label=local.get("label") or model_id))
    return out


def job_gpu_groups(job: dict[str, Any]) -> list[list[int]]:
    """The launcher's GPU_GROUPS: exactly the run plan's groups for this step (the runner's job spec,
    numbered as the container sees its GPUs), e.g. two tp-2 endpoints "0,1 2,3" for 7B on 24 GiB cards.
    Only a job spec without them (written by hand) falls back to one endpoint per given GPU."""
    planned = [list(g) for g in job.get("gpu_groups") or [] if g]
    return planned or gpu_groups(list(job.get("gpus") or [0]))


def gpu_groups(gpus: list[int], tensor_parallel: int = 1) -> list[list[int]]:
    """GPU groups of `tensor_parallel` devices each (the launcher starts one endpoint per group)."""
    groups = [gpus[i:i + tensor_parallel] for i in range(0, len(gpus), tensor_parallel)]
    return [g for g in groups if len(g) == tensor_parallel] or [list(gpus)]


def campaign_root(campaign: Path, run_tag: str) -> Path:
    """The launcher's CAMPAIGN_ROOT (`${TMP_ROOT}/<run tag>`): the campaign's `evaluator/<run tag>`, made here."""
    work = work_root(campaign)
    make_work_dirs(work)
    (work / run_tag).mkdir(parents=True, exist_ok=True)
    return work / run_tag


class _Tail:
    """The launcher's output as log events, keeping the last lines for a failure message and the last
    summary line of its status script (`[trace-eval-status] generation=R/E ...`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.last: collections.deque[str] = collections.deque(maxlen=20)
        self.status_line: str | None = None
        self.thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self.thread.start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            self.last.append(line)
            if line.startswith(STATUS_PREFIX):
                self.status_line = line
            protocol.log(line, level="output")


STATUS_PREFIX = "[trace-eval-status] generation="


def generation_rows_complete(status_line: str | None) -> bool:
    """Whether the launcher's last status summary says every generation row is durable (R == E > 0)."""
    import re

    m = re.match(r"^\[trace-eval-status\] generation=(\d+)/(\d+) ", status_line or "")
    return bool(m) and int(m.group(1)) == int(m.group(2)) > 0


# The launcher on CPU (the cpu images: vLLM's CPU build, no GPU groups): its pool starts `vllm serve` with a
# fixed argument list (no --enforce-eager), and the server's torch.compile warm-up fails on CPU in
# torch._dynamo; with dynamo off, torch.compile runs the model eagerly. The GPU path keeps compilation.
CPU_LAUNCH_ENV = {"TORCHDYNAMO_DISABLE": "1"}


def launch_environment(environ: dict[str, str], evaluator: Path, work: Path, run_tag: str,
                       launcher_vars: dict[str, str], *, cpu: bool = False) -> dict[str, str]:
    """The launcher's environment: ENVIRON, our launcher variables, and where it writes.

    Its `.work` (TMP_ROOT, with the campaign root, logs, results, models, LMUData and TMPDIR under it)
    is WORK, the campaign's `evaluator/` by its real path; only its dependency target stays in the
    checkout. An inherited value of any of these would win in the launcher (`${X:-default}`), so each
    is set. HF_HOME is the dataset view's cache: the score image sets one (/tmp/hf, empty), where the
    Hub-dataset adapters would find nothing, and the scorer refuses a missing one."""
    where = {"TMP_ROOT": str(work), "CAMPAIGN_ROOT": str(work / run_tag),
             "SCORE_ROOT": str(work / run_tag / "scoring"), "LOG_ROOT": str(work / "logs" / run_tag),
             "RESULTS_ROOT": str(work / "results"), "MODEL_ROOT": str(work / "models"),
             "LMUData": str(work / "LMUData"), "DATASET_MANIFEST": str(work / DATASET_MANIFEST),
             "TMPDIR": str(work / "tmp"), "EVAL_DEPS_ROOT": str(Path(evaluator).resolve() / EVAL_DEPS),
             "LOCAL_ARCHIVE_SPOOL_ROOT": str(work / run_tag / "hf_archive")}
    return {**environ, **launcher_vars, **where, "HF_HOME": str(hf_home(work)), **(CPU_LAUNCH_ENV if cpu else {})}


def run(phase: str, job: dict[str, Any], campaign: Path, store: Path, evaluator: Path) -> int:
    from trace_tui.evaluator.launcher import (
        config_mismatches,
        deltas_for,
        launcher_argv,
        launcher_env,
        parse_print_config,
        verifier_argv,
    )
    from trace_tui.evaluator.layout import receipt_problems, scan_campaign
    from trace_tui.release import release_lock

    lock = release_lock()
    suite_keys = [b.key for b in lock.trace_eval.benchmarks]
    asked = list(dict.fromkeys(s["benchmark"] for s in job.get("slices") or []))
    if sorted(asked) != sorted(suite_keys):
        protocol.status("failed", "the release launcher runs the whole suite (it takes no benchmark filter); "
                        "run `full` without --benchmarks", exit_code=2)
        return 2
    # The dataset view and model markers in this campaign (made once; eval-setup checked them already).

    eval_prepare.prepare(job, campaign, store, evaluator, only_missing=True, report=False)
    models = evaluator_models(job, lock, store, campaign)
    seeds = sorted({int(s["seed"]) for s in job["slices"]})
    run_tag = job["run_tag"]
    out_dir = campaign / job["output_dir"]
    out_dir.mkdir(parents=True, exist_ok=True)
    root = campaign_root(campaign, run_tag)
    work = root.parent
    manifest = work / DATASET_MANIFEST
    base_of = {m.id: m.base_model_id for m in lock.models if m.base_model_id}
    deltas = deltas_for(models, base_of)

    printed = subprocess.run(launcher_argv(models, seeds, run_tag, deltas=deltas, print_config=True),
                             cwd=evaluator, capture_output=True, text=True, check=False)
    atomic_write_bytes(out_dir / "print-config.txt", printed.stdout.encode())
    protocol.artifact(out_dir / "print-config.txt", campaign)
    if printed.returncode != 0:
        protocol.status("failed", f"--print-config exited {printed.returncode}: {printed.stderr.strip()[-400:]}",
                        exit_code=printed.returncode)
        return 1
    problems = config_mismatches(parse_print_config(printed.stdout), models, seeds, run_tag,
                                 lock.trace_eval.suite_id)
    if problems:
        protocol.status("failed", "the launcher would run something else: " + "; ".join(problems), exit_code=1)
        return 1

    env = launch_environment(dict(os.environ), evaluator, work, run_tag, launcher_env(phase, job_gpu_groups(job)),
                             cpu=not job.get("gpus"))
    (work / "tmp").mkdir(exist_ok=True)
    proc = subprocess.Popen(launcher_argv(models, seeds, run_tag, deltas=deltas), cwd=evaluator, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    tail = _Tail(proc)
    rows = {k: r for k, r in ((b.key, b.rows) for b in lock.trace_eval.benchmarks)}
    slug_to_id = {m.slug: m.model_id for m in models}
    seen: dict[tuple[str, int, str], tuple[int, str, float | None]] = {}

    def report() -> list[Any]:
        slices = scan_campaign(root, slugs=list(slug_to_id), seeds=seeds, rows=rows)
        for s in slices:
            key = (s.slug, s.seed, s.benchmark)
            state = (s.rows_done, s.phase, s.score)
            if seen.get(key) != state:
                seen[key] = state
                protocol.progress(model=slug_to_id[s.slug], seed=s.seed, benchmark=s.benchmark, phase=s.phase,
                                  done=s.rows_done if phase == "generate" else int(s.score is not None) * s.rows_expected,
                                  total=s.rows_expected)
                if phase == "score" and s.score is not None:
                    # The engine records it per slice in the receipt; `verify --campaign` re-reads it
                    # (trace_tui.workers.recompute_release_eval).
                    protocol._emit({"type": "metric", "name": "score", "value": s.score,
                                    "model": slug_to_id[s.slug], "seed": s.seed, "benchmark": s.benchmark})
        return slices

    try:
        while proc.poll() is None:
            report()
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        proc.terminate()
        raise
    tail.thread.join(timeout=5)
    slices = report()
    # A generate-only launch exits 1 from its final status check once generation is complete (scores pending):
    # then the slices and the evaluator's generation verification below decide.
    generate_only_end = phase == "generate" and proc.returncode == 1 and generation_rows_complete(tail.status_line)
    exited = (f"run_trace_eval.sh exited {proc.returncode}; last lines: " + " | ".join(list(tail.last)[-5:])
              if proc.returncode != 0 else "")
    if phase == "generate":
        # The launcher's exit is not enough: every slice must hold the suite's rows (a partial slice fails the step
        # and is resumed by the next run), and the evaluator's own generation verification must pass.
        short = [s for s in slices if not s.generation_complete]
        if short:
            names = ", ".join(f"{slug_to_id[s.slug]}/{s.seed}/{s.benchmark} ({s.rows_done}/{s.rows_expected})"
                              for s in short[:6])
            protocol.status("failed", f"generation left {len(short)} of {len(slices)} slices short of their rows: "
                            f"{names}{' …' if len(short) > 6 else ''}; run the step again to resume them"
                            + (f" ({exited})" if exited else ""), exit_code=proc.returncode or 1)
            return 1
    if exited and not generate_only_end:
        protocol.status("failed", exited, exit_code=proc.returncode)
        return 1
    if phase == "generate":
        failed = _verify_generation(evaluator, root, models, seeds, out_dir, campaign, manifest)
        if failed:
            protocol.status("failed", failed, exit_code=1)
            return 1
    if phase == "score":
        checked = subprocess.run(verifier_argv(str(root), list(slug_to_id), seeds, sys.executable,
                                               dataset_manifest=str(manifest)),
                                 cwd=evaluator, capture_output=True, text=True, check=False)
        atomic_write_bytes(out_dir / "verification.json", checked.stdout.encode())
        protocol.artifact(out_dir / "verification.json", campaign)
        if checked.returncode != 0:
            protocol.status("failed", "the evaluator's verification (--phase score) did not pass: "
                            + checked.stdout.strip()[-400:], exit_code=checked.returncode)
            return 1
        problems = receipt_problems(root, slices, seeds)
        if problems:
            protocol.status("failed", problems[0], exit_code=1)
            return 1
        scores = [dict(s.model_dump(), model=slug_to_id[s.slug]) for s in slices]
        atomic_write_json(out_dir / "scores.json", {
            "schema": SCORES_SCHEMA, "suite": lock.trace_eval.suite_id, "run_tag": run_tag,
            "campaign_root": f"evaluator/{run_tag}", "seeds": seeds,
            "models": [m.model_dump() for m in models], "slices": scores})
        protocol.artifact(out_dir / "scores.json", campaign)
    protocol.status("completed", f"{phase}: {sum(1 for s in slices if s.phase != 'generating')} of "
                    f"{len(slices)} slices done")
    return 0


def _verify_generation(evaluator: Path, root: Path, models: list[Any], seeds: list[int], out_dir: Path,
                       campaign: Path, manifest: Path) -> str | None:
    """verify_trace_eval.py --phase generation with the launcher's fingerprints; a failure line, or None."""
    from trace_tui.evaluator.launcher import generation_verifier_argv, provenance_argvs

    first, second = provenance_argvs(sys.executable)
    ev = subprocess.run(first, cwd=evaluator, capture_output=True, text=True, check=False)
    code = subprocess.run([*second, ev.stdout.strip()], cwd=evaluator, capture_output=True, text=True, check=False)
    if ev.returncode != 0 or code.returncode != 0:
        return "the evaluator's fingerprints failed: " + (ev.stderr or code.stderr).strip()[-300:]
    checked = subprocess.run(generation_verifier_argv(str(root), models, seeds, code_hash=code.stdout.strip(),
                                                      evaluator_hash=ev.stdout.strip(), python=sys.executable,
                                                      dataset_manifest=str(manifest)),
                             cwd=evaluator, capture_output=True, text=True, check=False)
    atomic_write_bytes(out_dir / "generation-verification.json", checked.stdout.encode())
    protocol.artifact(out_dir / "generation-verification.json", campaign)
    if checked.returncode == 0:
        return None
    try:
        bad = json.loads(checked.stdout).get("incomplete") or []
        detail = ", ".join(f"{r['model_slug']}/{r['seed']}/{r['benchmark_key']} ({r['detail']})" for r in bad[:4])
    except (ValueError, AttributeError, KeyError, TypeError):
        detail = (checked.stdout + checked.stderr).strip()[-300:]
    return f"the evaluator's generation verification did not pass: {detail}"


@dataclass(frozen=True)
class ReleaseEvalOptions:
    """The command line: --phase generate|score."""

    phase: str = field(metadata={"choices": ("generate", "score")})


def run_phase(job: dict[str, Any], context: WorkerContext, opts: ReleaseEvalOptions) -> int:
    campaign, store, evaluator = context.campaign, context.store, context.evaluator
    if not (evaluator / "rlvr" / "evaluation" / "scripts" / "run_trace_eval.sh").is_file():
        protocol.status("failed", f"no release evaluator at {evaluator} (the GPU flavour of the infer and score "
                        "images carries it; build it with `make appliance FLAVOR=gpu`)", exit_code=3)
        return 3

    # a model missing from the store (TraceTuiError) or a stop: one status line (run_step), not a traceback
    return run(opts.phase, job, campaign, store, evaluator)


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(ReleaseEvalOptions, argv, prog="release_eval")
    # a stop terminates run_trace_eval.sh too (run's KeyboardInterrupt handler)
    return run_step(lambda job, context: run_phase(job, context, opts), quiet=False)


if __name__ == "__main__":
    sys.exit(main())

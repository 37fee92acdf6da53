"""The release_eval stage worker, end to end, against a stand-in launcher.

The real launcher needs GPUs, vLLM, the benchmark data and the judge; the
stand-in (tests/fake_evaluator) sits exactly where it would, speaks its
documented interface (arguments, --print-config, environment toggles, campaign
layout, verify_trace_eval.py) and nothing more. Everything on our side — the
worker, the command line, the progress it reads, the checks it makes — is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_external_prepare import setup  # noqa: F401 - the same evaluator, campaign and store fixture

from trace_tui.engine.events import parse_stage_line
from trace_tui.release import release_lock
from trace_tui.store import Store, local_entry

LOCK = release_lock()
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
SMALL_ROWS = {b.key: 3 for b in LOCK.trace_eval.benchmarks}  # the stand-in writes 3 rows per slice


def _job(tmp_path: Path, models=TWO, seeds=(42,), benchmarks=None, **extra) -> Path:
    benchmarks = benchmarks or [b.key for b in LOCK.trace_eval.benchmarks]
    job = {"step": "generate", "recipe": "full", "run_tag": "full-test", "output_dir": "steps/generate",
           "gpus": [0, 1], "slices": [{"model": m, "seed": s, "benchmark": b}
                                      for m in models for s in seeds for b in benchmarks], **extra}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    return path


def _run(phase: str, tmp_path: Path, evaluator: Path, campaign: Path, store: Store, job: Path, **env):
    scores = {f"{m.evaluator_slug}/42/{b.key}": 50.0 for m in LOCK.models for b in LOCK.trace_eval.benchmarks}
    scores.update({f"my-ckpt/42/{b.key}": 40.0 for b in LOCK.trace_eval.benchmarks})
    spec = tmp_path / "fake.json"
    spec.write_text(json.dumps({"rows": SMALL_ROWS, "scores": scores}))
    full_env = {**os.environ, "TRACE_TUI_JOB": str(job), "TRACE_TUI_CAMPAIGN": str(campaign),
                "TRACE_TUI_STORE": str(store.root), "TRACE_TUI_EVALUATOR": str(evaluator),
                "FAKE_EVAL_SPEC": str(spec), **env}
    done = subprocess.run([sys.executable, "-m", "trace_tui.stages.release_eval", "--phase", phase],
                          env=full_env, capture_output=True, text=True, timeout=120, check=False)
    return done, [parse_stage_line(line) for line in done.stdout.splitlines()]


def test_generate_keeps_the_print_config_and_reports_progress_per_slice(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    status = [e for e in events if e.type == "status"][-1]
    # The stand-in writes 3 rows a slice while the suite expects the real counts: generation is partial.
    assert status.state == "completed", done.stderr
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    assert "run_tag=full-test" in printed and "model=qwen25vl3b-base" in printed
    progress = [e for e in events if e.type == "progress"]
    assert {(e.model, e.seed) for e in progress} == {(m, 42) for m in TWO}
    assert {e.benchmark for e in progress} == set(SMALL_ROWS)
    chart = [e for e in progress if e.benchmark == "chartqapro" and e.model == TWO[0]][-1]
    assert (chart.done, chart.total) == (3, 1948)
    logs = [e.message for e in events if e.type == "log"]
    assert "GPU_GROUPS=0 1 RUN_GENERATION=1 RUN_SCORING=0" in logs
    # The evaluator's campaign lives in ours, so a rerun resumes it.
    assert (campaign / "evaluator" / "full-test" / "seed_42" / "runs" / "chartqapro").is_dir()


def test_score_requires_the_evaluator_verification_and_records_scores(setup):
    tmp_path, evaluator, campaign, store = setup
    _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    done, events = _run("score", tmp_path, evaluator, campaign, store, _job(tmp_path))
    status = [e for e in events if e.type == "status"][-1]
    assert status.state == "completed", (status.message, done.stderr)
    scores = json.loads((campaign / "steps/generate/scores.json").read_text())
    assert len(scores["slices"]) == 48 and {s["score"] for s in scores["slices"]} == {50.0}
    assert json.loads((campaign / "steps/generate/verification.json").read_text())["complete"] is True
    assert {e.path for e in events if e.type == "artifact"} >= {"steps/generate/scores.json",
                                                                "steps/generate/verification.json"}


def test_a_failing_launcher_is_a_failed_step_with_its_last_lines(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path), FAKE_EVAL_FAIL="1")
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 1 and status.state == "failed"
    assert "exited 3" in status.message and "CUDA out of memory" in status.message


def test_a_benchmark_subset_is_refused_in_one_line(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path, benchmarks=["mathvista"]))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 2 and "takes no benchmark filter" in status.message


def test_a_model_missing_from_the_store_names_the_fix(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store,
                        _job(tmp_path, models=["qwen2.5-vl-7b-base"]))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 3 and "Qwen/Qwen2.5-VL-7B-Instruct" in status.message and "Traceback" not in done.stderr


def test_a_users_own_checkpoint_is_evaluated_the_same_way(setup):
    tmp_path, evaluator, campaign, store = setup
    ckpt = tmp_path / "my-ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    entry = local_entry("model", "my-ckpt")
    store.import_local(entry, ckpt)
    job = _job(tmp_path, models=["my-ckpt"])
    data = json.loads(job.read_text())
    data["models"] = [{"id": "my-ckpt", "store_entry": entry, "revision": "v1", "label": "My checkpoint"}]
    job.write_text(json.dumps(data))
    _run("generate", tmp_path, evaluator, campaign, store, job)
    done, events = _run("score", tmp_path, evaluator, campaign, store, job)
    assert [e for e in events if e.type == "status"][-1].state == "completed", done.stdout[-500:]
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    assert "model=my-ckpt" in printed and "source=local/my-ckpt@v1" in printed


def test_the_launcher_reads_the_prepared_models_and_datasets(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    assert [e for e in events if e.type == "status"][-1].state == "completed", done.stdout[-800:]
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    # the model directory with the evaluator's revision marker, in this campaign, not the bare store folder
    assert f"path={evaluator}/rlvr/evaluation/.work/models/qwen25vl3b-base " in printed
    assert (campaign / "evaluator/models/qwen3-32b-judge/.trace_model_revision.json").is_file()
    assert (campaign / "evaluator/LMUData/trace_eval_v1_dataset_manifest.json").is_file()
    # a second run keeps what is prepared (no re-registration of unchanged revisions)
    marker = campaign / "evaluator/models/qwen25vl3b-base/.trace_model_revision.json"
    before = marker.stat().st_mtime_ns
    _run("score", tmp_path, evaluator, campaign, store, _job(tmp_path))
    assert marker.stat().st_mtime_ns == before

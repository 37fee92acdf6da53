"""The release_eval stage worker, end to end, with the release's evaluator and a stand-in for its GPU part.

The checkout is the release's (tests/fixtures_evaluator.py); only the launcher's run
is the stand-in (tests/fake_evaluator: vLLM generation and judge endpoints need GPUs),
which writes the evaluator's campaign layout with the evaluator's own functions.
`--print-config`, the model preparation (register-local, verify --deep) and both phases
of verify_trace_eval.py are the release's scripts; the worker's command lines, the
progress it reads and the checks it makes are real. The dataset manifest is the one
prepare_trace_eval_manifest.py would leave (it needs the real benchmark data).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_evaluator import install_stand_in, run_script, stand_in_env
from test_external_prepare import fill_store, prepared_dataset_view

from trace_tui.engine.events import parse_stage_line
from trace_tui.release import release_lock
from trace_tui.store import Store, local_entry

LOCK = release_lock()
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}
SHORT_ROWS = {b: 3 for b in ROWS}  # a run cut short: 3 rows a slice


@pytest.fixture()
def setup(tmp_path, trace_release_dir, evaluator_checkout):
    evaluator = install_stand_in(evaluator_checkout)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    store = fill_store(tmp_path / "store", trace_release_dir)
    prepared_dataset_view(evaluator, campaign)
    return tmp_path, evaluator, campaign, store


def _job(tmp_path: Path, models=TWO, seeds=(42,), benchmarks=None, **extra) -> Path:
    benchmarks = benchmarks or list(ROWS)
    job = {"step": "generate", "recipe": "full", "run_tag": "full-test", "output_dir": "steps/generate",
           "gpus": [0, 1], "slices": [{"model": m, "seed": s, "benchmark": b}
                                      for m in models for s in seeds for b in benchmarks], **extra}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    return path


def _run(phase: str, tmp_path: Path, evaluator: Path, campaign: Path, store: Store, job: Path, rows=None, **env):
    scores = {f"{m.evaluator_slug}/42/{b}": 50.0 for m in LOCK.models for b in ROWS}
    scores.update({f"my-ckpt/42/{b}": 40.0 for b in ROWS})
    spec = tmp_path / "fake.json"
    # finished slices without their per-row files (their summaries carry the rows): thousands of files less
    spec.write_text(json.dumps({"rows": rows or {}, "scores": scores, "row_files": False}))
    full_env = {**os.environ, "TRACE_TUI_JOB": str(job), "TRACE_TUI_CAMPAIGN": str(campaign),
                "TRACE_TUI_STORE": str(store.root), "TRACE_TUI_EVALUATOR": str(evaluator), **stand_in_env(spec), **env}
    done = subprocess.run([sys.executable, "-m", "trace_tui.stages.release_eval", "--phase", phase],
                          env=full_env, capture_output=True, text=True, timeout=300, check=False)
    return done, [parse_stage_line(line) for line in done.stdout.splitlines()]


def _status(events):
    return [e for e in events if e.type == "status"][-1]


def test_generate_keeps_the_print_config_and_reports_progress_per_slice(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    status = _status(events)
    assert status.state == "completed", (status.message, done.stderr[-800:])
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    assert "run_tag=full-test" in printed and "model=qwen25vl3b-base" in printed
    progress = [e for e in events if e.type == "progress"]
    assert {(e.model, e.seed) for e in progress} == {(m, 42) for m in TWO}
    assert {e.benchmark for e in progress} == set(ROWS)
    chart = [e for e in progress if e.benchmark == "chartqapro" and e.model == TWO[0]][-1]
    assert (chart.done, chart.total) == (1948, 1948)
    logs = [e.message for e in events if e.type == "log"]
    assert any("GPU_GROUPS=0 1 RUN_GENERATION=1 RUN_SCORING=0" in m for m in logs)
    # the evaluator's own generation verification passed on what the stand-in wrote
    verified = json.loads((campaign / "steps/generate/generation-verification.json").read_text())
    assert verified["complete"] is True and verified["completed_slices"] == 48
    # The evaluator's campaign lives in ours (the launcher's CAMPAIGN_ROOT), so a rerun resumes it; nothing
    # was written into the checkout's .work (the images' root filesystem is read-only).
    assert not (evaluator / "rlvr/evaluation/.work/full-test").exists()
    assert sorted(p.name for p in (evaluator / "rlvr/evaluation/.work").iterdir()) == ["eval_deps"]
    assert verified["records"][0]["path"].startswith(str((campaign / "evaluator" / "full-test").resolve()))
    assert (campaign / "evaluator" / "full-test" / "seed_42" / "runs" / "chartqapro").is_dir()


def test_a_generate_only_launch_ending_in_the_incomplete_status_is_a_finished_step(setup):
    """Issue 28, stop 5: the launcher's last command is `status_trace_eval.py --fail-if-incomplete`, whose
    "complete" needs every score slice, so a generate-only launch (RUN_SCORING=0) exits 1 after a complete
    generation. The worker takes the generation from the slices and the evaluator's own verification."""
    tmp_path, evaluator, campaign, store = setup
    launcher = (evaluator / "rlvr/evaluation/scripts/run_trace_eval.real.sh").read_text().rstrip().splitlines()
    assert launcher[-2].endswith('status_trace_eval.py" "${final_status_args[@]}" --fail-if-incomplete')
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    logs = [e.message for e in events if e.type == "log"]
    # the real status script said generation complete and scores 0 of 48, and exited 1
    assert any(m.startswith("[trace-eval-status] generation=65610/65610 ") and "scores=0/48" in m for m in logs)
    status = _status(events)
    assert status.state == "completed" and done.returncode == 0, status.message


def test_a_generation_cut_short_fails_naming_the_short_slices_and_a_rerun_completes(setup):
    """Issue 14 defect 4 at the worker: the launcher exiting 0 with 3 of 1,948 rows is not a finished step."""
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path), rows=SHORT_ROWS)
    status = _status(events)
    assert done.returncode == 1 and status.state == "failed", status.message
    assert "generation left 48 of 48 slices short of their rows" in status.message
    assert "qwen2.5-vl-3b-base/42/chartqapro (3/1948)" in status.message and "run the step again" in status.message
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    assert _status(events).state == "completed", _status(events).message


def test_what_the_stand_in_writes_is_accepted_by_the_evaluators_status(setup):
    tmp_path, evaluator, campaign, store = setup
    _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    _run("score", tmp_path, evaluator, campaign, store, _job(tmp_path))
    root = campaign / "evaluator/full-test"
    done = run_script(evaluator, "status_trace_eval.py", "--campaign-root", str(root), "--dataset-manifest",
                      str(campaign / "evaluator/LMUData/trace_eval_v1_dataset_manifest.json"), "--no-gpu", "--json",
                      "--model-slug", "qwen25vl3b-base", "--model-slug", "trace-qwen25vl3b", "--seeds", "42")
    report = json.loads(done.stdout)
    assert report["complete"] is True and report["score_slices"] == 48 and not report["warnings"], report["warnings"]


def test_score_requires_the_evaluator_verification_and_records_scores(setup):
    tmp_path, evaluator, campaign, store = setup
    _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    done, events = _run("score", tmp_path, evaluator, campaign, store, _job(tmp_path))
    status = [e for e in events if e.type == "status"][-1]
    assert status.state == "completed", (status.message, done.stderr)
    scores = json.loads((campaign / "steps/generate/scores.json").read_text())
    assert len(scores["slices"]) == 48 and {s["score"] for s in scores["slices"]} == {50.0}
    verification = json.loads((campaign / "steps/generate/verification.json").read_text())
    assert verification["complete"] is True and verification["completed_slices"] == 48
    assert {e.path for e in events if e.type == "artifact"} >= {"steps/generate/scores.json",
                                                                "steps/generate/verification.json"}


def test_a_failing_launcher_is_a_failed_step_with_its_last_lines(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path), FAKE_EVAL_FAIL="1")
    status = _status(events)
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
    (ckpt / "model.safetensors").write_bytes(b"my weights")
    entry = local_entry("model", "my-ckpt")
    store.import_local(entry, ckpt)
    job = _job(tmp_path, models=["my-ckpt"])
    data = json.loads(job.read_text())
    data["models"] = [{"id": "my-ckpt", "store_entry": entry, "label": "My checkpoint"}]
    job.write_text(json.dumps(data))
    done, events = _run("generate", tmp_path, evaluator, campaign, store, job)
    assert _status(events).state == "completed", (_status(events).message, done.stderr[-500:])
    done, events = _run("score", tmp_path, evaluator, campaign, store, job)
    assert _status(events).state == "completed", (_status(events).message, done.stderr[-500:])
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    sha256set = store.record(entry).sha256set
    assert "model=my-ckpt" in printed and f"revision={sha256set} " in printed
    assert f"source=local/my-ckpt@{sha256set.split(':')[1]} label=My checkpoint" in printed


def test_the_launcher_reads_the_prepared_models_and_datasets(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = _run("generate", tmp_path, evaluator, campaign, store, _job(tmp_path))
    assert [e for e in events if e.type == "status"][-1].state == "completed", done.stdout[-800:]
    printed = (campaign / "steps/generate/print-config.txt").read_text()
    # the model directory with the evaluator's revision marker, in this campaign, not the bare store folder
    assert f"path={campaign.resolve()}/evaluator/models/qwen25vl3b-base " in printed
    assert (campaign / "evaluator/models/qwen3-32b-judge/.trace_model_revision.json").is_file()
    assert (campaign / "evaluator/LMUData/trace_eval_v1_dataset_manifest.json").is_file()
    # a second run keeps what is prepared (no re-registration of unchanged revisions)
    marker = campaign / "evaluator/models/qwen25vl3b-base/.trace_model_revision.json"
    before = marker.stat().st_mtime_ns
    _run("score", tmp_path, evaluator, campaign, store, _job(tmp_path))
    assert marker.stat().st_mtime_ns == before

"""The generate worker and its backends on real TRACE sample rows with the tiny random Qwen2.5-VL (CPU).

Determinism is the release's rule (SPEC §3): a row's sample depends on its prompt
and seed alone, not on batching, order or resume after a kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stages_support import GEN_SETTINGS, responses, run_worker, sample_generate_job

pytestmark = pytest.mark.slow
ROWS = [0, 3, 17, 40, 101, 200]


@pytest.fixture(scope="module")
def backend(tiny_qwen25vl_dir: Path):
    from trace_tui.stages.backends import build_backend

    return build_backend("transformers", str(tiny_qwen25vl_dir), min_pixels=3136, max_pixels=50176)


@pytest.fixture(scope="module")
def sample_requests(trace_sample_dir: Path):
    from trace_tui.stages.backends import Sampling
    from trace_tui.stages.dataset import TraceDataset
    from trace_tui.stages.generate import make_request

    system = (trace_sample_dir / "system_prompt_answer.txt").read_text(encoding="utf-8")
    rows = TraceDataset(trace_sample_dir / "trace-sample.parquet").rows(ROWS)
    s = Sampling.from_settings(GEN_SETTINGS)
    return [make_request(r, system, s, 42, 3136, 50176) for r in rows]


def test_backend_sample_depends_on_prompt_and_seed_alone(backend, sample_requests) -> None:
    one_by_one = [backend.generate([r])[0] for r in sample_requests]
    batched = backend.generate(sample_requests)
    reversed_ = backend.generate(sample_requests[::-1])[::-1]
    assert one_by_one == batched == reversed_
    assert all(isinstance(t, str) and t for t in one_by_one)


def test_backend_seed_changes_the_sample(backend, sample_requests) -> None:
    from dataclasses import replace

    a = backend.generate(sample_requests)
    b = backend.generate([replace(r, seed=7) for r in sample_requests])
    assert a != b  # sampling at temperature 0.6 follows the per-row seed


def test_backend_renders_release_prompt_with_checkpoint_template(backend, sample_requests, trace_sample_dir) -> None:
    text = backend.render(sample_requests[0])
    system = (trace_sample_dir / "system_prompt_answer.txt").read_text(encoding="utf-8")
    assert text.startswith("<|im_start|>system\n" + system)
    # The image placeholder of prompt_answer became the template's vision block, before the question.
    user = text.split("<|im_start|>user\n", 1)[1]
    assert user.startswith("<|vision_start|><|image_pad|><|vision_end|>")
    assert "<image>" not in text
    assert text.endswith("<|im_start|>assistant\n")


def test_fit_pixels_and_messages() -> None:
    from PIL import Image

    from trace_tui.stages.dataset import build_messages, fit_pixels

    big = fit_pixels(Image.new("RGBA", (1120, 760)), 3136, 50176)
    assert big.mode == "RGB" and big.width * big.height <= 50176
    assert abs(big.width / big.height - 1120 / 760) < 0.02
    small = fit_pixels(Image.new("RGB", (20, 10)), 3136, 50176)
    assert small.width * small.height >= 3136
    same = Image.new("RGB", (100, 100))
    assert fit_pixels(same, 3136, 50176).size == (100, 100)
    msgs = build_messages("SYS", "<image>What is shown?", 1)
    assert msgs == [{"role": "system", "content": "SYS"},
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is shown?"}]}]
    with pytest.raises(ValueError, match="placeholder"):
        build_messages("SYS", "<image>two images?", 2)


def test_generate_worker_rows_progress_and_receipt(monkeypatch, tmp_path, tiny_qwen25vl_dir, trace_sample_dir) -> None:
    from trace_tui.stages import generate
    from trace_tui.stages.jobs import dir_sha256set
    from trace_tui.common.digest import sha256_file

    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, ROWS, batch_size=4)
    receipt, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    got = responses(tmp_path)
    assert sorted(got) == ROWS
    row = json.loads((tmp_path / "outputs/generate/s/rows/000017.json").read_text())
    assert row["index"] == 17 and row["seed"] == 42 and row["answer_type"] in ("integer", "number", "option_letter", "string")
    assert row["domain"] and row["task"].startswith("task_") and row["instance_id"].startswith("blake3:")
    progress = [e for e in events if e["type"] == "progress"]
    assert progress[0]["done"] == 0 and progress[-1]["done"] == progress[-1]["total"] == len(ROWS)
    assert {(e["model"], e["seed"], e["benchmark"], e["phase"]) for e in progress} == {("tiny", 42, "trace-sample", "generate")}
    content = receipt["content"]
    assert content["model"]["sha256set"] == dir_sha256set(tiny_qwen25vl_dir)[1]
    assert content["dataset"]["sha256"] == sha256_file(trace_sample_dir / "trace-sample.parquet")
    assert content["settings"]["seed"] == 42 and len(content["settings_sha256"]) == 64
    assert sorted(int(i) for i in content["responses"]) == ROWS
    for rel, digest in content["outputs"].items():
        assert sha256_file(tmp_path / rel) == digest
    arts = [e for e in events if e["type"] == "artifact"]
    assert arts and arts[-1]["path"] == "outputs/generate/s/generate.receipt.json"
    # Batch size does not change any row.
    job2 = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, ROWS, out="outputs/generate/b1", batch_size=1)
    run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job2)
    assert responses(tmp_path, "outputs/generate/b1") == got
    # A rerun finds every row and generates nothing (no backend is even built).
    _, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job, backend=object())
    assert [e["done"] for e in events if e["type"] == "progress"] == [len(ROWS)]


def test_generate_resumes_after_kill_with_the_same_responses(tmp_path, tiny_qwen25vl_dir, trace_sample_dir) -> None:
    """SIGKILL the worker process mid-slice, rerun it: it resumes at the first missing row and
    every row equals an uninterrupted run's."""
    rows = list(range(0, 24))
    env = dict(os.environ, TRACE_TUI_CAMPAIGN=str(tmp_path), TRACE_TUI_STORE=str(tmp_path / "store"))

    def job_file(out: str) -> Path:
        job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, rows, out=out, batch_size=1)
        job["settings"]["max_tokens"] = 24
        path = tmp_path / f"{out.replace('/', '_')}.json"
        path.write_text(json.dumps(job))
        return path

    killed = job_file("outputs/generate/killed")
    proc = subprocess.Popen([sys.executable, "-m", "trace_tui.stages.generate"], env=dict(env, TRACE_TUI_JOB=str(killed)),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    rows_dir = tmp_path / "outputs/generate/killed/rows"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(rows_dir.glob("*.json"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(list(rows_dir.glob("*.json")))
    assert 3 <= partial < len(rows), "the kill must land mid-slice"
    out = subprocess.run([sys.executable, "-m", "trace_tui.stages.generate"], env=dict(env, TRACE_TUI_JOB=str(killed)),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    first = [e for e in events if e["type"] == "progress"][0]
    assert first["done"] >= partial  # resumed: the rows already written were kept
    assert events[-1] == {"type": "status", "state": "completed", "message": "", "exit_code": 0}
    whole = job_file("outputs/generate/whole")
    out = subprocess.run([sys.executable, "-m", "trace_tui.stages.generate"], env=dict(env, TRACE_TUI_JOB=str(whole)),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert responses(tmp_path, "outputs/generate/killed") == responses(tmp_path, "outputs/generate/whole")
    # Atomic writes: no torn row survives the kill (every row parses), at most a temp file.
    for f in rows_dir.glob("*.json"):
        json.loads(f.read_text())


def test_generate_bad_inputs_fail_with_one_line(tmp_path, tiny_qwen25vl_dir, trace_sample_dir) -> None:
    env = dict(os.environ, TRACE_TUI_CAMPAIGN=str(tmp_path), TRACE_TUI_STORE=str(tmp_path / "store"))
    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, [0])
    job["paths"]["dataset"] = {"path": str(trace_sample_dir / "trace-sample.parquet"), "sha256": "0" * 64}
    (tmp_path / "job.json").write_text(json.dumps(job))
    out = subprocess.run([sys.executable, "-m", "trace_tui.stages.generate"], env=dict(env, TRACE_TUI_JOB=str(tmp_path / "job.json")),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    status = json.loads(out.stdout.strip().splitlines()[-1])
    assert status["state"] == "failed" and "dataset" in status["message"] and "expected " + "0" * 64 in status["message"]
    assert "Traceback" not in out.stderr
    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, [0])
    del job["settings"]["max_image_pixels"]
    (tmp_path / "job.json").write_text(json.dumps(job))
    out = subprocess.run([sys.executable, "-m", "trace_tui.stages.generate"], env=dict(env, TRACE_TUI_JOB=str(tmp_path / "job.json")),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "max_image_pixels" in json.loads(out.stdout.strip().splitlines()[-1])["message"]


def test_generate_inputs_follow_the_runner_job_spec(monkeypatch, tmp_path) -> None:
    """Without explicit paths the worker finds the validation parquet and the release prompt from the lock."""
    from trace_tui.release import release_lock
    from trace_tui.stages.jobs import JobError, generation_inputs

    lock = release_lock()
    pin = lock.models[0]
    job = {"model": pin.model_dump(), "benchmark": {"key": "trace-validation", "rows": 2000, "route": "trace_validation"}}
    got = generation_inputs(job)
    assert got["model"]["entry"] == f"model:{pin.repo_id}@{pin.revision}"
    assert got["dataset"]["entry"].endswith(":validation") and got["dataset"]["sha256"] == lock.dataset.file("validation")[0].sha256
    assert got["system_prompt"]["sha256"] == lock.trace_validation.system_prompt_sha256
    demo = generation_inputs({"model": {"id": "tiny", "store_entry": "local:model/tiny-qwen2.5-vl"},
                              "benchmark": {"key": "counting", "route": "demo"}})
    assert demo["model"]["entry"] == "local:model/tiny-qwen2.5-vl" and demo["dataset"]["file"] == "counting.parquet"
    with pytest.raises(JobError, match="not served by this worker") as exc:
        generation_inputs({"model": pin.model_dump(), "benchmark": {"key": "mmstar", "route": "official_vlmevalkit"}})
    assert "external suite" in exc.value.line()


def test_vllm_backend_without_vllm_says_what_to_use(monkeypatch, tiny_qwen25vl_dir) -> None:
    from trace_tui.errors import RequirementsError
    from trace_tui.stages.backends import build_backend

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(RequirementsError, match="vllm") as exc:
        build_backend("vllm", str(tiny_qwen25vl_dir))
    assert "transformers" in exc.value.line()


def test_validation_slice_reads_the_store_and_checks_the_dataset_pin(monkeypatch, tmp_path, tiny_qwen25vl_dir,
                                                                    trace_sample_dir, trace_release_dir) -> None:
    """A TRACE validation job as the runner writes it (no paths): the worker finds the model, the
    validation parquet and the release prompt in the store by their entry names, and refuses a
    validation file whose sha256 is not the one the release lock pins (here: the 262-row sample
    staged in its place)."""
    from trace_tui.release import release_lock
    from trace_tui.stages import generate
    from trace_tui.stages.jobs import JobError
    from trace_tui.store.manifest import Source
    from trace_tui.store.names import dataset_entry, model_entry, release_entry
    from trace_tui.store.store import Store

    lock = release_lock()
    pin = lock.models[1]
    store = Store(tmp_path / "store")
    staged = {
        model_entry(pin.repo_id, pin.revision): [(p.name, p) for p in tiny_qwen25vl_dir.iterdir()],
        dataset_entry(lock, "validation"): [(lock.dataset.file("validation")[0].path, trace_sample_dir / "trace-sample.parquet")],
        release_entry(lock): [(lock.trace_validation.system_prompt_file, trace_release_dir / lock.trace_validation.system_prompt_file)],
    }
    for name, files in staged.items():
        with store.staging(name) as st:
            for rel, src in files:
                st.add(rel, src)
            st.commit(revision=name.rsplit("@", 1)[-1].split(":")[0], source=Source(type="import", imported_from="test"))
    job = {"step": "generate", "slice": {"model": pin.id, "seed": 42, "benchmark": "trace-validation"},
           "model": pin.model_dump(), "benchmark": {"key": "trace-validation", "rows": 2000, "route": "trace_validation"},
           "settings": dict(GEN_SETTINGS), "output_dir": "outputs/generate/v", "total": 2000}
    with pytest.raises(JobError) as exc:
        run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    assert "job input 'dataset'" in exc.value.line()
    assert f"expected {lock.dataset.file('validation')[0].sha256}" in exc.value.line()


def test_vllm_on_cpu_gets_float32_eager_and_native_ops_and_keeps_the_callers_settings(monkeypatch) -> None:
    """What vLLM 0.10.2's CPU build needs (the cpu images run it for real: tests/test_appliance_demo.py):
    float32 unless a dtype is named, eager mode, native ops (Qwen2.5-VL's M-RoPE would call Triton), the
    engine in the worker's process, and a token budget of max_num_seqs whole prompts, so that no prefill
    is split (after a split, vLLM rewinds the seeded generator with a CUDA-only call); the caller's
    settings (the judge's max_model_len) stay."""
    from trace_tui.stages.backends.vllm_backend import cpu_engine_options

    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    got = cpu_engine_options({"model": "m", "dtype": "bfloat16", "max_model_len": 4096}, None, 32768)
    assert got == {"model": "m", "dtype": "float32", "max_model_len": 4096, "enforce_eager": True,
                   "compilation_config": {"custom_ops": ["none"]}, "max_num_seqs": 16,
                   "max_num_batched_tokens": 16 * 4096}
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    got = cpu_engine_options({"model": "m"}, "bfloat16", 128000)
    assert (got["dtype"], got["max_model_len"], got["max_num_batched_tokens"]) == ("bfloat16", 8192, 16 * 8192)
    assert cpu_engine_options({"model": "m"}, None, 2048)["max_model_len"] == 2048


def test_without_vllm_the_default_backend_is_transformers(monkeypatch) -> None:
    from trace_tui.stages.generate import choose_backend, vllm_cpu_build

    monkeypatch.delenv("TRACE_TUI_BACKEND", raising=False)
    assert not vllm_cpu_build()  # the host has no vLLM; the cpu images have its CPU build (vllm there)
    assert choose_backend({"gpus": [0]}) == choose_backend({}) == "transformers"
    assert choose_backend({"backend": "vllm"}) == "vllm"

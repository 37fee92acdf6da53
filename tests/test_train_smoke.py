"""One real GRPO step (TRL, transformers, the TRACE reward) on the tiny local Qwen2.5-VL, on CPU, under the stage contract.

Nothing is faked: the worker runs as `python -m trace_tui.stages.train_smoke`
with a job spec, over real TRACE instances (TRACE_SAMPLE_DIR) and the real
release profile and system prompt (TRACE_RELEASE_DIR). A random model never
ends a reply in a JSON answer object, so its TRACE reward is always 0 and a
step learns nothing; the model is first warmed up with a few supervised steps
(tests/fixtures_models.py) so that its sampled replies vary in reward.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Small for a CPU: 2 prompts x 4 rollouts, short replies, small images. Each is
# recorded in the receipt beside the profile value.
CPU_SETTINGS = {"device": "cpu", "cpu_threads": 1, "prompts_per_step": 2, "num_generations": 4,
                "max_response_length": 24, "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 64}


def smoke_job(model_dir: Path, release: Path, sample: Path, **settings) -> dict:
    return {
        "step": "train-smoke", "recipe": "demo",
        "slice": {"model": "tiny-qwen2.5-vl", "seed": 1, "benchmark": "train-smoke"},
        "inputs": {
            "model": str(model_dir),
            "profile": "rlvr/configs/trace-qwen2.5-vl-3b.yaml",  # relative: resolved in the store
            "system_prompt": "rlvr/examples/prompts/trace_vero_json_system_prompt_answer.txt",
            "train_files": [str(sample / "trace-sample.parquet")],
        },
        "settings": {**CPU_SETTINGS, **settings},
    }


def run_worker(job: dict, campaign: Path, store: Path) -> tuple[int, list[dict], str]:
    campaign.mkdir(parents=True, exist_ok=True)
    job_path = campaign.parent / f"{campaign.name}-job.json"
    job_path.write_text(json.dumps(job))
    env = {**os.environ, "TRACE_TUI_JOB": str(job_path), "TRACE_TUI_CAMPAIGN": str(campaign),
           "TRACE_TUI_STORE": str(store)}
    proc = subprocess.run([sys.executable, "-m", "trace_tui.stages.train_smoke"], check=False, env=env, capture_output=True,
                          text=True, timeout=600)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # every stdout line is a protocol line
    return proc.returncode, lines, proc.stderr


@pytest.fixture(scope="module")
def smoke_runs(tiny_qwen25vl_warm_dir: Path, trace_release_dir: Path, trace_sample_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, int, list[dict], str]]:
    """Two runs of the worker with the same job (same seed)."""
    base = tmp_path_factory.mktemp("train-smoke")
    job = smoke_job(tiny_qwen25vl_warm_dir, trace_release_dir, trace_sample_dir)
    runs = []
    for name in ("a", "b"):
        campaign = base / name
        runs.append((campaign, *run_worker(job, campaign, trace_release_dir)))
    return runs


def _receipt(campaign: Path) -> dict:
    return json.loads((campaign / "train-smoke" / "run_receipt.json").read_text())


def test_one_step_completes_under_the_stage_contract(smoke_runs) -> None:
    _campaign, rc, lines, err = smoke_runs[0]
    assert rc == 0, err[-3000:]
    assert lines[-1] == {"type": "status", "state": "completed", "exit_code": 0,
                         "message": lines[-1]["message"]} and "sha256set:" in lines[-1]["message"]
    assert {"type": "progress", "model": "tiny-qwen2.5-vl", "seed": 1, "benchmark": "train-smoke", "phase": "train",
            "done": 1, "total": 1} in lines
    artifacts = {a["path"] for a in lines if a["type"] == "artifact"}
    assert {"train-smoke/run_receipt.json", "train-smoke/checkpoint-1/model.safetensors",
            "train-smoke/checkpoint-1/config.json"} <= artifacts


def test_receipt_records_inputs_config_metrics_and_checkpoint(smoke_runs, trace_release_dir: Path,
                                                             trace_sample_dir: Path) -> None:
    from trace_tui.common.digest import sha256_file
    from trace_tui.stages.train_inputs import checkpoint_sha256set

    campaign = smoke_runs[0][0]
    r = _receipt(campaign)
    assert (r["status"], r["exit_code"], r["mode"]) == ("completed", 0, "smoke")
    inputs = r["inputs"]
    assert inputs["profile"]["sha256"] == sha256_file(
        trace_release_dir / "rlvr/configs/trace-qwen2.5-vl-3b.yaml")
    assert inputs["system_prompt"]["sha256"].startswith("f394927d")
    assert inputs["train_files"][0]["sha256"] == sha256_file(trace_sample_dir / "trace-sample.parquet")
    assert inputs["model"]["sha256set"].startswith("sha256set:") and "model.safetensors" in inputs["model"]["files"]
    assert len(r["resolved_config_sha256"]) == 64
    # Unmappable keys are listed with their reasons, never dropped.
    assert r["profile_mapping"]["unmappable"]["worker.rollout.name"]["effect"] == "differs"
    assert len(r["profile_mapping"]["mapped"]) + len(r["profile_mapping"]["unmappable"]) > 100
    # The scaling and the job spec's overrides, beside the profile values.
    assert r["scaling"]["rollout_batch_size"] == {"profile": 128, "run": 2}
    assert r["overrides"]["num_generations"] == {"profile": 8, "run": 4}
    assert r["hardware"]["device"] == "cpu" and r["device_adaptations"]["precision"]["run"] == "fp32"
    assert len(r["rewards"]) == 8 and len(r["data"]["rows_used"]) == 2
    assert r["circumstance"]["wall_time_s"] > 0 and r["wall_time_s"] > 0
    ckpt = campaign / r["checkpoint"]["path"]
    assert checkpoint_sha256set(ckpt)[0] == r["checkpoint"]["sha256set"]
    assert set(r["checkpoint"]["files"]) == {"config.json", "generation_config.json", "model.safetensors"}


def test_rewards_vary_gradients_flow_and_every_part_of_the_model_moves(smoke_runs, tiny_qwen25vl_warm_dir) -> None:
    from safetensors.torch import load_file

    campaign = smoke_runs[0][0]
    r = _receipt(campaign)
    assert r["reward_std"] > 0, r["rewards"]
    assert r["grad_norm"] > 0
    before = load_file(str(tiny_qwen25vl_warm_dir / "model.safetensors"))
    after = load_file(str(campaign / r["checkpoint"]["path"] / "model.safetensors"))
    assert before.keys() == after.keys()
    # An Adam step moves a weight with a gradient by about the learning rate (1e-6);
    # weight decay alone (lr x 0.01) moves it by ~1e-8 x |w|, far below that.
    moved = {k for k in before if (after[k] - before[k]).abs().max().item() > 5e-7}
    assert any(k.startswith("visual.") for k in moved), "vision tower did not move"
    assert any(k.startswith("visual.merger.") for k in moved) and any(k.startswith("visual.blocks.") for k in moved)
    assert any(k.startswith("model.layers.") for k in moved) and "lm_head.weight" in moved


def test_checkpoint_reloads_and_generates(smoke_runs, trace_sample_dir: Path) -> None:
    import io

    import pyarrow.parquet as pq
    import torch
    from PIL import Image
    from transformers import Qwen2_5_VLForConditionalGeneration

    from trace_tui.stages.tiny_model import load_processor

    ckpt = smoke_runs[0][0] / _receipt(smoke_runs[0][0])["checkpoint"]["path"]
    processor = load_processor(ckpt, min_pixels=56 * 56, max_pixels=28 * 28 * 64)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(ckpt).eval()
    row = pq.read_table(trace_sample_dir / "trace-sample.parquet").slice(5, 1).to_pylist()[0]
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text",
                                                              "text": row["prompt_answer"].removeprefix("<image>")}]}]
    text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[Image.open(io.BytesIO(row["images"][0]["bytes"]))], return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(**inputs, max_new_tokens=12, do_sample=True, temperature=1.0)
    reply = processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)[0]
    assert out.shape[1] > inputs["input_ids"].shape[1] and isinstance(reply, str)


def test_same_seed_gives_the_same_checkpoint(smoke_runs) -> None:
    (a, rc_a, _, err_a), (b, rc_b, _, err_b) = smoke_runs
    assert rc_a == 0 and rc_b == 0, (err_a[-2000:], err_b[-2000:])
    ra, rb = _receipt(a), _receipt(b)
    assert ra["checkpoint"]["sha256set"] == rb["checkpoint"]["sha256set"]
    assert ra["rewards"] == rb["rewards"] and ra["resolved_config_sha256"] == rb["resolved_config_sha256"]


def test_trl_processor_pads_left_so_image_tokens_stay_in_place(tiny_qwen25vl_dir: Path, trace_sample_dir: Path) -> None:
    """TRL pairs its left-padded prompt ids with the processor's per-token image mask: they must line up."""
    import io

    import pyarrow.parquet as pq
    from PIL import Image

    from trace_tui.stages.train_trl import trl_processor

    processor = trl_processor(tiny_qwen25vl_dir, min_pixels=56 * 56, max_pixels=28 * 28 * 256)
    rows = pq.read_table(trace_sample_dir / "trace-sample.parquet").take([32, 68]).to_pylist()
    texts, images = [], []
    for row in rows:
        msgs = [{"role": "user", "content": [{"type": "image"},
                                             {"type": "text", "text": row["prompt_answer"].removeprefix("<image>")}]}]
        texts.append(processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
        images.append([Image.open(io.BytesIO(row["images"][0]["bytes"]))])
    batch = processor(text=texts, images=images, padding=True, return_tensors="pt")
    mask = batch["attention_mask"]
    assert mask.sum(1).tolist()[0] != mask.sum(1).tolist()[1]  # prompts of different lengths
    assert (mask[:, -1] == 1).all() and (mask[:, 0] == 0).any()  # padded on the left
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert ((batch["input_ids"] == image_pad) == (batch["mm_token_type_ids"] == 1)).all()


def test_the_runners_demo_job_trains_from_the_store_with_the_builtin_profile(
        tiny_qwen25vl_warm_dir: Path, tmp_path: Path) -> None:
    """The job spec exactly as the runner writes it for the demo's whole-step train job (model as a store entry,
    the recipe's generation settings, no profile/prompt/data named): the worker finds the demo tasks and uses the
    built-in demo profile, and bounds the step with the demo's settings."""
    from trace_tui.stages import demo_tasks
    from trace_tui.stages.jobs import DEMO_SYSTEM_PROMPT_FILE, DEMO_TASKS_ENTRY
    from trace_tui.store.store import Store

    store = Store(tmp_path / "store")
    store.import_local("local:model/tiny-qwen2.5-vl", tiny_qwen25vl_warm_dir)
    tasks = tmp_path / "tasks"
    demo_tasks.write_tasks(tasks, seed=0)
    (tasks / DEMO_SYSTEM_PROMPT_FILE).write_text(demo_tasks.RELEASE_SYSTEM_PROMPT, encoding="utf-8")
    store.import_local(DEMO_TASKS_ENTRY, tasks)
    job = {"step": "train-smoke", "recipe": "demo", "run_tag": "demo-x", "slice": None,
           "settings": {"max_tokens": 24, "min_image_pixels": 3136, "max_image_pixels": 50176, "temperature": 0.6,
                        "cpu_threads": 1},
           "inputs": {"model": {"entry": "local:model/tiny-qwen2.5-vl"}, "upstream": {"campaign": "steps/prepare"}},
           "output_dir": "steps/train-smoke", "models": [{"id": "tiny-qwen2.5-vl"}], "gpus": [], "args": []}
    rc, lines, err = run_worker(job, tmp_path / "campaign", tmp_path / "store")
    assert rc == 0, (lines[-1], err[-2000:])
    r = json.loads((tmp_path / "campaign" / "steps" / "train-smoke" / "run_receipt.json").read_text())
    assert r["status"] == "completed" and r["inputs"]["profile"]["builtin"] is True
    assert r["inputs"]["model"]["path"] == "local:model/tiny-qwen2.5-vl"
    assert all(f["path"].startswith(DEMO_TASKS_ENTRY + "/") for f in r["inputs"]["train_files"])
    assert r["overrides"]["max_response_length"] == {"profile": 2048, "run": 24}
    assert r["overrides"]["max_pixels"] == {"profile": 4194304, "run": 50176}
    assert r["scaling"]["rollout_batch_size"]["run"] == 2 and r["checkpoint"]["sha256set"].startswith("sha256set:")

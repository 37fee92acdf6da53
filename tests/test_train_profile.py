"""The release training profile mapped onto TRL: every key judged, settings right, batch sizes scaled and recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.errors import UsageError
from trace_tui.gpu_needs import smoke_requirement
from trace_tui.stages.train_profile import (
    PROFILE_MAP,
    Hardware,
    Overrides,
    flatten,
    load_profile,
    resolve_training,
    unknown_keys,
)
from trace_tui.common.digest import sha256set
from trace_tui.stages.train_inputs import (
    pick_rows,
    reward_stats,
    split_prompt,
)

SIZES = ("3b", "7b")


def _profile(release: Path, size: str) -> dict:
    return load_profile(release / "rlvr" / "configs" / f"trace-qwen2.5-vl-{size}.yaml")


@pytest.mark.parametrize("size", SIZES)
def test_every_profile_key_is_mapped_or_listed_unmappable(trace_release_dir: Path, size: str) -> None:
    profile = _profile(trace_release_dir, size)
    keys = set(flatten(profile["easyr1"]))
    assert len(keys) > 100 and unknown_keys(profile) == []
    resolved = resolve_training(profile, Hardware(device="cuda", devices=1))
    assert set(resolved.mapped) | set(resolved.unmappable) == keys
    assert not set(resolved.mapped) & set(resolved.unmappable)
    for key, entry in resolved.unmappable.items():
        assert entry["reason"] and entry["effect"] in ("none", "differs"), key
        assert entry["value"] == flatten(profile["easyr1"])[key]
    for key, entry in resolved.mapped.items():
        assert entry["target"] and entry["kind"] in ("trl", "stage"), key


def test_table_has_no_stale_keys(trace_release_dir: Path) -> None:
    seen = set().union(*(flatten(_profile(trace_release_dir, s)["easyr1"]) for s in SIZES))
    assert set(PROFILE_MAP) == seen


def test_trl_settings_follow_the_profile(trace_release_dir: Path) -> None:
    trl = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cuda", devices=1)).trl
    assert trl["learning_rate"] == 1e-6 and trl["beta"] == 0.0
    assert (trl["epsilon"], trl["epsilon_high"], trl["delta"]) == (0.2, 0.3, 3.0)
    assert (trl["num_generations"], trl["temperature"], trl["top_p"], trl["top_k"]) == (8, 1.0, 1.0, 0)
    assert trl["max_completion_length"] == 2048 and trl["max_grad_norm"] == 1.0
    assert (trl["adam_beta1"], trl["adam_beta2"], trl["weight_decay"]) == (0.9, 0.999, 0.01)
    assert trl["lr_scheduler_type"] == "constant" and trl["warmup_steps"] == 0 and isinstance(trl["warmup_steps"], int)
    assert (trl["loss_type"], trl["scale_rewards"], trl["num_iterations"]) == ("dapo", "group", 1)
    assert (trl["seed"], trl["data_seed"], trl["shuffle_dataset"]) == (1, 1, True)
    assert trl["bf16"] is True and trl["gradient_checkpointing"] is True
    assert (trl["max_steps"], trl["save_steps"]) == (1, 1)


def test_trl_settings_are_real_grpo_config_fields(trace_release_dir: Path, tmp_path: Path) -> None:
    from trl import GRPOConfig

    import dataclasses

    from trace_tui.stages.train_trl import fit_to_trl

    resolved = resolve_training(_profile(trace_release_dir, "7b"), Hardware(device="cpu"))
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(resolved.trl) <= fields, set(resolved.trl) - fields
    cfg = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **fit_to_trl(resolved.trl, fields)[0])
    assert cfg.delta == 3.0 and cfg.epsilon_high == 0.3 and cfg.generation_batch_size == 2 * 8
    assert cfg.steps_per_generation == cfg.gradient_accumulation_steps == 16


@pytest.mark.parametrize(("device", "devices", "prompts", "factor"),
                         [("cuda", 8, 128, 1.0), ("cuda", 2, 32, 0.25), ("cuda", 1, 16, 0.125), ("cpu", 1, 2, 2 / 128)])
def test_batch_sizes_scale_to_the_devices(trace_release_dir: Path, device: str, devices: int, prompts: int,
                                          factor: float) -> None:
    resolved = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device=device, devices=devices))
    s = resolved.scaling
    assert s.rollout_batch_size == {"profile": 128, "run": prompts} and s.factor == factor
    assert s.completions_per_step == {"profile": 1024, "run": prompts * 8}
    # One rollout batch is one optimizer update (rollout_batch_size == global_batch_size upstream).
    trl = resolved.trl
    assert trl["per_device_train_batch_size"] * trl["gradient_accumulation_steps"] * devices == prompts * 8
    assert trl["steps_per_generation"] == trl["gradient_accumulation_steps"]
    assert resolved.overrides["max_steps"] == {"profile": 500, "run": 1}
    assert ("precision" in resolved.device_adaptations) == (device == "cpu")


def test_overrides_are_recorded_beside_the_profile_value(trace_release_dir: Path) -> None:
    resolved = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cpu"),
                                Overrides(prompts_per_step=3, num_generations=4, max_response_length=32,
                                          min_pixels=3136, max_pixels=50176))
    assert resolved.overrides["num_generations"] == {"profile": 8, "run": 4}
    assert resolved.overrides["max_response_length"] == {"profile": 2048, "run": 32}
    assert resolved.overrides["prompts_per_step"] == {"profile": 128, "run": 3}
    assert resolved.stage["min_pixels"] == 3136 and resolved.trl["max_completion_length"] == 32
    assert "learning_rate" not in resolved.overrides


def test_unknown_profile_key_is_refused_by_name(trace_release_dir: Path) -> None:
    profile = _profile(trace_release_dir, "3b")
    profile["easyr1"]["worker"]["actor"]["new_knob"] = 1
    with pytest.raises(UsageError, match=r"easyr1\.worker\.actor\.new_knob"):
        resolve_training(profile, Hardware(device="cpu"))


def test_bad_profile_file_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("easyr1: [unclosed\n")
    with pytest.raises(UsageError, match=r"p\.yaml:\d+: not valid YAML"):
        load_profile(bad)
    bad.write_text("config_id: x\n")
    with pytest.raises(UsageError, match="field 'easyr1'"):
        load_profile(bad)


def test_smoke_gpu_requirement_is_stated() -> None:
    r3, r7 = smoke_requirement("3B"), smoke_requirement("7B")
    assert r3["gpus"] == r7["gpus"] == 1
    assert 40 < r3["min_gpu_memory_gib"] < r7["min_gpu_memory_gib"] < r7["fp32_gpu_memory_gib"]
    assert "AdamW" in r3["reason"]
    assert smoke_requirement("3B", prompts_per_step=4)["min_gpu_memory_gib"] < r3["min_gpu_memory_gib"]
    with pytest.raises(UsageError):
        smoke_requirement("13B")


def test_stage_helpers() -> None:
    assert split_prompt("<image>How many?", 1) == [{"type": "image", "text": None},
                                                    {"type": "text", "text": "How many?"}]
    assert [p["type"] for p in split_prompt("A<image>B<image>", 2)] == ["text", "image", "text", "image"]
    with pytest.raises(ValueError):
        split_prompt("no image", 1)
    picked = pick_rows(262, 4, shuffle=True, seed=1)
    assert picked == pick_rows(262, 4, shuffle=True, seed=1) and len(set(picked)) == 4
    assert pick_rows(262, 3, shuffle=False, seed=1) == [0, 1, 2]
    with pytest.raises(UsageError):
        pick_rows(2, 3, shuffle=True, seed=1)
    assert reward_stats([0.0, 1.0]) == (0.5, 0.5)
    # sha256set: sha256 of the canonical JSON (sorted keys, compact) of {path: sha256}.
    import hashlib

    files = {"b.json": "2" * 64, "a.safetensors": "1" * 64}
    canon = json.dumps(files, sort_keys=True, separators=(",", ":"))
    assert sha256set(files) == "sha256set:" + hashlib.sha256(canon.encode()).hexdigest()


def _run_worker(job: dict | str, tmp_path: Path) -> tuple[int, list[dict], str]:
    job_path = tmp_path / "job.json"
    job_path.write_text(job if isinstance(job, str) else json.dumps(job))
    env = {**os.environ, "TRACE_TUI_JOB": str(job_path), "TRACE_TUI_CAMPAIGN": str(tmp_path / "campaign"),
           "TRACE_TUI_STORE": str(tmp_path / "store")}
    proc = subprocess.run([sys.executable, "-m", "trace_tui.stages.train_smoke"], check=False, env=env, capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_bad_job_spec_is_a_usage_error_without_traceback(tmp_path: Path) -> None:
    rc, lines, err = _run_worker({"step": "train-smoke", "inputs": {"profile": "p"}}, tmp_path)
    assert rc == 2 and len(lines) == 1 and lines[0]["type"] == "status" and lines[0]["state"] == "failed"
    assert "inputs.model" in lines[0]["message"] and "Traceback" not in err
    rc, lines, err = _run_worker({"inputs": {"model": "m"}, "settings": {"device": "gpu"}}, tmp_path)
    assert rc == 2 and "settings.device" in lines[0]["message"] and "'gpu'" in lines[0]["message"]
    rc, lines, err = _run_worker({"inputs": {"model": "m"}, "output_dir": "../x"}, tmp_path)
    assert rc == 2 and "output_dir" in lines[0]["message"]
    rc, lines, _ = _run_worker("{not json", tmp_path)
    assert rc == 2 and "cannot read the job spec" in lines[0]["message"]


def test_missing_model_fails_with_requirements_exit_and_failed_receipt(tmp_path: Path, trace_release_dir: Path) -> None:
    job = {"step": "train-smoke", "recipe": "smoke-3b",
           "inputs": {"model": "models/absent", "profile": "release/x.yaml", "system_prompt": "release/p.txt",
                      "train_files": ["data/train.parquet"]}}
    rc, lines, err = _run_worker(job, tmp_path)
    assert rc == 3 and lines[-1]["state"] == "failed" and "models/absent" in lines[-1]["message"]
    receipt = json.loads((tmp_path / "campaign" / "train-smoke" / "run_receipt.json").read_text())
    assert receipt["status"] == "failed" and receipt["exit_code"] == 3 and receipt["mode"] == "smoke"
    assert "Traceback" not in err


def test_older_trl_gets_only_inert_settings_dropped_and_each_recorded(trace_release_dir: Path) -> None:
    from trace_tui.errors import RequirementsError
    from trace_tui.stages.train_trl import fit_to_trl

    trl = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cuda", devices=1)).trl
    fields = set(trl) - {"sapo_temperature_pos", "sapo_temperature_neg", "trust_remote_code"} | {
        "max_prompt_length", "warmup_ratio"}
    kwargs, adapted = fit_to_trl({**trl, "warmup_steps": 0.1}, fields)
    assert set(kwargs) <= fields and kwargs["max_prompt_length"] is None
    assert (kwargs["warmup_steps"], kwargs["warmup_ratio"]) == (0, 0.1)
    assert {"sapo_temperature_pos", "trust_remote_code", "max_prompt_length", "warmup_steps"} <= set(adapted)
    assert kwargs["gradient_checkpointing"] is True and "activation_checkpointing" not in kwargs
    with pytest.raises(RequirementsError, match="'delta'"):
        fit_to_trl(trl, fields - {"delta"})
    with pytest.raises(RequirementsError, match="trust_remote_code"):
        fit_to_trl({**trl, "trust_remote_code": True}, fields)


def test_newer_transformers_gets_activation_checkpointing_without_a_deprecation_warning(
        trace_release_dir: Path, tmp_path: Path) -> None:
    """transformers 5 renamed gradient_checkpointing; the old name warns (FutureWarning) on every run."""
    import dataclasses
    import warnings

    from trl import GRPOConfig

    from trace_tui.stages.train_trl import fit_to_trl

    trl = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cpu")).trl
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    if "activation_checkpointing" not in fields:
        pytest.skip("this transformers has no activation_checkpointing (4.x: gradient_checkpointing is current)")
    kwargs, adapted = fit_to_trl(trl, fields)
    assert kwargs["activation_checkpointing"] is trl["gradient_checkpointing"] is True
    assert "gradient_checkpointing" not in kwargs and "gradient_checkpointing" in adapted
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        cfg = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **kwargs)
    assert cfg.activation_checkpointing is cfg.gradient_checkpointing is True


def test_builtin_demo_profile_agrees_with_the_release_profile(trace_release_dir: Path) -> None:
    from trace_tui.stages.train_profile import DEMO_PROFILE_SETTINGS, demo_profile

    release = flatten(_profile(trace_release_dir, "3b")["easyr1"])
    differing = {k: (v, release[k]) for k, v in DEMO_PROFILE_SETTINGS.items() if release.get(k, object()) != v}
    assert differing == {"trainer.experiment_name": ("trace-tui-demo", "trace-qwen2.5-vl-3b")}
    demo = resolve_training(demo_profile("f" * 64), Hardware(device="cpu"))
    real = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cpu"))
    assert {k: v for k, v in demo.trl.items() if k != "run_name"} == {
        k: v for k, v in real.trl.items() if k != "run_name"}
    assert demo.stage == real.stage and set(demo.mapped) | set(demo.unmappable) == set(DEMO_PROFILE_SETTINGS)


def test_pinned_base_models_are_recognised_by_store_entry() -> None:
    from trace_tui.release import release_lock
    from trace_tui.stages.train_inputs import _base_scale

    for scale, pin in release_lock().training_base_models.items():
        assert _base_scale(f"model:{pin.repo_id}@{pin.revision}") == scale
        assert _base_scale(f"model/{pin.repo_id}@{pin.revision}") == scale  # the runner's spelling
    assert _base_scale("local:model/tiny-qwen2.5-vl") is None


def test_gpu_memory_plan_keeps_fp32_when_it_fits_else_bf16_else_refuses(trace_release_dir: Path,
                                                                       tmp_path: Path) -> None:
    """A 3B-shaped checkpoint (its real config sizes; the weights file is sparse: only its size is read)."""
    from trace_tui.errors import RequirementsError
    from trace_tui.stages.train_memory import plan_gpu_memory

    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16", "text_config": {
        "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 36}}))
    with open(tmp_path / "model.safetensors", "wb") as fh:
        fh.truncate(int(3.76e9 * 2))
    resolved = resolve_training(_profile(trace_release_dir, "3b"), Hardware(device="cuda", devices=1))
    plan = lambda gib, weights="auto": plan_gpu_memory(
        tmp_path, Hardware(device="cuda", devices=1, device_name="GPU", memory_gib=gib), resolved, weights)
    assert plan(139.8)["weights"] == "fp32"
    big = plan(79.6)
    assert big["weights"] == "bf16" and big["need_gib"]["bf16"] < 79.6 < big["need_gib"]["fp32"]
    with pytest.raises(RequirementsError, match="GiB on one GPU"):
        plan(40)
    with pytest.raises(RequirementsError):
        plan(79.6, "fp32")
    assert plan_gpu_memory(tmp_path, Hardware(device="cpu"), resolved) is None


def test_read_rows_across_shards_and_row_groups(trace_sample_dir: Path, tmp_path: Path) -> None:
    """The step's rows are read by global index over several shards, touching only their row groups."""
    import pyarrow.parquet as pq

    from trace_tui.stages.train_inputs import parquet_rows, read_rows

    table = pq.read_table(trace_sample_dir / "trace-sample.parquet", columns=["instance_id", "answer_gt"])
    pq.write_table(table.slice(0, 100), tmp_path / "a.parquet", row_group_size=30)
    pq.write_table(table.slice(100), tmp_path / "b.parquet", row_group_size=50)
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    assert parquet_rows(files, ["instance_id", "answer_gt"]) == 262
    with pytest.raises(UsageError, match="missing column"):
        parquet_rows(files, ["prompt_answer"])
    picked = [250, 3, 99, 100, 161]
    rows = read_rows(files, picked, ["instance_id", "answer_gt"])
    ids = table.column("instance_id").to_pylist()
    assert [r["instance_id"] for r in rows] == [ids[i] for i in picked]
    assert [(r["_file"], r["_row"]) for r in rows] == [("b.parquet", 150), ("a.parquet", 3), ("a.parquet", 99),
                                                        ("b.parquet", 0), ("b.parquet", 61)]

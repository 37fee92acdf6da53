"""The demo really trains: its tiny model, warmed up in `prepare` toward {"answer": ...} replies, earns
varying TRACE rewards, so the demo's GRPO step has non-zero advantages, a non-zero gradient and
changes the weights (cpu flavour, local runtime; the docker cpu images: tests/test_appliance_demo.py;
the gpu images: tests/test_gpu_images.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]


def demo_train_receipt(campaign: Path) -> dict:
    receipts = list(campaign.rglob("run_receipt.json"))
    assert len(receipts) == 1, receipts
    return json.loads(receipts[0].read_text())


def assert_the_step_learned(campaign: Path, store: Path) -> dict:
    from safetensors.torch import load_file

    receipt = demo_train_receipt(campaign)
    assert receipt["status"] == "completed"
    assert receipt["reward_std"] > 0, receipt["rewards"]
    assert receipt["grad_norm"] > 0
    before_files = [p for p in store.rglob("model.safetensors")]
    assert len(before_files) == 1, before_files
    before = load_file(str(before_files[0]))
    after = load_file(str(campaign / receipt["checkpoint"]["path"] / "model.safetensors"))
    assert before.keys() == after.keys()
    moved = [k for k in before if not (after[k] == before[k]).all()]
    assert len(moved) > len(before) // 2, f"only {len(moved)} of {len(before)} tensors changed"
    return receipt


def test_the_demo_step_gets_varying_rewards_a_gradient_and_changes_the_weights(demo_campaign):
    assert demo_campaign["run"].returncode == 0, demo_campaign["run"].stderr[-2000:]
    assert_the_step_learned(demo_campaign["campaign"], demo_campaign["home"] / "store")


def test_the_warm_up_is_deterministic_and_recorded(tmp_path):
    from trace_tui.stages import demo_prepare
    from trace_tui.stages.jobs import DEMO_TASKS_ENTRY  # noqa: F401  (the entry the rows come from)

    examples = demo_prepare.warm_up_examples(["counting", "choice"])
    assert len(examples) == 2 * demo_prepare.WARM_UP_ROWS_PER_GROUP
    assert all(json.loads(e["target"]).keys() == {"answer"} for e in examples)
    assert examples[0]["messages"][1]["content"][0] == {"type": "image"}

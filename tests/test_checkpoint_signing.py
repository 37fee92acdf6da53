"""The training smoke's checkpoint is signed with OpenSSF model signing on the host, with the home's key,
before the runner writes the step's receipt: the receipt records the signature (file and keyid) and lists
model.sig among the step's outputs, and the real `model_signing verify key` CLI accepts the folder as
written and refuses it once one byte of one checkpoint file changed.

A real run (the demo's prepare and train-smoke steps, CPU, local runtime, about half a minute on two
cores), a real key made by `trace-tui keys init`, the installed model_signing CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trace_tui.signing.checkpoints import SIGNATURE_FILE, checkpoint_signer
from trace_tui.workers.checkpoints import trained_checkpoints

REPO = Path(__file__).resolve().parents[1]
MODEL_SIGNING = Path(sys.executable).parent / "model_signing"
CHECKPOINT = "outputs/train-smoke/_step/checkpoint-1"


def cli(*args: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=REPO)


def train_only_recipe(path: Path) -> Path:
    """The demo recipe with only its prepare and train-smoke steps (the rest has nothing to sign)."""
    data = yaml.safe_load((REPO / "recipes" / "demo.yaml").read_text())
    data["name"] = "demo-train"
    data["steps"] = [s for s in data["steps"] if s["id"] in ("prepare", "train-smoke")]
    assert [s["id"] for s in data["steps"]] == ["prepare", "train-smoke"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("signed-train")
    home = root / "home"
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    made = cli("keys", "init", "--home", str(home), env=env)
    assert made.returncode == 0, made.stderr
    campaign = root / "campaign"
    done = cli("--home", str(home), "--recipe", str(train_only_recipe(root / "r.yaml")), "--yes", "--runtime",
               "local", "--campaign", str(campaign), env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return {"home": home, "campaign": campaign, "env": env}  # type: ignore[dict-item]


def model_signing_verify(checkpoint: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MODEL_SIGNING), "verify", "key", "--signature", str(checkpoint / SIGNATURE_FILE),
                           "--public_key", str(home / "keys" / "signing-key.pub.pem"), str(checkpoint)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_receipt_records_the_signature_and_lists_it_among_the_outputs(trained) -> None:
    campaign, home = trained["campaign"], trained["home"]
    keyid = json.loads((home / "keys" / "signing-key.pub.json").read_text())["keyid"]
    content = json.loads((campaign / "receipts/train-smoke/_step.json").read_text())["content"]
    assert content["checkpoint_signatures"] == [{
        "checkpoint": CHECKPOINT, "signature": f"{CHECKPOINT}/{SIGNATURE_FILE}", "keyid": keyid,
        "scheme": "OpenSSF model signing (model_signing), ECDSA P-256 key"}]
    assert f"{CHECKPOINT}/{SIGNATURE_FILE}" in content["outputs"]
    # how far the step's store inputs were trusted here: the tiny model and tasks the prepare step made are local
    circumstance = json.loads((campaign / "receipts/train-smoke/_step.json").read_text())["circumstance"]
    assert circumstance["store_trust"] == {"local:dataset/demo-tasks": "local", "local:model/tiny-qwen2.5-vl": "local"}
    events = [json.loads(line) for line in (campaign / "events.jsonl").read_text().splitlines()]
    assert [e for e in events if e.get("type") == "log" and "signed with key" in e.get("message", "")
            and keyid[:16] in e["message"]]
    # The private key appears in no file of the campaign.
    private = (home / "keys" / "signing-key.pem").read_bytes()
    body = b"".join(private.splitlines()[1:-1])
    assert not [p for p in campaign.rglob("*") if p.is_file() and body[:40] in p.read_bytes()]
    # The signature is one of the outputs the campaign's verification checks.
    v = cli("verify", "--campaign", str(campaign), env=trained["env"], timeout=300)
    assert v.returncode == 0, v.stdout[-2000:]


@pytest.mark.slow
def test_model_signing_verifies_the_checkpoint_and_refuses_it_once_a_byte_changed(trained, tmp_path) -> None:
    home = trained["home"]
    ok = model_signing_verify(trained["campaign"] / CHECKPOINT, home)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Verification succeeded" in ok.stdout
    copy = tmp_path / "checkpoint-1"
    shutil.copytree(trained["campaign"] / CHECKPOINT, copy)
    assert model_signing_verify(copy, home).returncode == 0  # copied elsewhere, still its signature's
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    bad = model_signing_verify(copy, home)
    assert bad.returncode != 0
    assert "model.safetensors" in bad.stdout + bad.stderr


@pytest.mark.slow
def test_another_key_does_not_verify_the_checkpoint(trained, tmp_path) -> None:
    other = tmp_path / "other-home"
    made = cli("keys", "init", "--home", str(other), env=trained["env"])
    assert made.returncode == 0, made.stderr
    assert model_signing_verify(trained["campaign"] / CHECKPOINT, other).returncode != 0


def test_a_home_without_a_key_signs_nothing(tmp_path) -> None:
    assert checkpoint_signer(tmp_path / "home") is None


@pytest.mark.parametrize("named, problem", [
    ("outputs/other/_step/checkpoint-1", "is not a folder inside"),
    ("outputs/train-smoke/_step/../../../etc", "is not a folder inside"),
    ("/etc", "is not a folder inside"),
    ("outputs/train-smoke/_step/missing", "is not there"),
    ("outputs/train-smoke/_step/link", "is not a folder"),
    (7, "is not a folder inside"),
])
def test_a_checkpoint_named_outside_the_jobs_folder_is_not_signed(tmp_path, named, problem) -> None:
    out = tmp_path / "outputs/train-smoke/_step"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "link").symlink_to(tmp_path)
    (out / "run_receipt.json").write_text(json.dumps({"checkpoint": {"path": named}}))
    with pytest.raises(ValueError, match=problem):
        trained_checkpoints(tmp_path, "outputs/train-smoke/_step")


def test_the_checkpoint_the_run_receipt_names_is_found(tmp_path) -> None:
    out = tmp_path / "outputs/train-smoke/_step"
    (out / "checkpoint-1").mkdir(parents=True)
    assert trained_checkpoints(tmp_path, "outputs/train-smoke/_step") == []  # no run receipt: nothing trained
    (out / "run_receipt.json").write_text(json.dumps({"status": "completed",
                                                      "checkpoint": {"path": CHECKPOINT, "step": 1}}))
    assert trained_checkpoints(tmp_path, "outputs/train-smoke/_step") == [CHECKPOINT]

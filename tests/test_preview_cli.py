"""`trace-tui preview`, `recipes` and `hw` as a user runs them (subprocesses of the installed entry point).

The GPU side uses a fake NVML machine from tests/fake_nvml.py, selected for the
child process with TRACE_TUI_FAKE_NVML (the narrowest edge: pynvml's
functions); Docker, the image lock, the store and the disk are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

TESTS = Path(__file__).resolve().parent


def cli(*args: str, home: Path, machine: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACE_TUI_HOME": str(home), "XDG_DATA_HOME": str(home.parent / "xdg"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("TRACE_TUI_DEBUG", None)
    if machine:
        env["TRACE_TUI_FAKE_NVML"] = machine
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def _containers() -> set[str] | None:
    try:
        return {c.id for c in docker.from_env(timeout=10).containers.list(all=True)}
    except docker.errors.DockerException:  # pragma: no cover
        return None


def _stage_image_ids() -> set[str]:
    from trace_tui.hardware import image_lock_path, read_image_lock

    _s, entries, _m, _f = read_image_lock(image_lock_path())
    return {str(e.get("id")) for e in entries.values()} | {str(e.get("tag")) for e in entries.values()}


@pytest.mark.parametrize("recipe", ["full", "demo", "validation"])
def test_preview_starts_nothing_and_writes_nothing(tmp_path, recipe):
    home = tmp_path / "home"
    before = _containers()
    t0 = int(__import__("time").time())
    text = cli("preview", "--recipe", recipe, home=home, machine="8xh100")
    js = cli("preview", "--recipe", recipe, "--json", home=home, machine="8xh100")
    t1 = int(__import__("time").time()) + 1
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    # nothing written: no home, no campaign, no store, no log, not even the XDG fallback
    assert not home.exists() and list(tmp_path.iterdir()) == []
    if before is not None:
        client = docker.from_env(timeout=10)
        created = [e for e in client.events(since=t0, until=t1, decode=True,
                                            filters={"type": "container", "event": "create"})]
        ours = _stage_image_ids()
        assert not [e for e in created if e.get("from") in ours], created  # no stage container
        after = _containers()
        # Other processes may create containers concurrently on a shared engine; none came from this preview.
        assert before == after or all(e.get("from") not in ours for e in created)


def test_preview_text_and_json_say_the_same(tmp_path):
    home = tmp_path / "home"
    text = cli("preview", "--recipe", "full", home=home, machine="8xh100").stdout
    data = json.loads(cli("preview", "--recipe", "full", "--json", home=home, machine="8xh100").stdout)
    from trace_tui.release import release_lock

    lock = release_lock()
    assert data["suite"] == "trace_eval_v1" and data["suite_sha256"] == lock.published_hash("suite").sha256
    assert data["slices"] == 576 and data["rows_total"] == 787_320
    assert data["run_tag"].startswith("full-") and data["campaign_dir"] == str(home / "campaigns" / data["run_tag"])
    assert [m["ref"] for m in data["models"]] == [m.ref for m in lock.models]
    assert data["gpu_groups"] == "0 1 2 3 4 5 6 7" and len(data["gpu_plan"]) == 8
    assert sum(len(g["slices"]) for g in data["gpu_plan"]) == 576
    for needle in (data["suite_sha256"], data["run_tag"], data["campaign_dir"], "42, 43, 44", "rows to generate 787,320",
                   *(m["ref"] for m in data["models"]), *(m["label"] for m in data["models"]),
                   "max_tokens 4096", 'GPU_GROUPS="0 1 2 3 4 5 6 7"'):
        assert needle in text, needle
    gen = next(s for s in data["steps"] if s["id"] == "generate")
    assert gen["image"] == "infer" and gen["store"] and all(e["present"] is False for e in gen["store"])
    assert f"model:{lock.judge.ref}: missing" in text
    for s in data["steps"]:
        assert f"check  {s['check']['verdict']}: {s['check']['reason']}" in text


def test_preview_narrowed(tmp_path):
    out = cli("preview", "--recipe", "full", "--models", "trace-qwen2.5-vl-7b", "--seeds", "42",
              "--json", home=tmp_path / "h", machine="rtx4090")
    data = json.loads(out.stdout)
    assert data["slices"] == 24 and data["rows_total"] == 32_805 and data["gpu_plan"] == []
    assert "needs 1 GPU with >= 40 GiB per 7B model endpoint" in data["gpu_plan_note"]


def test_preview_errors_are_one_line(tmp_path):
    out = cli("preview", "--recipe", "ful", home=tmp_path / "h")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "known recipes: preflight" in out.stderr
    out = cli("preview", "--recipe", "full", "--models", "nope", home=tmp_path / "h")
    assert out.returncode == 2 and "--models: 'nope' is not in recipe full" in out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ntitle: t\npurpose: p\nsteps:\n  - id: x\n    title: x\n    stage: gpu\n    run: [m]\n")
    out = cli("preview", "--recipe", str(bad), home=tmp_path / "h")
    assert out.returncode == 2 and f"{bad}:7: steps.0.stage:" in out.stderr and "'train', 'infer'" in out.stderr
    assert "Traceback" not in out.stderr


def test_recipes_lists_every_recipe_with_its_status(tmp_path):
    out = cli("recipes", home=tmp_path / "h", machine="none")
    assert out.returncode == 0
    for name in ("preflight", "smoke-3b", "smoke-7b", "validation", "eval-setup", "eval-preview", "full", "verify",
                 "demo"):
        assert f"\n{name} " in "\n" + out.stdout
    data = json.loads(cli("recipes", "--json", home=tmp_path / "h", machine="none").stdout)["recipes"]
    by = {r["name"]: r for r in data}
    assert by["full"]["status"] == "blocked" and "found none" in by["full"]["reason"]
    assert by["preflight"]["status"] == "ready"
    assert not (tmp_path / "h").exists()


def test_hw_json_and_exit_codes(tmp_path):
    data = json.loads(cli("hw", "--json", home=tmp_path / "h", machine="8xh100").stdout)
    assert data["hardware"]["gpu"]["status"] == "ok" and len(data["hardware"]["gpu"]["gpus"]) == 8
    assert set(data["recipes"]) >= {"full", "demo"}
    text = cli("hw", home=tmp_path / "h", machine="mismatch")
    assert text.returncode == 0 and "driver/library version mismatch" in text.stdout
    out = cli("hw", "--recipe", "full", home=tmp_path / "h", machine="none")
    assert out.returncode == 3 and "needs 1 GPU with >= 40 GiB per 7B model endpoint" in out.stdout
    out = cli("hw", "--recipe", "demo", "--runtime", "local", home=tmp_path / "h", machine="none")
    assert out.returncode == 0
    assert not (tmp_path / "h").exists()


def test_the_help_loads_no_command_module_and_nothing_heavy():
    """`trace-tui --help` lists every command from the command line's own table: it imports no command module
    (each imports what its work needs at its top) and none of pydantic, docker or NVML."""
    code = ("import sys\nfrom trace_tui.cli import build_parser\nbuild_parser().format_help()\n"
            "heavy = [n for n in ('pydantic', 'docker', 'pynvml', 'yaml') if n in sys.modules]\n"
            "commands = [n for n in sys.modules if n.startswith('trace_tui.commands.')"
            " and n != 'trace_tui.commands.arguments']\n"
            "assert not heavy and not commands, (heavy, commands)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    help_text = subprocess.run([sys.executable, "-m", "trace_tui", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    assert all(name in help_text for name in ("images", "hw", "verify", "store", "merge"))

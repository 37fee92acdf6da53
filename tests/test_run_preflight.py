"""`trace-tui --recipe NAME --check`: a run's preflight item by item, by area, through the real command line.

The run and `--check` share one list (service/preflight.py): what `--check` reports failing is exactly what a
run refuses to start on (exit 3). Fakes: NVML only (tests/fake_nvml.py machines through TRACE_TUI_FAKE_NVML,
as the command line reads it); the recipes, the store, the image lock and the Docker engine are real (tiny
images under stage tags, tests/images_fixtures.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.store import Store, local_entry

from tests.images_fixtures import docker_client, tiny_lock  # noqa: F401 - fixtures
from tests.test_bundle_roundtrip import stage_lock  # noqa: F401 - fixture

TESTS = Path(__file__).resolve().parent


def cli(*args: str, home: Path, machine: str = "8xh100", **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "TRACE_TUI_HOME": str(home), "XDG_DATA_HOME": str(home.parent / "xdg"),
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
            "TRACE_TUI_FAKE_NVML": machine, "TRACE_TUI_IMAGES_LOCK": str(home.parent / "no-images.lock.json"), **env}
    full.pop("TRACE_TUI_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=full,
                          timeout=120, stdin=subprocess.DEVNULL)


def items(done: subprocess.CompletedProcess[str]) -> dict[str, list[dict]]:
    """The --check report (--log-format json) by area."""
    report = json.loads(done.stdout)
    out: dict[str, list[dict]] = {}
    for item in report["items"]:
        out.setdefault(item["area"], []).append(item)
    return out


def test_a_missing_store_entry_fails_the_store_area_and_nothing_else(tmp_path):
    """validation on 8 H100s with the local runtime: the GPUs pass, the store fails entry by entry, with the
    command that provides each; the exit code and the lines are those a run refuses to start with."""
    home = tmp_path / "home"
    done = cli("--recipe", "validation", "--runtime", "local", "--offline", "--check", "--log-format", "json",
               home=home)
    assert done.returncode == 3, done.stderr
    by = items(done)
    assert {i["verdict"] for i in by["gpus"]} == {"pass"} and {i["verdict"] for i in by["disk"]} == {"pass"}
    store = by["store"]
    assert len(store) == 11 and all(i["verdict"] == "fail" for i in store)
    assert all(i["line"].startswith(f"the store lacks {i['subject']} (run `trace-tui store fetch --entry ")
               for i in store)
    assert [i["verdict"] for i in by["network"]] == ["warn"]  # the local runtime cannot cut the network
    assert not home.exists()  # a check creates nothing
    run = cli("--recipe", "validation", "--runtime", "local", "--offline", "--yes", home=home)
    assert run.returncode == 3 and "Traceback" not in run.stderr
    for item in store:
        assert item["line"] in run.stderr
    assert not (home / "campaigns").exists()


def test_a_store_entry_present_says_its_trust_and_a_recipes_own_outputs_are_not_asked_for(tmp_path, trace_sample_dir):
    home = tmp_path / "home"
    done = cli("--recipe", "demo", "--runtime", "local", "--check", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "recipe demo can run here (runtime local)"
    assert "  store    pass  local:model/tiny-qwen2.5-vl: made by the recipe's own step prepare" in lines
    assert "  network  pass  no step needs the network" in lines
    name = local_entry("dataset", "mine")
    Store(home / "store").import_local(name, trace_sample_dir / "trace-sample.parquet")
    own = tmp_path / "recipe.yaml"
    own.write_text((Path(__file__).resolve().parents[1] / "recipes" / "verify.yaml").read_text()
                   .replace("name: verify", "name: mine").replace("store: [release]", f"store: [release, {name}]"))
    done = cli("--recipe", str(own), "--runtime", "local", "--check", "--log-format", "json", home=home)
    mine = next(i for i in items(done)["store"] if i["subject"] == name)
    assert mine["verdict"] == "pass" and mine["line"] == f"{name}: present, 1 file at its recorded size; " \
                                                          "local (unpinned)"


def test_offline_refuses_a_step_that_needs_the_network_before_it_starts(tmp_path):
    home = tmp_path / "home"
    done = cli("--recipe", "eval-setup", "--runtime", "local", "--offline", "--check", "--log-format", "json",
               home=home)
    network = items(done)["network"]
    assert [(i["subject"], i["verdict"]) for i in network] == [("fetch-eval", "fail"), ("fetch-validation", "fail")]
    run = cli("--recipe", "eval-setup", "--runtime", "local", "--offline", "--yes", home=home)
    assert run.returncode == 3
    assert "fetch-eval: needs the network, and --offline gives no step any" in run.stderr
    assert not (home / "campaigns").exists()
    online = cli("--recipe", "eval-setup", "--runtime", "local", "--check", "--log-format", "json", home=home)
    assert {(i["subject"], i["verdict"]) for i in items(online)["network"]} == {("fetch-eval", "pass"),
                                                                               ("fetch-validation", "pass")}


@pytest.mark.parametrize("args", [("--check",), ("--check", "store", "list"),
                                  ("--recipe", "demo", "--check", "--scheduler", "slurm")])
def test_check_outside_a_run_here_is_one_usage_line(tmp_path, args):
    done = cli(*args, home=tmp_path / "home")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--check" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.docker
def test_images_are_checked_as_locked_and_of_the_flavour_gpu_steps_need(tmp_path, docker_client, stage_lock):
    """Docker: each stage image is the locked id; a cpu-flavour lock fails a recipe whose steps use GPUs (it
    was shown by `hw` and let through by a run), unless the image is named explicitly."""
    home = tmp_path / "home"
    lock = tmp_path / "images.lock.json"
    lock.write_text(stage_lock.model_dump_json(indent=2))
    assert stage_lock.flavor == "cpu"
    done = cli("--recipe", "validation", "--check", "--log-format", "json", home=home,
               TRACE_TUI_IMAGES_LOCK=str(lock))
    images = items(done)["images"]
    for kind in ("infer", "score"):
        ok = next(i for i in images if i["subject"] == kind and i["verdict"] == "pass")
        assert ok["line"] == f"image {kind}: {stage_lock.images[kind].tag} {stage_lock.images[kind].id[:19]} as locked"
    assert [i["subject"] for i in images if i["verdict"] == "fail"] == ["infer"]  # score runs on CPU
    run = cli("--recipe", "validation", "--yes", home=home, TRACE_TUI_IMAGES_LOCK=str(lock))
    assert run.returncode == 3 and "image infer is the cpu flavour" in run.stderr
    named = cli("--recipe", "validation", "--check", "--log-format", "json", home=home,
                TRACE_TUI_IMAGES_LOCK=str(lock), TRACE_TUI_IMAGE_INFER=stage_lock.images["infer"].tag)
    assert {i["verdict"] for i in items(named)["images"]} == {"pass"}
    gpu = tmp_path / "gpu.lock.json"
    gpu.write_text(stage_lock.model_copy(update={"flavor": "gpu"}).model_dump_json(indent=2))
    moved = cli("--recipe", "validation", "--check", "--log-format", "json", home=home,
                TRACE_TUI_IMAGES_LOCK=str(gpu))
    assert {i["verdict"] for i in items(moved)["images"]} == {"pass"}
    docker_client.api.tag(stage_lock.images["train"].id, *stage_lock.images["score"].tag.rsplit(":", 1))
    moved = cli("--recipe", "validation", "--check", "--log-format", "json", home=home,
                TRACE_TUI_IMAGES_LOCK=str(gpu))
    score = next(i for i in items(moved)["images"] if i["subject"] == "score")
    assert score["verdict"] == "warn" and "the run would start" in score["line"]

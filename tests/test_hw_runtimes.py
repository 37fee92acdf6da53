"""`hw` names each runtime this host has, with its version, and which recipes it can run here.

Real Docker and Podman engines; three tiny real images stand for the stage images (the verdicts check
that the locked images are there, not what they hold): in Docker only, Docker runs the demo and Podman
does not; once they are loaded into Podman's storage, it does too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from trace_tui import images

from tests.images_fixtures import docker_client, tiny_lock  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def _hw(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "trace_tui", "hw", "--json"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return {rt["name"]: rt for rt in json.loads(done.stdout)["runtimes"]}


def test_hw_names_runtimes_with_versions_and_the_recipes_each_runs(tmp_path, docker_client, tiny_lock):
    lock = tiny_lock.model_copy(update={"flavor": "cpu"})
    lock_path = tmp_path / "images.lock.json"
    images.write_images_lock(lock, lock_path)
    env = {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(lock_path), "TRACE_TUI_HOME": str(tmp_path / "home")}
    found = _hw(env)
    podman = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert found["podman"]["version"] == podman and found["podman"]["runs_steps"]
    assert found["docker"]["version"] == docker_client.version()["Version"]
    assert "demo" in found["docker"]["recipes"] and "demo" not in found["podman"]["recipes"]
    assert "demo" in found["local"]["recipes"]
    if shutil.which("ch-run"):
        assert found["charliecloud"]["version"] and not found["charliecloud"]["runs_steps"]
        assert "does not run steps in it yet" in found["charliecloud"]["note"]
    ids = [img.id for img in lock.images.values()]
    save = subprocess.Popen(["docker", "save", *ids], stdout=subprocess.PIPE)
    loaded = subprocess.run(["podman", "load"], stdin=save.stdout, capture_output=True, text=True, timeout=300)
    save.stdout.close()
    assert save.wait() == 0 and loaded.returncode == 0, loaded.stderr
    try:
        assert "demo" in _hw(env)["podman"]["recipes"]
        text = subprocess.run([sys.executable, "-m", "trace_tui", "hw"], capture_output=True, text=True, env=env,
                              timeout=300).stdout
    finally:
        subprocess.run(["podman", "rmi", "--force", *ids], capture_output=True, timeout=300)
    line = next(ln for ln in text.splitlines() if ln.startswith(f"Runtime   podman {podman}: runs "))
    assert "demo" in line.split(": runs ", 1)[1].split(", ")

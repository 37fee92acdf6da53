"""`hw` names each runtime this host has, with its version, and which recipes it can run here.

Real Docker and Podman engines and Charliecloud; three tiny real images stand for the stage images (the
verdicts check that the locked images are there, not what they hold): in Docker only, Docker runs the demo
and Podman and Charliecloud do not; once they are loaded into Podman's storage, and exported for
Charliecloud by `images export`, they do too. The TUI's hardware screen says the same lines.
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
    charliecloud = subprocess.run(["ch-run", "--version"], capture_output=True, text=True,
                                  env={**os.environ, "USER": "x"}).stderr.strip() or "?"
    assert found["charliecloud"]["runs_steps"] and found["charliecloud"]["version"] == charliecloud
    assert "demo" not in found["charliecloud"]["recipes"]  # no image exported for it yet
    assert "no memory limit" in found["charliecloud"]["note"]
    export = subprocess.run([sys.executable, "-m", "trace_tui", "images", "export", "--runtime", "charliecloud",
                             "--out", str(tmp_path / "charliecloud")], capture_output=True, text=True, env=env,
                            timeout=600)
    assert export.returncode == 0, export.stderr[-2000:]
    exported = json.loads(lock_path.read_text())["exports"]["charliecloud"]
    assert sorted(exported) == sorted(lock.images) and all(e["format"] == "ch-dir" for e in exported.values())
    ids = [img.id for img in lock.images.values()]
    save = subprocess.Popen(["docker", "save", *ids], stdout=subprocess.PIPE)
    loaded = subprocess.run(["podman", "load"], stdin=save.stdout, capture_output=True, text=True, timeout=300)
    save.stdout.close()
    assert save.wait() == 0 and loaded.returncode == 0, loaded.stderr
    try:
        again = _hw(env)
        assert "demo" in again["podman"]["recipes"] and "demo" in again["charliecloud"]["recipes"]
        text = subprocess.run([sys.executable, "-m", "trace_tui", "hw"], capture_output=True, text=True, env=env,
                              timeout=300).stdout
    finally:
        subprocess.run(["podman", "rmi", "--force", *ids], capture_output=True, timeout=300)
    line = next(ln for ln in text.splitlines() if ln.startswith(f"Runtime   podman {podman}: runs "))
    assert "demo" in line.split(": runs ", 1)[1].split(", ")


async def test_the_hardware_screen_names_each_runtime_and_the_recipes_it_runs(tmp_path, monkeypatch, tiny_lock):
    """The TUI on its real backends (real Docker, Podman and ch-run): once the probe is done, the hardware
    screen lists the runtimes as `hw` does."""
    from test_tui_flows import hardware_ready, text_of, wait_for

    from trace_tui.cli import build_parser
    from trace_tui.commands.launch import run_request
    from trace_tui.tui.app import TraceTuiApp
    from trace_tui.tui.backends import default_backends

    lock_path = tmp_path / "images.lock.json"
    images.write_images_lock(tiny_lock.model_copy(update={"flavor": "cpu"}), lock_path)
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(lock_path))
    app = TraceTuiApp(default_backends(run_request(build_parser().parse_args(["--home", str(tmp_path / "home")]))))
    async with app.run_test(size=(140, 50)) as pilot:
        await hardware_ready(pilot, app)
        await wait_for(pilot, lambda: "Runtimes (" in text_of(app, "#hw-runtimes"), timeout=120,
                       what="the runtimes")
        text = text_of(app, "#hw-runtimes")
    podman = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.split()[-1]
    lines = {ln.split()[0]: ln.strip() for ln in text.splitlines()[1:]}
    assert lines["podman"].startswith(f"podman {podman}: runs ") and "demo" not in lines["podman"]  # Docker has them
    assert "demo" in lines["docker"] and "demo" in lines["local"]
    assert lines["charliecloud"].startswith("charliecloud 0.31: runs ") and "demo" not in lines["charliecloud"]
    assert "(less isolation than Docker: no memory limit" in lines["charliecloud"]

"""`make appliance` for the cpu flavour, and the demo recipe through the Docker runtime.

Real images built from the local Debian base (Docker cannot pull here), real
containers, a real bundle round trip: export the demo bundle, remove the
images and the store, import, and run the demo again offline in a fresh
campaign with network none — the same scores as before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui import images

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The three cpu images, built the way `make appliance` builds them, under a lock of their own."""
    lock_path = tmp_path_factory.mktemp("appliance") / "images.lock.json"
    subprocess.run([sys.executable, str(ROOT / "appliance" / "lock.py"), "wheelhouse", "cpu"], check=True,
                   capture_output=True)
    lock = images.build_images("cpu", say=lambda _m: None)
    images.write_images_lock(lock, lock_path)
    return lock, lock_path


@pytest.fixture(scope="module")
def env(built, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(built[1]), "TRACE_TUI_HOME": str(home)}


def _scores(campaign: Path, env: dict[str, str]) -> dict[str, float]:
    done = _cli("status", "--campaign", str(campaign), "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {f"{s['step']}/{s['slice']}": s["score"] for s in data["slices"] if s["score"] is not None}


def test_rebuilding_with_nothing_changed_keeps_every_image_id(built):
    lock, _ = built
    again = images.build_images("cpu", say=lambda _m: None)
    assert {n: i.id for n, i in again.images.items()} == {n: i.id for n, i in lock.images.items()}
    for img in lock.images.values():
        labels = images.docker_client().images.get(img.id).labels
        assert labels["org.trace-tui.version"] and labels["org.trace-tui.lock-sha256"] == img.build_args["LOCK_SHA256"]


def test_demo_runs_end_to_end_in_the_images_and_survives_a_bundle_round_trip(built, env, tmp_path):
    lock, lock_path = built
    first = tmp_path / "first"
    done = _cli("--recipe", "demo", "--yes", "--runtime", "docker", "--campaign", str(first), env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    for check in (("verify", "--campaign", str(first)), ("status", "--campaign", str(first), "--fail-if-incomplete")):
        res = _cli(*check, env=env)
        assert res.returncode == 0, (check, res.stdout[-1500:], res.stderr[-1500:])
    scores = _scores(first, env)
    assert scores, "the demo recorded no score"

    bundle_dir = tmp_path / "bundle"
    done = _cli("bundle", "export", str(bundle_dir), "--recipe", "demo", env=env)
    assert done.returncode == 0, done.stderr[-2000:]

    client = images.docker_client()
    for img in lock.images.values():
        client.images.remove(img.id, force=True)
    shutil.rmtree(Path(env["TRACE_TUI_HOME"]) / "store")
    site_lock = tmp_path / "site-images.lock.json"
    site_env = {**env, "TRACE_TUI_IMAGES_LOCK": str(site_lock)}
    done = _cli("bundle", "import", str(bundle_dir), env=site_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {n: i["id"] for n, i in json.loads(site_lock.read_text())["images"].items()} == \
        {n: i.id for n, i in lock.images.items()}

    second = tmp_path / "second"
    done = _cli("--recipe", "demo", "--yes", "--runtime", "docker", "--offline", "--campaign", str(second),
                env=site_env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert _scores(second, site_env) == scores

"""The Docker probe against the real engine running here (no fake): version, GPU runtime, images vs the lock."""

from __future__ import annotations

import json
import subprocess

import docker
import pytest

from trace_tui.hardware import probe_docker, read_image_lock

BASE = "trace-tui/debian-base:bookworm"  # built by `make base-image` before the tests (CI does)

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client():
    try:
        c = docker.from_env(timeout=10)
        c.ping()
    except docker.errors.DockerException as exc:  # pragma: no cover - CI starts dockerd
        pytest.skip(f"no Docker engine: {exc}")
    return c


@pytest.fixture(scope="module")
def base_id(client):
    try:
        return client.images.get(BASE).id
    except docker.errors.ImageNotFound:  # pragma: no cover
        pytest.skip(f"{BASE} not built (run `make base-image`)")


def write_lock(tmp_path, images, flavor="cpu"):
    p = tmp_path / "images.lock.json"
    p.write_text(json.dumps({"schema_version": "trace-tui-images-lock-v1", "flavor": flavor, "version": "0.1.0",
                             "images": images, "extra": {"ignored": True}}))
    return p


def test_engine_version_and_runtime_match_the_docker_cli(client, tmp_path):
    s = probe_docker(lock_path=tmp_path / "none.json")
    assert s.status == "ok"
    cli = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert s.version == cli and s.message == f"Docker {cli}"
    runtimes = json.loads(subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True,
                                         text=True, check=True).stdout)
    assert (s.gpu_runtime == "nvidia") == ("nvidia" in runtimes)


def test_no_lock_is_a_status_with_the_fix(client, tmp_path):
    s = probe_docker(lock_path=tmp_path / "images.lock.json")
    assert s.lock_status == "missing" and "make appliance" in s.lock_message
    assert [(i.name, i.status) for i in s.images] == [("train", "not_built"), ("infer", "not_built"),
                                                       ("score", "not_built")]
    assert all("make appliance" in i.message for i in s.images)


def test_present_different_and_not_built_against_real_images(client, base_id, tmp_path):
    lock = write_lock(tmp_path, {
        "train": {"tag": BASE, "id": base_id},  # present: the locked id exists
        "infer": {"tag": BASE, "id": "sha256:" + "0" * 64},  # different: only the tag exists
        "score": {"tag": "trace-tui/never-built:0", "id": "sha256:" + "1" * 64},  # not built
        "weird": ["not", "a", "mapping"],  # ignored (tolerant reading)
    })
    s = probe_docker(lock_path=lock)
    by = {i.name: i for i in s.images}
    assert s.lock_status == "ok" and s.lock_flavor == "cpu"
    assert by["train"].status == "present" and by["train"].found_id == base_id
    assert by["infer"].status == "different" and by["infer"].found_id == base_id
    assert "make appliance" in by["infer"].message
    assert by["score"].status == "not_built" and "make appliance" in by["score"].message
    assert "weird" not in by


def test_the_project_image_lock_reads_when_present(client):
    from trace_tui.hardware import image_lock_path

    status, entries, _msg, flavor = read_image_lock(image_lock_path())
    if status == "missing":
        pytest.skip("images not built in this checkout")
    assert status == "ok" and set(entries) >= {"train", "infer", "score"} and flavor in ("cpu", "gpu")


@pytest.mark.parametrize("text", ["{not json", "[]", '{"images": 3}', "\u00ff\u00fe"])
def test_unreadable_lock(client, tmp_path, text):
    p = tmp_path / "images.lock.json"
    p.write_text(text)
    s = probe_docker(lock_path=p)
    assert s.lock_status == "unreadable" and "make appliance" in s.lock_message
    assert all(i.status == "not_built" for i in s.images)


def test_unreachable_engine_is_a_status(tmp_path):
    s = probe_docker(lambda: docker.DockerClient(base_url=f"unix://{tmp_path}/no.sock", timeout=2),
                     lock_path=tmp_path / "x.json")
    assert s.status == "unreachable" and "not reachable" in s.message and s.version is None

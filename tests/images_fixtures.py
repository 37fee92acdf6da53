"""Real Docker fixtures for the image, registry and bundle tests.

Tiny images are made with `docker import` (no pull needed), and a real
registry (Debian's docker-registry) is served on loopback for push/pull.
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import tarfile
import time
import uuid

import pytest

from trace_tui import images


@pytest.fixture(scope="session")
def docker_client():
    return images.docker_client()  # a reachable engine is a requirement of the suite, not optional


def make_tiny_image(client, label: str):
    """A one-file image with unique content, so each has its own id."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = f"{label} {uuid.uuid4()}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    repo = f"trace-tui-test/{label}"
    client.images.client.api.import_image_from_data(buf.getvalue(), repository=repo, tag="t")
    return client.images.get(f"{repo}:t")


@pytest.fixture()
def tiny_lock(docker_client):
    """An ImagesLock whose three images are tiny real images (removed afterwards)."""
    made = {name: make_tiny_image(docker_client, f"{name}-{uuid.uuid4().hex[:8]}") for name in images.IMAGE_NAMES}
    lock = images.ImagesLock(flavor="cpu", version="0.0.0-test", images={
        name: images.LockedImage(name=name, tag=img.tags[0], id=img.id, base_image="scratch", base_id="none",
                                 build_args={}, requirement_locks={})
        for name, img in made.items()})
    yield lock
    for img in made.values():
        try:
            docker_client.images.remove(img.id, force=True)
        except Exception:  # noqa: BLE001 - already removed by the test
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory):
    """A real registry (Debian's docker-registry) on 127.0.0.1, which Docker treats as insecure-allowed."""
    binary = shutil.which("docker-registry")
    assert binary, "docker-registry is not installed (.ci/run installs Debian's docker-registry)"
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(f"""version: 0.1
storage:
  filesystem:
    rootdirectory: {root / 'data'}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
""")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("the local registry did not start")
    yield f"127.0.0.1:{port}/site"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture()
def filled_store(tmp_path, trace_sample_dir):
    """A store holding one local entry (the TRACE sample), for the bundle tests: (store, [its entry])."""
    from trace_tui.store import Store, local_entry

    store = Store(tmp_path / "home" / "store")
    name = local_entry("dataset", "trace-sample")
    store.import_local(name, trace_sample_dir / "trace-sample.parquet")
    return store, [name]

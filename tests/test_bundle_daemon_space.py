"""`bundle export` when the Docker daemon's own disk fills: `docker save` stages every layer under the
daemon's data root before it streams the archive, so that disk can fill while the bundle's has room.

A real second Docker daemon on a small tmpfs data root (root mounts it and starts dockerd; skipped where
either is not permitted): an image is loaded into it, the tmpfs is then filled to a few MiB, and the
export must stop in one line naming the daemon's data root and the fix, with the partial bundle removed
(before, it was an internal error with the daemon's HTTP 500 and a request for a bug report).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from tests.tmpfs import tmpfs
from trace_tui import bundle
from trace_tui.errors import CheckFailed
from trace_tui.images import ImagesLock, LockedImage

from tests.images_fixtures import filled_store, bundle_signer, trusted_keys  # noqa: F401 - the fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _image_tar(payload_mib: int) -> bytes:
    """A `FROM scratch` image of one file, as a build context."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("Dockerfile", b"FROM scratch\nCOPY blob /blob\n"),
                           ("blob", os.urandom(payload_mib << 20))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture()
def small_daemon(tmp_path):
    """A dockerd whose data root is a 64 MiB tmpfs, on a socket of its own; yields its client."""
    import docker

    if shutil.which("dockerd") is None or shutil.which("unshare") is None:
        pytest.skip("no dockerd or unshare on this machine")
    root = tmp_path / "root"
    bridge = Path("/sys/class/net/docker0")
    had_bridge = bridge.exists()
    with tmpfs(root, "size=64m") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        sock = tmp_path / "d.sock"
        # In a network namespace of its own: a second dockerd (even with --bridge none) takes the host's
        # docker0 away, and the host's daemon cannot start a container on the default network after it.
        proc = subprocess.Popen(
            ["unshare", "--net", "dockerd", "--data-root", str(root), "--exec-root", str(tmp_path / "exec"), "--host", f"unix://{sock}",
             "--pidfile", str(tmp_path / "d.pid"), "--storage-driver", "vfs", "--bridge", "none",
             "--iptables=false", "--ip-masq=false"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "dockerd.log", "wb"))
        try:
            client = None
            for _ in range(60):
                try:
                    client = docker.DockerClient(base_url=f"unix://{sock}", timeout=120)
                    client.ping()
                    break
                except Exception:  # noqa: BLE001 - not up yet
                    client = None
                    time.sleep(0.5)
            if client is None:
                pytest.skip("a second dockerd did not start here: " + (tmp_path / "dockerd.log").read_text()[-300:])
            yield client, root
            client.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert bridge.exists() or not had_bridge, "the second daemon took the host's docker0 away"


def test_a_full_daemon_disk_stops_the_export_in_one_line_naming_it(small_daemon, tmp_path, filled_store):
    client, root = small_daemon
    image, _ = client.images.build(fileobj=io.BytesIO(_image_tar(12)), custom_context=True, tag="trace-tui/infer:t")
    lock = ImagesLock(flavor="cpu", version="t", images={"infer": LockedImage(
        name="infer", tag="trace-tui/infer:t", id=image.id, base_image="scratch", base_id="scratch",
        build_args={}, requirement_locks={})})
    free = shutil.disk_usage(root).free
    (root / "filler").write_bytes(b"\0" * max(0, free - (2 << 20)))  # 2 MiB left: less than the layer
    store, entries = filled_store
    dest = tmp_path / "bundle"
    with pytest.raises(CheckFailed) as err:
        bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=lock, client=client,
                             say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
    line = err.value.line()
    assert f"the Docker daemon ran out of space under {root}" in line and "\n" not in line, line
    assert "docker image prune" in line
    assert not dest.exists()


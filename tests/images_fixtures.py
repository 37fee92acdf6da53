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


# -- the exporting site's signing key: every bundle is signed, as `bundle export` signs ---------

_SIGNER = []


def bundle_signer():
    """One ed25519 key (in memory) that signs every bundle the tests export, and that the importing
    sites in the tests trust (`keys=[bundle_signer().public_key]`, or trusted_key_file for the CLI)."""
    from securesystemslib.signer import CryptoSigner

    if not _SIGNER:
        _SIGNER.append(CryptoSigner.generate_ed25519())
    return _SIGNER[0]


def trusted_keys():
    return [bundle_signer().public_key]


def trusted_key_file(folder):
    """The test key's public half as `keys init` writes it, for `bundle import --trust-key FILE`."""
    import json

    key = bundle_signer().public_key
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "exporter.pub.json"
    path.write_text(json.dumps({"keyid": key.keyid, **key.to_dict()}))
    return path


def sign_bundle(dest, signer=None):
    """Sign the bundle in DEST as it now is (its manifest as written), with SIGNER (default the test key)."""
    import json

    from trace_tui.bundle.files import MANIFEST, BundleManifest
    from trace_tui.bundle.signature import write_signature

    data = (dest / MANIFEST).read_bytes()
    manifest = BundleManifest.model_validate_json(data)
    sets = {}
    for record in (dest / "store").rglob("manifest.json") if (dest / "store").is_dir() else []:
        try:
            doc = json.loads(record.read_text())
            sets[doc["name"]] = doc["sha256set"]
        except (ValueError, RecursionError, TypeError, KeyError):  # a record a test damaged: its import says so
            continue
    write_signature(dest, data, manifest, {e: sets.get(e, "sha256set:" + "0" * 64) for e in manifest.entries}, {},
                    signer or bundle_signer())

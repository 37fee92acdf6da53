"""Air-gapped bundles against a real Docker engine and a real store.

Export writes images (docker save), store entries and a manifest; import
refuses a tampered bundle by naming the file, loads the images (checking ids
against the lock) and fills a fresh store through its verifying staging.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_tui import bundle, images
from trace_tui.errors import CheckFailed
from trace_tui.store import Store, local_entry

from tests.images_fixtures import docker_client, tiny_lock  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


@pytest.fixture()
def filled_store(tmp_path, trace_sample_dir):
    store = Store(tmp_path / "home" / "store")
    name = local_entry("dataset", "trace-sample")
    store.import_local(name, trace_sample_dir / "trace-sample.parquet")
    return store, [name]


@pytest.fixture()
def exported(tmp_path, docker_client, tiny_lock, filled_store):
    store, entries = filled_store
    dest = tmp_path / "bundle"
    manifest = bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=tiny_lock,
                                    client=docker_client, say=lambda _m: None, wheelhouse=False)
    return dest, manifest, tiny_lock


def _import(dest: Path, tmp_path: Path, docker_client) -> Store:
    fresh = Store(tmp_path / "site" / "store")
    bundle.import_bundle(dest, store=fresh, client=docker_client, images_lock_path=tmp_path / "site" / "images.lock.json",
                         say=lambda _m: None)
    return fresh


def test_round_trip_restores_images_and_store(tmp_path, docker_client, exported, filled_store):
    dest, manifest, lock = exported
    assert set(manifest.files) >= {"images.lock.json", "images/train.tar", "images/infer.tar", "images/score.tar"}
    for img in lock.images.values():  # the site has none of the images
        docker_client.images.remove(img.id, force=True)
    fresh = _import(dest, tmp_path, docker_client)
    for img in lock.images.values():
        assert docker_client.images.get(img.id).id == img.id
    (name,) = filled_store[1]
    assert fresh.record(name).sha256set == filled_store[0].record(name).sha256set
    written = images.ImagesLock.model_validate_json((tmp_path / "site" / "images.lock.json").read_text())
    assert {n: i.id for n, i in written.images.items()} == {n: i.id for n, i in lock.images.items()}


def test_a_flipped_byte_in_an_image_tar_is_refused_by_name(tmp_path, docker_client, exported):
    dest, _, _ = exported
    tar = dest / "images" / "infer.tar"
    data = bytearray(tar.read_bytes())
    data[len(data) // 2] ^= 0x01
    tar.write_bytes(bytes(data))
    with pytest.raises(CheckFailed, match=r"images/infer\.tar: sha256 .* differs"):
        _import(dest, tmp_path, docker_client)


def test_a_missing_store_file_is_refused_by_name(tmp_path, docker_client, exported):
    dest, _, _ = exported
    victim = next(p for p in (dest / "store").rglob("*.parquet"))
    victim.unlink()
    with pytest.raises(CheckFailed, match=rf"{victim.name}: missing from the bundle"):
        _import(dest, tmp_path, docker_client)


def test_an_extra_file_is_refused_by_name(tmp_path, docker_client, exported):
    dest, _, _ = exported
    (dest / "images" / "surprise.tar").write_bytes(b"not ours")
    with pytest.raises(CheckFailed, match=r"images/surprise\.tar: extra file"):
        _import(dest, tmp_path, docker_client)


def test_nothing_is_loaded_or_stored_from_a_refused_bundle(tmp_path, docker_client, exported):
    dest, _, lock = exported
    for img in lock.images.values():
        docker_client.images.remove(img.id, force=True)
    (dest / "store" / "extra.txt").write_text("x")
    with pytest.raises(CheckFailed):
        _import(dest, tmp_path, docker_client)
    assert not (tmp_path / "site" / "store" / "entries").exists()
    from docker.errors import ImageNotFound

    for img in lock.images.values():
        with pytest.raises(ImageNotFound):
            docker_client.images.get(img.id)


def test_a_manifest_that_is_not_json_is_one_clear_error(tmp_path, docker_client, exported):
    dest, _, _ = exported
    (dest / "manifest.json").write_text("{ not json")
    with pytest.raises(CheckFailed, match="not a valid bundle manifest"):
        _import(dest, tmp_path, docker_client)


def test_export_refuses_a_store_that_lacks_an_entry(tmp_path, docker_client, tiny_lock):
    from trace_tui.errors import UsageError

    with pytest.raises(UsageError, match="the store lacks local:dataset/nothing"):
        bundle.export_bundle(tmp_path / "b", recipe="demo", entries=["local:dataset/nothing"],
                             store=Store(tmp_path / "empty"), images_lock=tiny_lock, client=docker_client,
                             say=lambda _m: None, wheelhouse=False)


def test_cli_import_of_a_tampered_bundle_exits_1_with_one_line(tmp_path, exported):
    import subprocess
    import sys

    dest, _, _ = exported
    (dest / "images" / "surprise.tar").write_bytes(b"x")
    done = subprocess.run([sys.executable, "-m", "trace_tui", "bundle", "import", str(dest),
                           "--home", str(tmp_path / "h")], capture_output=True, text=True,
                          env={**__import__("os").environ, "TRACE_TUI_IMAGES_LOCK": str(tmp_path / "l.json")})
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") <= 2 and "Traceback" not in done.stderr
    assert "images/surprise.tar: extra file" in done.stderr
    assert json.loads((dest / "manifest.json").read_text())["recipe"] == "demo"

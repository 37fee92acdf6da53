"""Air-gapped bundles against a real Docker engine and a real store.

Export writes images (docker save), store entries and a manifest; import
refuses a tampered bundle by naming the file, loads the images (checking ids
against the lock) and fills a fresh store through its verifying staging.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from trace_tui import bundle, images
from trace_tui.errors import CheckFailed
from trace_tui.store import Store

from tests.images_fixtures import (  # noqa: F401 - fixtures
    bundle_signer,
    docker_client,
    filled_store,
    sign_bundle,
    tiny_lock,
    trusted_key_file,
    trusted_keys,
)

pytestmark = pytest.mark.docker


@pytest.fixture()
def stage_lock(docker_client, tiny_lock):
    """tiny_lock's images under trace-tui's own stage tags, `trace-tui/<stage>:<version>-<flavor>` (the only
    tags a bundle may carry), with a version of their own so that no real stage image's tag is touched.
    tiny_lock removes the images, tags and all."""
    version = f"0.0.0-test-{uuid.uuid4().hex[:8]}"
    staged = {}
    for name, img in tiny_lock.images.items():
        tag = f"trace-tui/{name}:{version}-{tiny_lock.flavor}"
        docker_client.api.tag(img.id, *tag.rsplit(":", 1))
        docker_client.api.remove_image(img.tag)  # only the test tag goes: the image keeps its stage tag
        staged[name] = img.model_copy(update={"tag": tag})
    return tiny_lock.model_copy(update={"version": version, "images": staged})


@pytest.fixture()
def exported(tmp_path, docker_client, stage_lock, filled_store):
    store, entries = filled_store
    dest = tmp_path / "bundle"
    manifest = bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=stage_lock,
                                    client=docker_client, say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
    return dest, manifest, stage_lock


def _import(dest: Path, tmp_path: Path, docker_client) -> Store:
    fresh = Store(tmp_path / "site" / "store")
    bundle.import_bundle(dest, store=fresh, client=docker_client, images_lock_path=tmp_path / "site" / "images.lock.json",
                         say=lambda _m: None, keys=trusted_keys())
    return fresh


def test_round_trip_restores_images_and_store(tmp_path, docker_client, exported, filled_store):
    dest, manifest, lock = exported
    assert set(manifest.files) >= {"images.lock.json", "images/stages.tar"}
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
    tar = dest / "images" / "stages.tar"
    data = bytearray(tar.read_bytes())
    data[len(data) // 2] ^= 0x01
    tar.write_bytes(bytes(data))
    with pytest.raises(CheckFailed, match=r"images/stages\.tar: sha256 .* differs"):
        _import(dest, tmp_path, docker_client)


def test_layers_the_images_share_are_carried_once(tmp_path, docker_client, stage_lock, filled_store):
    """infer and score share nearly every layer (the same wheelhouse); the bundle holds them once, and
    both come back with their own ids."""
    import io
    import os
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        blob = os.urandom(4 << 20)  # incompressible, so sizes compare plainly
        info = tarfile.TarInfo("shared.bin")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    infer_tag, score_tag = stage_lock.images["infer"].tag, stage_lock.images["score"].tag
    docker_client.api.import_image_from_data(buf.getvalue(), *infer_tag.rsplit(":", 1))
    infer = docker_client.images.get(infer_tag)
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {infer_tag}\nLABEL stage=score\n")
    score, _ = docker_client.images.build(path=str(context), tag=score_tag, rm=True)
    assert score.id != infer.id
    lock = stage_lock.model_copy(deep=True)
    for name, img in (("infer", infer), ("score", score)):
        lock.images[name] = lock.images[name].model_copy(update={"id": img.id})
    store, entries = filled_store
    dest = tmp_path / "bundle"
    try:
        manifest = bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=lock,
                                        client=docker_client, say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
        assert [f for f in manifest.files if f.startswith("images/")] == ["images/stages.tar"]
        assert (4 << 20) < manifest.files["images/stages.tar"].bytes < (5 << 20)
        for img in (score, infer):
            docker_client.images.remove(img.id, force=True)
        _import(dest, tmp_path, docker_client)
        assert docker_client.images.get(infer_tag).id == infer.id
        assert docker_client.images.get(score_tag).id == score.id
    finally:
        for img in (score, infer):
            try:
                docker_client.images.remove(img.id, force=True)
            except Exception:  # noqa: BLE001 - not there
                pass


def test_a_bundle_with_one_archive_per_image_still_imports(tmp_path, docker_client, stage_lock, filled_store):
    """A bundle holding images/<name>.tar each (as exports before the shared archive wrote them), signed,
    imports the same."""
    from trace_tui.common.digest import sha256_file

    tiny_lock = stage_lock
    store, entries = filled_store
    dest = tmp_path / "bundle"
    manifest = bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=tiny_lock,
                                    client=docker_client, say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
    (dest / "images" / "stages.tar").unlink()
    files = {k: v for k, v in manifest.files.items() if k != "images/stages.tar"}
    for name, img in tiny_lock.images.items():
        tar = dest / "images" / f"{name}.tar"
        with open(tar, "wb") as out:
            for chunk in docker_client.images.get(img.id).save(named=True):
                out.write(chunk)
        files[f"images/{name}.tar"] = bundle.BundleFile(sha256=sha256_file(tar), bytes=tar.stat().st_size)
    (dest / bundle.MANIFEST).write_text(manifest.model_copy(update={"files": files}).model_dump_json())
    sign_bundle(dest)
    for img in tiny_lock.images.values():
        docker_client.images.remove(img.id, force=True)
    _import(dest, tmp_path, docker_client)
    for img in tiny_lock.images.values():
        assert docker_client.images.get(img.tag).id == img.id


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
                             say=lambda _m: None, wheelhouse=False, signer=bundle_signer())


def test_cli_import_of_a_tampered_bundle_exits_1_with_one_line(tmp_path, exported):
    import subprocess
    import sys

    dest, _, _ = exported
    (dest / "images" / "surprise.tar").write_bytes(b"x")
    done = subprocess.run([sys.executable, "-m", "trace_tui", "bundle", "import", str(dest),
                           "--home", str(tmp_path / "h"), "--trust-key", str(trusted_key_file(tmp_path / "k"))],
                          capture_output=True, text=True,
                          env={**__import__("os").environ, "TRACE_TUI_IMAGES_LOCK": str(tmp_path / "l.json")})
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") <= 2 and "Traceback" not in done.stderr
    assert "images/surprise.tar: extra file" in done.stderr
    assert json.loads((dest / "manifest.json").read_text())["recipe"] == "demo"


def test_a_full_disk_stops_the_export_in_one_line_and_gives_the_space_back(tmp_path, docker_client, tiny_lock,
                                                                          filled_store):
    """A real 1 MiB tmpfs (root mounts it; skipped where mounting is not permitted): the bundle's store
    files do not fit. The error names the file and the fix, and nothing of the partial bundle stays."""
    from tests.tmpfs import tmpfs
    from trace_tui.errors import CheckFailed

    mnt = tmp_path / "small"
    with tmpfs(mnt, "size=1m") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        store, entries = filled_store
        dest = mnt / "bundle"
        with pytest.raises(CheckFailed) as err:
            bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=tiny_lock,
                                 client=docker_client, say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
        line = err.value.line()
        assert "no space left on device writing " + str(dest) in line and "\n" not in line
        assert "export to a larger disk" in line
        assert not dest.exists()
        assert sum(p.stat().st_size for p in mnt.rglob("*") if p.is_file()) == 0


def test_cli_export_of_the_demo_on_a_fresh_home_carries_what_the_site_cannot_make(tmp_path, stage_lock):
    """`bundle export DIR --recipe demo` on a fresh home: the demo's model and tasks are made by its own first
    step (no fetch makes them), so the bundle carries the images and no store entry, says what it leaves out,
    and the site imports it (it told the user to run a `store fetch` that fetches nothing)."""
    import os
    import subprocess
    import sys

    lock = tmp_path / "images.lock.json"
    lock.write_text(stage_lock.model_dump_json(indent=2))
    env = {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(lock), "TRACE_TUI_HOME": str(tmp_path / "fresh")}
    dest = tmp_path / "bundle"
    made = subprocess.run([sys.executable, "-m", "trace_tui", "keys", "init"], capture_output=True, text=True, env=env)
    assert made.returncode == 0 and "signing key" in made.stdout, made.stderr
    out = subprocess.run([sys.executable, "-m", "trace_tui", "bundle", "export", str(dest), "--recipe", "demo",
                          "--no-wheelhouse"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "store fetch" not in out.stderr
    assert "not carried: local:model/tiny-qwen2.5-vl, local:dataset/demo-tasks" in out.stderr, out.stderr
    assert json.loads((dest / "manifest.json").read_text())["entries"] in ([], {})
    site = {**env, "TRACE_TUI_IMAGES_LOCK": str(tmp_path / "site" / "images.lock.json"),
            "TRACE_TUI_HOME": str(tmp_path / "site")}
    trusted = subprocess.run([sys.executable, "-m", "trace_tui", "keys", "trust",
                              str(tmp_path / "fresh" / "keys" / "signing-key.pub.json")], capture_output=True, text=True,
                             env=site)
    assert trusted.returncode == 0, trusted.stderr
    back = subprocess.run([sys.executable, "-m", "trace_tui", "bundle", "import", str(dest)], capture_output=True,
                          text=True, env=site, timeout=300)
    assert back.returncode == 0, back.stderr
    assert "trace-tui --recipe demo --offline" in back.stderr

"""A signed bundle for a cluster without Docker: the stage images for Podman, Apptainer and Charliecloud.

Tiny real images stand for the stage images (what is checked is where they go and that they are the locked
ones, not what they hold). Export with `--with-charliecloud` carries the Charliecloud directory images
`images export` wrote; import with `--runtime charliecloud` unpacks them with ch-convert and checks each
against the digest the exporter's lock records, `--runtime podman` loads the archive into Podman's storage,
neither touching Docker; `--runtime apptainer` without Apptainer says so and leaves the site as it was.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trace_tui import bundle
from trace_tui.errors import CheckFailed, RequirementsError, UsageError
from trace_tui.runtime.exports import export_charliecloud, tree_digest
from trace_tui.service.bundle_images import charliecloud_tars, import_images_for
from trace_tui.images import ImagesLock
from trace_tui.store import Store

from tests.images_fixtures import (  # noqa: F401 - fixtures
    bundle_signer,
    docker_client,
    filled_store,
    tiny_lock,
    trusted_keys,
)
from tests.test_bundle_roundtrip import stage_lock  # noqa: F401 - the fixture

pytestmark = pytest.mark.docker


@pytest.fixture()
def exported(tmp_path, docker_client, stage_lock, filled_store):  # noqa: F811 - fixtures
    store, entries = filled_store
    ch = export_charliecloud(stage_lock, sorted(stage_lock.images), tmp_path / "ch-images", say=lambda _m: None)
    lock = stage_lock.model_copy(update={"exports": {"charliecloud": ch}})
    dest = tmp_path / "bundle"
    manifest = bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=lock,
                                    client=docker_client, say=lambda _m: None, wheelhouse=False,
                                    signer=bundle_signer(), charliecloud=charliecloud_tars(lock))
    return dest, manifest, lock


def _place(runtime: str, images_dir: Path):  # noqa: ANN202
    return lambda src, lock: import_images_for(runtime, src, lock, images_dir, lambda _m: None)


def _import(dest: Path, site: Path, runtime: str) -> tuple[Store, ImagesLock]:
    store = Store(site / "store")
    bundle.import_bundle(dest, store=store, client=None, images_lock_path=site / "images.lock.json",
                         say=lambda _m: None, keys=trusted_keys(), place_images=_place(runtime, site / "images"))
    return store, ImagesLock.model_validate_json((site / "images.lock.json").read_text())


def test_charliecloud_images_travel_signed_and_unpack_to_the_recorded_digests(tmp_path, exported, filled_store):
    dest, manifest, lock = exported
    assert {f"images/charliecloud/{k}.tar" for k in lock.images} <= set(manifest.files)
    store, site = _import(dest, tmp_path / "site", "charliecloud")
    for kind, record in site.exports["charliecloud"].items():
        folder = Path(record.path)
        assert folder.parent == tmp_path / "site" / "images" and record.source_id == lock.images[kind].id
        assert tree_digest(folder) == lock.exports["charliecloud"][kind].sha256 == record.sha256
    assert set(site.exports) == {"charliecloud"}
    (name,) = filled_store[1]
    assert store.record(name).sha256set == filled_store[0].record(name).sha256set


def test_a_changed_charliecloud_tar_is_refused_before_anything_changes(tmp_path, exported):
    dest, _, lock = exported
    tar = dest / "images" / "charliecloud" / f"{sorted(lock.images)[0]}.tar"
    data = bytearray(tar.read_bytes())
    data[600] ^= 1
    tar.write_bytes(bytes(data))
    with pytest.raises(CheckFailed, match="charliecloud"):
        _import(dest, tmp_path / "site", "charliecloud")
    assert not (tmp_path / "site" / "images").exists() and not (tmp_path / "site" / "images.lock.json").exists()


def test_podman_loads_the_bundles_archive_without_docker(tmp_path, exported):
    dest, _, lock = exported
    ids = [img.id for img in lock.images.values()]
    try:
        _, site = _import(dest, tmp_path / "site", "podman")
        for image_id in ids:
            found = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", image_id],
                                   capture_output=True, text=True).stdout.strip()
            assert found == image_id.removeprefix("sha256:")
        assert site.exports == {} and {k: i.id for k, i in site.images.items()} == {k: i.id for k, i in
                                                                                     lock.images.items()}
    finally:
        subprocess.run(["podman", "rmi", "--force", *ids], capture_output=True)


def test_apptainer_import_without_apptainer_says_so_and_takes_the_store_back(tmp_path, exported, monkeypatch):
    """Apptainer is not installable here: the import's refusal, and the store entries it had added go again."""
    dest, _, _ = exported
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # neither apptainer nor singularity is on it
    store = Store(tmp_path / "site" / "store")
    with pytest.raises(RequirementsError) as err:
        bundle.import_bundle(dest, store=store, client=None, images_lock_path=tmp_path / "site" / "images.lock.json",
                             say=lambda _m: None, keys=trusted_keys(),
                             place_images=_place("apptainer", tmp_path / "site" / "images"))
    assert "neither apptainer nor singularity is installed" in str(err.value)
    assert "removed the store entries it had added" in str(err.value)
    assert not (tmp_path / "site" / "images.lock.json").exists()


def test_a_bundle_carries_only_charliecloud_images_the_lock_records_as_they_are(tmp_path, stage_lock):  # noqa: F811
    with pytest.raises(UsageError, match="records no Charliecloud image"):
        charliecloud_tars(stage_lock)
    ch = export_charliecloud(stage_lock, sorted(stage_lock.images), tmp_path / "ch", say=lambda _m: None)
    changed = next(iter(ch.values()))
    (Path(changed.path) / "etc" / "added-afterwards").write_text("x")
    with pytest.raises(UsageError, match="is not the .* image the lock records"):
        charliecloud_tars(stage_lock.model_copy(update={"exports": {"charliecloud": ch}}))

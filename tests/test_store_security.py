"""Nothing a bundle or an imported folder holds can forge a pinned entry, smuggle in a file from
outside the folder, widen a file's permissions, or leave a failed entry behind.

Real release files (TRACE_RELEASE_DIR), a real store on disk, the bundle's own entry importer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from trace_tui import bundle
from trace_tui.errors import CheckFailed
from trace_tui.release import release_lock
from trace_tui.store import Store, model_entry, release_entry
from trace_tui.common.digest import sha256set
from trace_tui.store.importer import import_dir, import_entry_dir
from trace_tui.store.manifest import EntryRecord, FileRecord, Source

LOCK = release_lock()
RELEASE = release_entry(LOCK)
QWEN = LOCK.training_base_models["3B"]
QWEN_ENTRY = model_entry(QWEN.repo_id, QWEN.revision)


def fake_entry(bundle_root: Path, name: str, kind: str, files: dict[str, bytes], *, sha_set: str | None = None) -> Path:
    """An entry folder as another store (or a forger) would write it into a bundle."""
    from trace_tui.store.names import parse

    e = parse(name)
    entry_dir = bundle_root / "store" / kind / e.dirname
    (entry_dir / "files").mkdir(parents=True)
    recs = []
    for rel, data in files.items():
        p = entry_dir / "files" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        recs.append(FileRecord(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest(), expected=[]))
    rec = EntryRecord(name=name, kind=kind, pinned=e.pinned, revision=e.revision, source=Source(type="import"),
                      files=recs, absent=[], sha256set=sha_set or sha256set({f.path: f.sha256 for f in recs}),
                      notes={}, added_at="2026-01-01T00:00:00+00:00")
    (entry_dir / "manifest.json").write_text(rec.model_dump_json())
    return entry_dir


def import_like_a_bundle(store: Store, entry_dir: Path, name: str) -> None:
    """The bundle importer's own per-entry path (images are not involved)."""
    bundle._import_entry(store, name, entry_dir.parents[2], lambda _m: None)


def test_a_bundled_forged_release_is_refused(tmp_path: Path) -> None:
    entry_dir = fake_entry(tmp_path / "b", RELEASE, "release",
                           {"rlvr/evaluation/trace_eval/results.json": b'{"forged": true}'})
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed):
        import_like_a_bundle(store, entry_dir, RELEASE)
    assert store.record(RELEASE) is None


def test_a_bundled_forged_pinned_model_is_refused(tmp_path: Path) -> None:
    entry_dir = fake_entry(tmp_path / "b", QWEN_ENTRY, "model", {"config.json": b'{"forged": true}'})
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed, match="does not publish"):
        import_like_a_bundle(store, entry_dir, QWEN_ENTRY)
    assert store.record(QWEN_ENTRY) is None
    # the store-import path (a folder of entries) refuses it the same way
    result = import_dir(store, LOCK, tmp_path / "b")
    assert result.imported == [] and QWEN_ENTRY in [n for n, _ in result.refused]
    assert store.record(QWEN_ENTRY) is None


def test_a_model_the_lock_does_not_pin_is_refused(tmp_path: Path) -> None:
    name = model_entry("someone/anything", "a" * 40)
    entry_dir = fake_entry(tmp_path / "b", name, "model", {"config.json": b"{}"})
    with pytest.raises(CheckFailed, match="not pinned by this release lock"):
        import_entry_dir(Store(tmp_path / "store"), entry_dir)


def test_a_wrong_sha256set_is_refused_in_staging_and_leaves_nothing(tmp_path: Path) -> None:
    name = "local:dataset/x"
    entry_dir = fake_entry(tmp_path / "b", name, "local", {"a.txt": b"a"}, sha_set="sha256set:" + "0" * 64)
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed, match="sha256set"):
        import_entry_dir(store, entry_dir)
    assert store.record(name) is None and not store.entry_dir(name).exists()


def test_a_symlink_out_of_the_folder_is_refused_local_and_bundle(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash")
    secret.chmod(0o600)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "shadow").symlink_to(secret)
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed, match="links outside"):
        store.import_local("local:model/m", folder)
    assert store.record("local:model/m") is None
    with pytest.raises(CheckFailed, match="symbolic link"):
        store.import_local("local:model/one", folder / "shadow")
    entry_dir = fake_entry(tmp_path / "b", "local:dataset/y", "local", {"a.txt": secret.read_bytes()})
    (entry_dir / "files" / "a.txt").unlink()
    (entry_dir / "files" / "a.txt").symlink_to(secret)
    with pytest.raises(CheckFailed, match="links outside"):
        import_entry_dir(store, entry_dir)
    assert not list((tmp_path / "store").rglob("blobs/**/*")) or all(
        p.is_dir() for p in (tmp_path / "store").rglob("blobs/**/*"))


def test_a_link_inside_the_folder_is_followed(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "real.json").write_text("{}")
    (folder / "alias.json").symlink_to(folder / "real.json")
    rec = Store(tmp_path / "store").import_local("local:model/m", folder)
    assert sorted(f.path for f in rec.files) == ["alias.json", "real.json"]


def test_imports_never_widen_permissions(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "private.bin").write_bytes(b"p" * 10)
    (folder / "private.bin").chmod(0o600)
    (folder / "public.bin").write_bytes(b"q" * 10)
    (folder / "public.bin").chmod(0o644)
    store = Store(tmp_path / "store")
    store.import_local("local:model/m", folder)
    files = store.entry_dir("local:model/m") / "files"
    assert stat.S_IMODE(os.stat(files / "private.bin").st_mode) & 0o077 == 0
    assert stat.S_IMODE(os.stat(files / "public.bin").st_mode) == 0o444
    for blob in (tmp_path / "store" / "blobs").rglob("*"):
        if blob.is_file() and blob.read_bytes() == b"p" * 10:
            assert stat.S_IMODE(blob.stat().st_mode) & 0o077 == 0


def test_the_real_release_still_imports_from_a_bundle(tmp_path: Path, trace_release_dir: Path) -> None:
    src = Store(tmp_path / "a")
    assert import_dir(src, LOCK, trace_release_dir).refused == []
    dst_bundle = tmp_path / "b" / "store"
    shutil.copytree(src.entry_dir(RELEASE), dst_bundle / src.entry_dir(RELEASE).relative_to(src.entries_dir))
    other = Store(tmp_path / "c")
    import_like_a_bundle(other, dst_bundle / src.entry_dir(RELEASE).relative_to(src.entries_dir), RELEASE)
    assert other.record(RELEASE).sha256set == src.record(RELEASE).sha256set
    assert json.loads(other.record(RELEASE).model_dump_json())["pinned"]

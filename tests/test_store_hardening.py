"""The store as an attacker and an unlucky user meet it: a record that lies about being pinned, folders
reached through links, a hub cache that names its own hashes, a blob swapped after it was stored,
broken or tampered entries, unreadable folders, a store that cannot be written, a full disk.

A real store on disk and the real CLI. Where a check needs a permission to be refused, the CLI runs
under `setpriv` without the capabilities that let root read and write everything (the tests run as
root); the one injected fault is ENOSPC at the copy into staging (filling a disk is not a unit test).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.cli import main
from trace_tui.common.digest import sha256set
from trace_tui.errors import CheckFailed
from trace_tui.release import release_lock
from trace_tui.store import Store, model_entry, release_entry
from trace_tui.store import hashing
from trace_tui.store.importer import import_dir, import_entry_dir
from trace_tui.store.manifest import EntryRecord, FileRecord, Source
from trace_tui.store.names import parse

LOCK = release_lock()
RELEASE = release_entry(LOCK)
SET_MODEL = next(m for m in LOCK.models if m.published_revision_sets)  # a model the lock publishes sha256sets for
SET_MODEL_ENTRY = model_entry(SET_MODEL.repo_id, SET_MODEL.revision)


def entry_folder(parent: Path, name: str, files: dict[str, bytes], **claims: object) -> Path:
    """An entry folder as another store (or a forger) writes it; ``claims`` override the record's fields."""
    e = parse(name)
    folder = parent / e.kind / e.dirname
    (folder / "files").mkdir(parents=True)
    recs = []
    for rel, data in files.items():
        (folder / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "files" / rel).write_bytes(data)
        recs.append(FileRecord(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    fields = dict(name=name, kind=e.kind, pinned=e.pinned, revision=e.revision, source=Source(type="import"),
                  files=recs, sha256set=sha256set({f.path: f.sha256 for f in recs}), added_at="2026-01-01T00:00:00")
    (folder / "manifest.json").write_text(EntryRecord(**{**fields, **claims}).model_dump_json())
    return folder


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def without_root_powers(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a child that root's capabilities do not let read or write past file modes."""
    if shutil.which("setpriv") is None:  # pragma: no cover - util-linux is on every Debian machine
        pytest.skip("setpriv (util-linux) is not installed")
    caps = "-dac_override,-dac_read_search,-fowner"
    return subprocess.run(["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--",
                           sys.executable, "-m", "trace_tui", *argv], capture_output=True, text=True, timeout=120)


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trace-tui: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.parametrize("claims", [{"pinned": False, "kind": "local"}, {"kind": "local"}, {"pinned": False}])
@pytest.mark.parametrize("name", [SET_MODEL_ENTRY, RELEASE])
def test_a_record_that_says_unpinned_cannot_bring_a_pinned_entry(tmp_path, name, claims):
    path = "model.safetensors" if name.startswith("model:") else "rlvr/release_files.v1.json"
    folder = entry_folder(tmp_path / "b", name, {path: b'{"forged": 1}'}, **claims)
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed):
        import_entry_dir(store, folder, LOCK)
    result = import_dir(store, LOCK, tmp_path / "b")
    assert result.imported == [] and [n for n, _ in result.refused] == [name]
    assert store.record(name) is None and store.records() == []


def test_an_entry_folder_reached_through_a_link_is_refused(tmp_path, capsys):
    outside = entry_folder(tmp_path / "elsewhere", "local:model/o", {"secret.txt": b"from outside"})
    given = tmp_path / "given" / "local"
    given.mkdir(parents=True)
    (given / "model--o").symlink_to(outside)
    store = Store(tmp_path / "store")
    result = import_dir(store, LOCK, tmp_path / "given")
    assert result.imported == [] and "a symbolic link" in result.refused[0][1]
    with pytest.raises(CheckFailed, match="symbolic link"):
        import_entry_dir(store, given / "model--o", LOCK)
    (given / "model--o").unlink()
    (given / "model--o").mkdir()
    (given / "model--o" / "manifest.json").symlink_to(outside / "manifest.json")
    (given / "model--o" / "files").symlink_to(outside / "files")
    with pytest.raises(CheckFailed, match="symbolic link"):
        import_entry_dir(store, given / "model--o", LOCK)
    assert store.records() == []


def hub_cache(root: Path, repo_id: str, revision: str, files: dict[str, bytes]) -> Path:
    """A Hugging Face cache as anyone can write one: blobs named by the sha256 of their own bytes."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for rel, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / rel).symlink_to(os.path.relpath(blob, snap))
    return snap


def test_a_hub_cache_cannot_stand_in_for_a_model_the_lock_publishes_sets_for(tmp_path):
    hub_cache(tmp_path / "hub", SET_MODEL.repo_id, SET_MODEL.revision, {"model.safetensors": b"EVIL"})
    store = Store(tmp_path / "store")
    result = import_dir(store, LOCK, tmp_path / "hub")
    assert result.imported == [] and result.refused[0][0] == SET_MODEL_ENTRY
    assert "which the release lock does not publish" in result.refused[0][1]
    # the same through a --local-dir download whose metadata states the forged hash
    local = tmp_path / "localdir"
    meta = local / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    (local / "model.safetensors").write_bytes(b"EVIL")
    (meta / "model.safetensors.metadata").write_text(
        f"{SET_MODEL.revision}\n{hashlib.sha256(b'EVIL').hexdigest()}\n0\n")
    result = import_dir(store, LOCK, local, only=[SET_MODEL_ENTRY])
    assert result.imported == [] and "does not publish" in result.refused[0][1]
    assert store.records() == []


def test_a_hub_cache_still_imports_a_model_the_lock_publishes_no_set_for(tmp_path):
    base = LOCK.training_base_models["3B"]
    hub_cache(tmp_path / "hub", base.repo_id, base.revision, {"config.json": b"{}"})
    store = Store(tmp_path / "store")
    result = import_dir(store, LOCK, tmp_path / "hub")
    assert [r.name for r in result.imported] == [model_entry(base.repo_id, base.revision)]


def test_a_blob_swapped_after_it_was_stored_is_never_linked_to(tmp_path, trace_release_dir):
    store = Store(tmp_path / "store")
    import_dir(store, LOCK, trace_release_dir)
    req = "rlvr/requirements-cu128.txt"
    genuine = (trace_release_dir / req).read_bytes()
    blob = store.blob_path(hashlib.sha256(genuine).hexdigest())
    outside = tmp_path / "outside-secret.txt"
    outside.write_bytes(b"S" * len(genuine))
    outside.chmod(0o600)
    store.remove(RELEASE)
    for swap in ("same-size file", "link"):
        blob.unlink()
        if swap == "link":
            blob.symlink_to(outside)
        else:
            blob.write_bytes(b"S" * len(genuine))
        assert import_dir(store, LOCK, trace_release_dir).refused == []
        stored = store.root_of(RELEASE) / req
        assert not stored.is_symlink() and stored.read_bytes() == genuine, swap
        assert store.check(RELEASE, deep=True).ok
        assert not blob.is_symlink() and blob.read_bytes() == genuine
        store.remove(RELEASE)


def test_a_shared_blob_is_never_more_readable_than_its_narrowest_source(tmp_path):
    public, private = tmp_path / "public.bin", tmp_path / "private.bin"
    public.write_bytes(b"same")
    private.write_bytes(b"same")
    public.chmod(0o644)
    private.chmod(0o600)
    store = Store(tmp_path / "store")
    store.import_local("local:dataset/public", public)
    store.import_local("local:dataset/private", private)
    stored = store.path_of("local:dataset/private")
    assert stat.S_IMODE(stored.stat().st_mode) == 0o400
    assert store.check("local:dataset/public").ok and store.check("local:dataset/private").ok


def test_a_broken_entry_record_is_listed_and_fails_verify(tmp_path, trace_release_dir, capsys):
    home = tmp_path / "home"
    assert run_cli(capsys, "store", "import", str(trace_release_dir), "--home", str(home))[0] == 0
    manifest = Store(home / "store").entry_dir(RELEASE) / "manifest.json"
    manifest.write_text('{"broken')
    code, out, _ = run_cli(capsys, "store", "verify", "--deep", "--home", str(home))
    assert code == 1 and "FAILED" in out and "not a valid store manifest" in out and "empty" not in out
    code, out, _ = run_cli(capsys, "store", "list", "--home", str(home))
    assert code == 0 and "FAILED" in out and str(manifest) in out and "empty" not in out


@pytest.mark.parametrize("tamper", ["link to a copy", "writable", "special file"])
def test_tampered_entry_files_fail_verify(tmp_path, trace_release_dir, capsys, tamper):
    home = tmp_path / "home"
    assert run_cli(capsys, "store", "import", str(trace_release_dir), "--home", str(home))[0] == 0
    stored = Store(home / "store").root_of(RELEASE) / "rlvr/requirements-cu128.txt"
    copy = tmp_path / "copy.txt"
    copy.write_bytes(stored.read_bytes())
    if tamper == "link to a copy":
        stored.unlink()
        stored.symlink_to(copy)
    elif tamper == "writable":
        stored.chmod(0o666)
    else:
        stored.unlink()
        os.mkfifo(stored)
    code, out, _ = run_cli(capsys, "store", "verify", "--deep", "--home", str(home))
    assert code == 1 and str(stored) in out, out


def test_an_unreadable_folder_stops_a_local_import_by_name(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"w")
    (folder / "sub").chmod(0)
    home = tmp_path / "home"
    proc = without_root_powers("store", "import", "--local", "model/m", str(folder), "--home", str(home))
    (folder / "sub").chmod(0o755)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert str(folder / "sub") in one_line_error(proc.stderr)
    assert Store(home / "store").records() == []


def test_an_unwritable_store_and_an_unreadable_stored_file_are_one_line(tmp_path, trace_release_dir, capsys):
    home = tmp_path / "home"
    assert run_cli(capsys, "store", "import", str(trace_release_dir), "--home", str(home))[0] == 0
    store = Store(home / "store")
    stored = store.root_of(RELEASE) / "rlvr/requirements-cu128.txt"
    stored.chmod(0)
    proc = without_root_powers("store", "verify", "--deep", "--home", str(home))
    assert proc.returncode == 1 and f"{stored}: cannot be read" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    stored.chmod(0o444)
    for folder in (store.root, store.tmp_dir):
        folder.chmod(0o555)
    sample = tmp_path / "x.bin"
    sample.write_bytes(b"x")
    proc = without_root_powers("store", "import", "--local", "dataset/x", str(sample), "--home", str(home))
    for folder in (store.root, store.tmp_dir):
        folder.chmod(0o755)
    assert proc.returncode == 1 and "Permission denied" in one_line_error(proc.stderr)


@pytest.mark.parametrize("where", ["store", "store/entries", "store/tmp"])
def test_a_file_where_the_store_keeps_a_folder_is_one_line(tmp_path, capsys, where):
    home = tmp_path / "home"
    (home / where).parent.mkdir(parents=True, exist_ok=True)
    (home / where).write_text("not a folder")
    sample = tmp_path / "x.bin"
    sample.write_bytes(b"x")
    for argv in (["store", "list"], ["store", "verify"], ["store", "import", "--local", "dataset/x", str(sample)]):
        code, _, err = run_cli(capsys, *argv, "--home", str(home))
        assert code == 2 and str(home / where) in one_line_error(err), argv


def test_a_bundle_given_to_store_import_has_its_entries_imported(tmp_path, trace_release_dir, capsys):
    source = Store(tmp_path / "a")
    import_dir(source, LOCK, trace_release_dir)
    bundle_dir = tmp_path / "bundle"
    shutil.copytree(source.entry_dir(RELEASE), bundle_dir / "store" / source.entry_dir(RELEASE).relative_to(
        source.entries_dir))
    (bundle_dir / "manifest.json").write_text(json.dumps({"schema_version": "trace-tui-bundle-v1", "recipe": "verify",
                                                          "entries": [RELEASE], "images": {}, "files": {}}))
    code, out, err = run_cli(capsys, "store", "import", str(bundle_dir), "--home", str(tmp_path / "home"))
    assert code == 0 and f"stored {RELEASE}" in out and "bundle import" in out and err == ""


def test_a_full_store_disk_names_the_store_not_the_source(tmp_path, trace_sample_dir, monkeypatch, capsys):
    def no_space(src, dst, algorithms, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hashing, "copy_digest", no_space)
    home = tmp_path / "home"
    code, _, err = run_cli(capsys, "store", "import", "--local", "dataset/s", str(trace_sample_dir / "trace-sample.parquet"),
                           "--home", str(home))
    line = one_line_error(err)
    assert code == 1 and "no space left on device" in line and str(home / "store") in line
    assert str(trace_sample_dir) not in line.split(" while storing ")[0]


def test_a_nul_in_a_recorded_file_name_is_one_line(tmp_path):
    folder = entry_folder(tmp_path / "b", "local:dataset/n", {"a.txt": b"a"})
    rec = json.loads((folder / "manifest.json").read_text())
    rec["files"][0]["path"] = "a\x00.txt"
    (folder / "manifest.json").write_text(json.dumps(rec))
    with pytest.raises(CheckFailed, match="NUL"):
        import_entry_dir(Store(tmp_path / "store"), folder, LOCK)


def test_a_stopped_import_leaves_no_staging_behind(tmp_path):
    """SIGTERM while a large file is being copied into staging: interrupted (130), staging removed."""
    import signal
    import time

    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(3 << 30)  # sparse: reads cost CPU, not disk
    home = tmp_path / "home"
    proc = subprocess.Popen([sys.executable, "-m", "trace_tui", "store", "import", "--local", "dataset/big", str(big),
                             "--home", str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tmp = home / "store" / "tmp"
    deadline = time.monotonic() + 60
    while not any(p.is_dir() for p in tmp.glob("*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the import ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err
    assert [p.name for p in tmp.iterdir()] == []


def test_a_hub_cache_link_out_of_the_cache_is_refused_as_a_link(tmp_path):
    base = LOCK.training_base_models["3B"]
    snap = hub_cache(tmp_path / "hub", base.repo_id, base.revision, {"config.json": b"{}"})
    (snap / "secret").symlink_to("/etc/shadow")
    result = import_dir(Store(tmp_path / "store"), LOCK, tmp_path / "hub")
    assert result.imported == [] and f"{snap / 'secret'}: links outside" in result.refused[0][1]

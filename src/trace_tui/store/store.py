"""The local store (``TRACE_TUI_HOME/store``): verified entries over content-addressed blobs.

Layout::

    store/
      blobs/sha256/<2 hex>/<sha256>         every file's bytes, once (hard links below)
      entries/<kind>/<dir>/manifest.json    the entry record (EntryRecord)
      entries/<kind>/<dir>/files/...        the entry's tree: a model dir, dataset files, rlvr/...
      partial/<kind>/<dir>/<path>.part      downloads in flight (kept across interruptions)
      tmp/<random>/                         staging: files are verified here, then renamed in

Nothing unverified enters ``entries/``: a staging folder is filled and every file checked
against what its source states (hub metadata, release receipts, provenance md5), and
only then renamed into place in one step. Entry files are hard links to their blob and
read-only, so ``verify --deep`` (rehash) catches any change made afterwards.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import shutil
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from trace_tui.common.digest import sha256set
from trace_tui.errors import CheckFailed, RequirementsError, UsageError, out_of_space
from trace_tui.paths import store_dir
from trace_tui.store import hashing
from trace_tui.store.manifest import EntryRecord, Expected, FileRecord, Source
from trace_tui.store.names import EntryName, parse

MANIFEST = "manifest.json"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def check_expected(display: str, digests: dict[str, str], size: int, expected: list[Expected],
                   expected_size: int | None = None) -> None:
    """Raise CheckFailed naming the file when its bytes differ from a stated hash or size."""
    if expected_size is not None and size != expected_size:
        raise CheckFailed(f"{display}: {size} bytes, expected {expected_size} "
                          f"(a truncated or half-downloaded file?)", hint="the file was not stored")
    for exp in expected:
        got = digests.get(exp.algorithm)
        if got is None:
            raise CheckFailed(f"{display}: no {exp.algorithm} computed")  # pragma: no cover - programming error
        if got != exp.value.lower():
            raise CheckFailed(f"{display}: {exp.algorithm} {got} differs from {exp.value} stated by {exp.source}",
                              hint="the file was not stored")


def readable_source(src: Path, within: Path | None, display: str) -> int:
    """The mode of ``src``, a regular file inside ``within`` (after links); CheckFailed otherwise."""
    if within is None:
        if src.is_symlink():
            raise CheckFailed(f"{display}: a symbolic link; imports copy regular files only",
                              hint="copy the file itself into the folder you import")
        real = src
    else:
        real = Path(os.path.realpath(src))
        root = Path(os.path.realpath(within))
        if real != root and root not in real.parents:
            raise CheckFailed(f"{display}: links outside {within} (to {real}); imports read nothing outside "
                              "the folder given", hint="copy the file itself into the folder you import")
    try:
        st = os.stat(real)
    except OSError as exc:
        raise CheckFailed(f"{display}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CheckFailed(f"{display}: a link to a folder; imports follow links to files only",
                          hint="copy the folder itself into the folder you import")
    if not stat.S_ISREG(st.st_mode):
        raise CheckFailed(f"{display}: not a regular file", hint="imports copy regular files only")
    return st.st_mode


def tree_files(root: Path) -> list[Path]:
    """Every file, link and special file below ``root``, sorted; links to folders are listed, not entered.

    A folder that cannot be read stops the walk with its name: skipping it would store an entry
    without its files and call it complete.
    """
    def unreadable(exc: OSError) -> None:
        raise CheckFailed(f"{exc.filename}: cannot be read ({exc.strerror or exc})",
                          hint="make the folder readable, or leave it out of the folder you import")

    out = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        out += [Path(dirpath, n) for n in filenames]
        out += [Path(dirpath, n) for n in dirnames if os.path.islink(os.path.join(dirpath, n))]
    return sorted(out)


@dataclass
class Staging:
    """A folder inside the store where one entry is assembled and verified before it is committed."""

    store: "Store"
    entry: EntryName
    path: Path
    files: dict[str, FileRecord] = field(default_factory=dict)

    @property
    def files_dir(self) -> Path:
        return self.path / "files"

    def target(self, rel: str) -> Path:
        rel_path = Path(rel)
        if rel_path.is_absolute() or ".." in rel_path.parts:
            raise CheckFailed(f"{rel}: a path outside its entry")
        if "\x00" in rel:
            raise CheckFailed(f"{rel!r}: a file name with a NUL character, which no file system stores")
        return self.files_dir / rel_path

    def add(self, rel: str, src: Path, *, expected: list[Expected] = (), expected_size: int | None = None,
            display: str | None = None, move: bool = False, within: Path | None = None) -> FileRecord:
        """Verify ``src`` and place it at ``rel`` in the staged tree (copied, or moved when ``move``).

        ``within``: the tree the user gave; ``src`` (links resolved) must lie inside it. Without it,
        ``src`` must not be a link at all. Either way only a regular file is read.
        """
        dst = self.target(rel)
        if not move:
            source_mode = readable_source(Path(src), within, display or str(src))
        dst.parent.mkdir(parents=True, exist_ok=True)
        algorithms = {e.algorithm for e in expected}
        if move:
            os.replace(src, dst)
            with open(dst, "rb") as fh:
                os.fsync(fh.fileno())
            digests = None
        else:
            # the digest is of the bytes written to the staged copy, so a source that changes
            # while it is read can never slip through
            try:
                digests = hashing.copy_digest(src, dst, algorithms)
            except OSError as exc:
                if out_of_space(exc):
                    raise CheckFailed(f"{dst}: no space left on device while storing {display or src}",
                                      hint=f"free space under {self.store.root}; nothing was stored") from None
                raise CheckFailed(f"{display or src}: cannot be read ({exc.strerror or exc})") from None
            # never wider than the source: a file only its owner could read stays so in the store
            os.chmod(dst, stat.S_IMODE(source_mode) & 0o644)
        return self.adopt(rel, expected=expected, expected_size=expected_size, display=display or str(src),
                          _digests=digests)

    def adopt(self, rel: str, *, expected: list[Expected] = (), expected_size: int | None = None,
              display: str | None = None, _digests: dict[str, str] | None = None) -> FileRecord:
        """Verify a file already written at ``rel`` in the staged tree."""
        dst = self.target(rel)
        algorithms = {e.algorithm for e in expected}
        digests = _digests if _digests is not None else hashing.digest_file(dst, algorithms)
        size = dst.stat().st_size
        try:
            check_expected(display or rel, digests, size, list(expected), expected_size)
        except CheckFailed:
            dst.unlink(missing_ok=True)
            raise
        record = FileRecord(path=rel, size=size, sha256=digests["sha256"], expected=list(expected))
        self.files[rel] = record
        return record

    def commit(self, *, revision: str | None, source: Source, absent: list[str] = (),
               notes: dict | None = None) -> EntryRecord:
        return self.store._commit(self, revision=revision, source=source, absent=list(absent), notes=notes or {})


@dataclass
class EntryCheck:
    name: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0


class Store:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    # -- layout -----------------------------------------------------------------------------
    @property
    def entries_dir(self) -> Path:
        return self.root / "entries"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs" / "sha256"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    def entry_dir(self, name: str) -> Path:
        e = parse(name)
        return self.entries_dir / e.kind / e.dirname

    def partial_path(self, name: str, rel: str) -> Path:
        e = parse(name)
        return self.root / "partial" / e.kind / e.dirname / (rel + ".part")

    def blob_path(self, sha256: str) -> Path:
        return self.blobs_dir / sha256[:2] / sha256

    # -- lookup -----------------------------------------------------------------------------
    def record(self, name: str) -> EntryRecord | None:
        path = self.entry_dir(name) / MANIFEST
        try:
            return EntryRecord.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckFailed(f"{path}: cannot be read ({exc.strerror or exc})",
                              hint=f"restore its permissions, or remove {path.parent} and fetch or import the entry again"
                              ) from None
        except (ValueError, RecursionError) as exc:
            raise CheckFailed(f"{path}: not a valid store manifest ({exc.__class__.__name__})",
                              hint=f"remove {path.parent} and fetch or import the entry again") from None

    def has(self, name: str) -> bool:
        """Present, with a readable manifest and every file at its recorded size (the cheap check)."""
        try:
            return self.check(name, deep=False).ok
        except CheckFailed:
            return False

    def records(self) -> list[EntryRecord]:
        """The readable entries; ``broken()`` lists the others."""
        return [rec for rec in self._scan().values() if isinstance(rec, EntryRecord)]

    def broken(self) -> dict[str, str]:
        """Entry folders whose record cannot be read: {folder relative to entries/: the one-line reason}."""
        return {k: v for k, v in self._scan().items() if isinstance(v, str)}

    def _scan(self) -> dict[str, EntryRecord | str]:
        out: dict[str, EntryRecord | str] = {}
        if not self.entries_dir.is_dir():
            return out
        for folder in sorted(p for p in self.entries_dir.glob("*/*") if p.is_dir() or p.is_symlink()):
            key = folder.relative_to(self.entries_dir).as_posix()
            manifest = folder / MANIFEST
            try:
                out[key] = EntryRecord.model_validate_json(manifest.read_bytes())
            except FileNotFoundError:
                out[key] = f"{manifest}: missing"
            except OSError as exc:
                out[key] = f"{manifest}: cannot be read ({exc.strerror or exc})"
            except (ValueError, RecursionError) as exc:
                out[key] = f"{manifest}: not a valid store manifest ({exc.__class__.__name__})"
        return out

    def root_of(self, name: str) -> Path:
        """The entry's files folder (a model directory, the release tree, a dataset's folder)."""
        if self.record(name) is None:
            raise RequirementsError(f"store entry {name} is missing from {self.root}",
                                    hint=fix_command(name))
        return self.entry_dir(name) / "files"

    def path_of(self, name: str) -> Path:
        """The path a consumer reads: the folder for models and releases; for datasets and benchmarks
        made of one file, that file (else the folder)."""
        root = self.root_of(name)
        rec = self.record(name)
        assert rec is not None
        if rec.kind in ("dataset", "benchmark", "paper") or (rec.kind == "local" and name.startswith("local:dataset/")):
            if len(rec.files) == 1:
                return root / rec.files[0].path
        return root

    def relpath_of(self, name: str) -> str:
        """``path_of`` relative to the store root (in a container: ``/store/<relpath>``)."""
        return self.path_of(name).relative_to(self.root).as_posix()

    # -- staging and commit -----------------------------------------------------------------
    @contextlib.contextmanager
    def staging(self, name: str) -> Iterator[Staging]:
        """A fresh staging folder inside the store (same filesystem, so the final rename is atomic);
        removed on the way out whatever happens."""
        entry = parse(name)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._clean_stale()
        path = self.tmp_dir / f"{entry.kind}-{uuid.uuid4().hex[:12]}"
        marker = path.with_name(path.name + ".lock")
        with open(marker, "w") as held:
            # held while staging: _clean_stale leaves folders alone whose marker is locked
            fcntl.flock(held, fcntl.LOCK_EX)
            (path / "files").mkdir(parents=True)
            try:
                yield Staging(self, entry, path)
            finally:
                shutil.rmtree(path, ignore_errors=True)
                marker.unlink(missing_ok=True)

    def _clean_stale(self) -> None:
        """Remove staging folders left by a process that was killed (their marker is no longer locked)."""
        for marker in self.tmp_dir.glob("*.lock"):
            try:
                with open(marker, "r+") as fh:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(marker.with_suffix(""), ignore_errors=True)
                    marker.unlink(missing_ok=True)
            except (BlockingIOError, FileNotFoundError):
                continue

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _commit(self, st: Staging, *, revision: str | None, source: Source, absent: list[str],
                notes: dict) -> EntryRecord:
        on_disk = {p.relative_to(st.files_dir).as_posix() for p in st.files_dir.rglob("*") if p.is_file()}
        unverified = on_disk - set(st.files)
        if unverified:
            raise CheckFailed(f"{sorted(unverified)[0]}: staged but never verified")  # pragma: no cover
        files = sorted(st.files.values(), key=lambda f: f.path)
        record = EntryRecord(
            name=st.entry.name, kind=st.entry.kind, pinned=st.entry.pinned, revision=revision, source=source,
            files=files, absent=sorted(absent), sha256set=sha256set({f.path: f.sha256 for f in files}),
            notes=notes, added_at=_now())
        with self._lock():
            for f in files:
                staged = st.files_dir / f.path
                blob = self.blob_path(f.sha256)
                # read-only, and never wider than the staged file (which kept its source's bits)
                mode = stat.S_IMODE(os.stat(staged).st_mode) & 0o444
                if self._blob_holds(blob, f):
                    # one copy of identical bytes; shared, it is as readable as its narrowest source
                    os.chmod(blob, stat.S_IMODE(os.stat(blob).st_mode) & mode)
                    staged.unlink()
                    os.link(blob, staged)
                else:
                    blob.parent.mkdir(parents=True, exist_ok=True)
                    os.chmod(staged, mode)
                    tmp_blob = blob.with_name(blob.name + f".{uuid.uuid4().hex[:8]}")
                    os.link(staged, tmp_blob)
                    os.replace(tmp_blob, blob)  # a blob that was not what its name says is replaced
            (st.path / MANIFEST).write_text(record.model_dump_json(indent=1) + "\n", encoding="utf-8")
            final = self.entry_dir(st.entry.name)
            final.parent.mkdir(parents=True, exist_ok=True)
            old = None
            if final.exists():
                old = self.tmp_dir / f"old-{uuid.uuid4().hex[:12]}"
                os.replace(final, old)
            os.replace(st.path, final)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        return record

    @staticmethod
    def _blob_holds(blob: Path, f: FileRecord) -> bool:
        """Whether the blob already there is a regular file with f's bytes: rehashed, since a blob
        can have been replaced (or made a link) after it was stored, and size alone proves nothing."""
        try:
            st = os.lstat(blob)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != f.size:
            return False
        try:
            return hashing.digest_file(blob, ())["sha256"] == f.sha256
        except OSError:
            return False

    def remove(self, name: str) -> None:
        with self._lock():
            path = self.entry_dir(name)
            if path.exists():
                trash = self.tmp_dir / f"old-{uuid.uuid4().hex[:12]}"
                self.tmp_dir.mkdir(parents=True, exist_ok=True)
                os.replace(path, trash)
                shutil.rmtree(trash, ignore_errors=True)

    # -- local, unpinned entries --------------------------------------------------------------
    def import_local(self, name: str, source: Path | str, *, notes: dict | None = None) -> EntryRecord:
        """Import a file or folder as an unpinned ``local:model/NAME`` or ``local:dataset/NAME`` entry.

        Its hashes are computed on import (there is no upstream pin to check them against) and
        the entry is marked unpinned. Importing again replaces the entry.
        """
        entry = parse(name)
        if entry.kind != "local":
            raise CheckFailed(f"{name}: import_local takes local:model/NAME or local:dataset/NAME")
        src = Path(source)
        if not src.exists():
            raise UsageError(f"{src}: no such file or folder", hint=f"cannot import {name}")
        with self.staging(name) as st:
            if not src.is_dir():  # a file (or a FIFO, a device: refused by name)
                st.add(src.name, src)
            else:
                for path in tree_files(src):
                    rel = path.relative_to(src).as_posix()
                    if rel.startswith(".cache/") or "/.git/" in f"/{rel}":
                        continue  # tool caches and VCS metadata are not part of the content
                    st.add(rel, path, within=src)
            if not st.files:
                raise CheckFailed(f"{src}: no files to import", hint=f"cannot import {name}")
            return st.commit(revision=None, source=Source(type="local", imported_from=str(src.resolve())),
                             notes=notes)

    # -- verification -------------------------------------------------------------------------
    def check(self, name: str, *, deep: bool = False, workers: int | None = None) -> EntryCheck:
        return self.verify([name], deep=deep, workers=workers)[0]

    def verify(self, names: list[str] | None = None, *, deep: bool = False, workers: int | None = None,
               on_file: Callable[[Path, str], None] | None = None) -> list[EntryCheck]:
        """Non-deep: manifest, presence and size of every file, no stray files. Deep: also rehash."""
        names_given = names
        if names is None:
            names = sorted(rec.name for rec in self.records())
        checks: list[EntryCheck] = []
        to_hash: dict[Path, tuple[EntryCheck, FileRecord]] = {}
        for name in names:
            try:
                rec = self.record(name)
            except CheckFailed as exc:
                checks.append(EntryCheck(name, False, [exc.line()]))
                continue
            if rec is None:
                checks.append(EntryCheck(name, False, ["missing"]))
                continue
            chk = EntryCheck(name, True, files=len(rec.files), bytes=rec.bytes)
            checks.append(chk)
            files_dir = self.entry_dir(name) / "files"
            listed = {f.path for f in rec.files}
            for f in rec.files:
                path = files_dir / f.path
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    chk.problems.append(f"{path}: missing")
                    continue
                # The store writes regular, read-only files: a link or a writable file was put there since.
                if not stat.S_ISREG(st.st_mode):
                    chk.problems.append(f"{path}: not a regular file (a link or a special file replaced it)")
                    continue
                if st.st_mode & 0o222:
                    chk.problems.append(f"{path}: writable (mode {stat.S_IMODE(st.st_mode):04o}); the store keeps "
                                        "its files read-only")
                size = st.st_size
                if size != f.size:
                    chk.problems.append(f"{path}: {size} bytes, manifest says {f.size}")
                    continue
                if deep:
                    to_hash[path] = (chk, f)
            if files_dir.is_dir():
                for p in files_dir.rglob("*"):
                    if (p.is_file() or p.is_symlink()) and p.relative_to(files_dir).as_posix() not in listed:
                        chk.problems.append(f"{p}: not in the manifest")
            if rec.sha256set != sha256set({f.path: f.sha256 for f in rec.files}):
                chk.problems.append(f"{self.entry_dir(name) / MANIFEST}: sha256set does not match its files")
        if to_hash:
            unreadable: dict[Path, OSError] = {}
            digests = hashing.sha256_files(list(to_hash), workers=workers, on_file=on_file, errors=unreadable)
            for path, exc in unreadable.items():
                to_hash[path][0].problems.append(f"{path}: cannot be read ({exc.strerror or exc})")
            for path, digest in digests.items():
                chk, f = to_hash[path]
                if digest != f.sha256:
                    chk.problems.append(f"{path}: sha256 {digest}, manifest says {f.sha256}")
        if names_given is None:
            checks += [EntryCheck(folder, False, [reason]) for folder, reason in self.broken().items()]
        for chk in checks:
            chk.ok = not chk.problems
        return checks



# -- the functions other parts of trace-tui call ---------------------------------------------------

def fix_command(name: str) -> str:
    """The command that provides a missing entry."""
    entry = parse(name)
    if entry.kind == "local":
        return f"trace-tui store import --local {entry.key} PATH"
    return f"trace-tui store fetch --entry {name} (offline: trace-tui store import DIR)"


def open_store(home: Path | str) -> Store:
    return Store(store_dir(Path(home)))


def store_status(home: Path | str, entry_names: list[str]) -> dict[str, bool]:
    """For each name: present with every file at its recorded size (no rehash; milliseconds)."""
    store = open_store(home)
    return {name: store.has(name) for name in entry_names}


def missing_entries(home: Path | str, entry_names: list[str]) -> list[tuple[str, str]]:
    """(name, command that provides it) for every entry the store lacks, in the order given."""
    status = store_status(home, entry_names)
    return [(name, fix_command(name)) for name in entry_names if not status[name]]

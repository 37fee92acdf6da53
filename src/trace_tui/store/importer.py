"""`trace-tui store import DIR`: the air-gapped path. Entries from a folder a user already has.

Recognised inside DIR (any combination):
- a copy or clone of the release repository (``rlvr/release_files.v1.json``; ``paper.pdf`` too);
- the TRACE dataset files (``data/validation/...parquet``, ``data/train/...``), e.g. a snapshot
  of ``maveryn/trace`` at dataset-v1, or the files alone anywhere below DIR;
- Hugging Face cache snapshots (``models--OWNER--NAME/snapshots/<commit>/``): each file is a
  link to a blob named by the hash the hub stated for it (LFS sha256, or the git blob id);
- a ``hf download --local-dir`` folder (``.cache/huggingface/download/*.metadata`` holds the
  commit and hash per file), when the entry is named with ``--entry``;
- benchmark evaluation files named as in the provenance matrix (checked against its md5);
- store entries exported by another store (``manifest.json`` + ``files/``), as in a bundle.

Every file is checked the way a fetch checks it; an entry with one bad file is refused whole.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from trace_tui.common.digest import sha256set
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.release import release_lock
from trace_tui.store import names as N
from trace_tui.store import sources as S
from trace_tui.store.manifest import EntryRecord, Expected, Source
from trace_tui.store.store import Staging, Store, readable_source, tree_files
from trace_tui.store.trust import SIGNED_BY, is_hub_stated, published_sets

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
Report = Callable[[str], None]


@dataclass
class ImportResult:
    imported: list[EntryRecord] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (entry name, reason naming the file)

    def add(self, fn: Callable[[], EntryRecord], name: str) -> None:
        try:
            self.imported.append(fn())
        except CheckFailed as exc:
            self.refused.append((name, exc.line()))


def _expected_from_etag(etag: str, what: str) -> Expected:
    if _HEX64.match(etag):
        return Expected(algorithm="sha256", value=etag, source=f"hub metadata (LFS sha256) in {what}")
    if _HEX40.match(etag):
        return Expected(algorithm="git-sha1", value=etag, source=f"hub metadata (git blob id) in {what}")
    raise CheckFailed(f"{what}: {etag!r} is not a hub file hash")


# -- release ----------------------------------------------------------------------------------

def import_release(store: Store, lock: "ReleaseLock", root: Path) -> EntryRecord:
    """``root`` holds ``rlvr/`` (a clone of the repository or a copy of its files)."""
    manifest_path = root / S.RELEASE_MANIFEST
    if not manifest_path.is_file():
        raise CheckFailed(f"{root}: no {S.RELEASE_MANIFEST}", hint="not a copy of the release repository")
    data = manifest_path.read_bytes()
    S.check_release_manifest(lock, data, str(manifest_path))
    plan = S.release_plan(lock, data)
    name = plan.name
    absent = []
    with store.staging(name) as st:
        for spec in plan.files:
            src = root / spec.path
            if not src.is_file():
                if spec.required:
                    raise CheckFailed(f"{src}: missing, and the appliance reads it",
                                      hint="copy the whole rlvr/ folder of the release at the pinned commit")
                absent.append(spec.path)
                continue
            st.add(spec.path, src, expected=list(spec.expected), display=str(src), within=root)
        return st.commit(revision=lock.upstream.commit,
                         source=Source(type="import", repo_id=lock.upstream.repository,
                                       revision=lock.upstream.commit, imported_from=str(root.resolve())),
                         absent=absent, notes=plan.notes)


def import_paper(store: Store, lock: "ReleaseLock", path: Path, within: Path | None = None) -> EntryRecord:
    plan = S.paper_plan(lock)
    spec = plan.files[0]
    with store.staging(plan.name) as st:
        st.add(spec.path, path, expected=list(spec.expected), display=str(path), within=within)
        return st.commit(revision=None, source=Source(type="import", repo_id=lock.upstream.repository,
                                                      imported_from=str(path.resolve())), notes=plan.notes)


# -- dataset ----------------------------------------------------------------------------------

def _find(root: Path, rel: str) -> Path | None:
    direct = root / rel
    if direct.is_file():
        return direct
    base = Path(rel).name
    for cand in root.rglob(base):
        if cand.is_file():
            return cand
    return None


def dataset_plan_checked(store: Store, lock: "ReleaseLock", split: str) -> S.EntryPlan:
    """The split's plan; when the store holds the (verified) release, the lock's dataset hashes are
    also checked against the equivalence receipt itself, file by file."""
    plan = S.dataset_plan(lock, split)
    release = N.release_entry(lock)
    if store.record(release) is None:
        plan.notes["equivalence_receipt_checked"] = False
        return plan
    receipt_path = store.root_of(release) / lock.dataset.equivalence_receipt
    current = S.equivalence_current(receipt_path.read_bytes())
    for spec in plan.files:
        want = current.get(spec.path)
        if want is None or want != spec.expected[0].value:
            raise CheckFailed(f"{receipt_path}: states {want} for {spec.path}, the release lock "
                              f"{spec.expected[0].value}", hint="the lock and the release disagree; nothing was stored")
    plan.notes["equivalence_receipt_checked"] = True
    return plan


def import_dataset(store: Store, lock: "ReleaseLock", root: Path, split: str) -> EntryRecord:
    plan = dataset_plan_checked(store, lock, split)
    with store.staging(plan.name) as st:
        for spec in plan.files:
            src = _find(root, spec.path)
            if src is None:
                raise CheckFailed(f"{root / spec.path}: missing", hint=f"{plan.name} needs every file of the split")
            try:
                st.add(spec.path, src, expected=list(spec.expected), expected_size=spec.size, display=str(src),
                       within=root)
            except CheckFailed as exc:
                hist = plan.notes["historical_sha256"].get(spec.path)
                if hist and f"sha256 {hist} " in exc.message:
                    raise CheckFailed(exc.message, hint=(
                        f"this is the file at the historical revision {lock.dataset.historical_revision}; "
                        f"the store holds {lock.dataset.tag} ({lock.dataset.revision})")) from None
                raise
        return st.commit(revision=lock.dataset.revision,
                         source=Source(type="import", repo_id=lock.dataset.repo_id, repo_type="dataset",
                                       revision=lock.dataset.revision, imported_from=str(root.resolve())),
                         notes=plan.notes)


# -- Hugging Face snapshots ------------------------------------------------------------------

@dataclass
class Snapshot:
    repo_type: str
    repo_id: str
    revision: str
    path: Path


def find_snapshots(root: Path) -> list[Snapshot]:
    """Hugging Face cache snapshots at or below ``root`` (a hub cache, a repo folder, or one snapshot)."""
    out = []
    cands: list[Path] = []
    if root.parent.name == "snapshots":
        cands = [root]
    elif (root / "snapshots").is_dir():
        cands = sorted((root / "snapshots").iterdir())
    else:
        cands = sorted(root.glob("*--*--*/snapshots/*")) + sorted(root.glob("hub/*--*--*/snapshots/*"))
    for snap in cands:
        repo_dir = snap.parent.parent.name
        kind, _, rest = repo_dir.partition("--")
        if kind not in ("models", "datasets") or not _HEX40.match(snap.name):
            continue
        out.append(Snapshot(kind[:-1], rest.replace("--", "/"), snap.name, snap))
    return out


def import_snapshot(store: Store, name: str, snap: Snapshot, published: set[str] = frozenset()) -> EntryRecord:
    """A hub cache snapshot: each file links to ``blobs/<etag>``, the hash the hub stated at download.

    ``published``: the sha256sets the release lock publishes for this repo@revision; when there
    are any, the snapshot must be one of them (see _check_published_set).
    """
    entry = N.parse(name)
    if snap.revision != entry.revision:
        raise CheckFailed(f"{snap.path}: revision {snap.revision}, the pin is {entry.revision}")
    with store.staging(name) as st:
        for link in tree_files(snap.path):
            rel = link.relative_to(snap.path).as_posix()
            if not link.is_symlink():
                raise CheckFailed(f"{link}: not a link to a hub blob, so nothing states its hash",
                                  hint="import the hub cache folder as downloaded, or fetch the entry")
            blob = Path(os.path.realpath(link))
            # the hub cache's own blobs/ (beside snapshots/), never a link out of the cache: checked
            # first, so a link to /etc/shadow is refused as the link it is
            cache = snap.path.parent.parent
            readable_source(link, cache, str(link))
            exp = _expected_from_etag(blob.name, f"{link} (a link to {blob})")
            st.add(rel, blob, expected=[exp], display=str(link), within=cache)
        _check_weight_index(st.files_dir, snap.path)
        _check_published_set(st, published, str(snap.path))
        return st.commit(revision=snap.revision,
                         source=Source(type="import", repo_id=snap.repo_id, repo_type=snap.repo_type,
                                       revision=snap.revision, imported_from=str(snap.path)),
                         notes={"verified_against": "hub metadata recorded in the Hugging Face cache (blob names)"})


def import_local_dir(store: Store, name: str, root: Path, published: set[str] = frozenset()) -> EntryRecord:
    """A ``--local-dir`` download: ``.cache/huggingface/download/<file>.metadata`` = commit, etag, time.

    ``published`` as for import_snapshot.
    """
    entry = N.parse(name)
    meta_root = root / ".cache" / "huggingface" / "download"
    if not meta_root.is_dir():
        raise CheckFailed(f"{root}: no .cache/huggingface/download metadata, so nothing states the files' hashes",
                          hint="fetch the entry, or import a Hugging Face cache snapshot")
    with store.staging(name) as st:
        for path in tree_files(root):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(".cache/"):
                continue
            meta = meta_root / (rel + ".metadata")
            if not meta.is_file():
                raise CheckFailed(f"{path}: no download metadata ({meta})", hint="not downloaded from the hub")
            lines = meta.read_text(encoding="utf-8").splitlines()
            if len(lines) < 2 or lines[0].strip() != entry.revision:
                got = lines[0].strip() if lines else "nothing"
                raise CheckFailed(f"{path}: downloaded at revision {got}, the pin is {entry.revision}")
            st.add(rel, path, expected=[_expected_from_etag(lines[1].strip(), str(meta))], display=str(path),
                   within=root)
        _check_weight_index(st.files_dir, root)
        _check_published_set(st, published, str(root))
        return st.commit(revision=entry.revision,
                         source=Source(type="import", repo_id=entry.repo_id,
                                       repo_type="dataset" if entry.kind == "dataset" else "model",
                                       revision=entry.revision, imported_from=str(root.resolve())),
                         notes={"verified_against": "hub metadata recorded by the download (.cache/huggingface)"})


def _check_published_set(st: "Staging", published: set[str], src: str) -> None:
    """A cache's hashes are the cache's own say (a blob is named by whoever wrote it): where the
    release lock publishes sha256sets for the model, only a snapshot that is one of them is the model."""
    if not published:
        return
    got = sha256set({f.path: f.sha256 for f in st.files.values()})
    if got not in published:
        raise CheckFailed(f"{src}: its files have sha256set {got}, which the release lock does not publish for "
                          f"{st.entry.name} ({', '.join(sorted(published))})",
                          hint=f"fetch it from the hub (`trace-tui store fetch --entry {st.entry.name}`), "
                               "whose metadata is checked over HTTPS; nothing was stored")


def _check_weight_index(files_dir: Path, src: Path) -> None:
    """A snapshot missing a weight shard its index names is not the model it claims to be."""
    import json

    for index in files_dir.glob("*.safetensors.index.json"):
        shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
        for shard in sorted(shards):
            if not (files_dir / shard).is_file():
                raise CheckFailed(f"{src / shard}: missing (named by {index.name})", hint="an incomplete snapshot")


# -- store entries from another store (bundles) ---------------------------------------------

def import_entry_dir(store: Store, entry_dir: Path, lock: "ReleaseLock | None" = None,
                     signed_by: str | None = None) -> EntryRecord:
    """An entry folder from another store (a bundle, or a store copied over).

    A pinned entry is checked against the release lock, never against the record it arrives with
    (a bundle can carry any record): release, paper and dataset files through the lock's hash
    chain, benchmarks against the provenance matrix of the verified release in this store, models
    against the sha256sets the lock publishes for that repo@revision. A pinned model the lock publishes
    no hashes for, or a benchmark the provenance matrix pins only by a hub dataset revision (no md5),
    enters only hub-stated (trust.py): its record carries the hub's hash of every file, each checked
    again here, and the folder came in a bundle whose signature verified against a key this site trusts
    (SIGNED_BY, its keyid). Any other pinned entry the lock cannot vouch for is refused.
    Unpinned (local:) entries are checked against their record, and the record's sha256set is compared
    in staging: nothing that fails enters the store.
    """
    if lock is None:
        lock = release_lock()
    manifest = entry_dir / "manifest.json"
    files = entry_dir / "files"
    for path in (entry_dir, manifest, files):
        if path.is_symlink():  # the entry must be in the folder given, not wherever a link points
            raise CheckFailed(f"{path}: a symbolic link; an entry folder is read only as it lies in the folder given",
                              hint="copy the entry itself into the bundle or folder")
    try:
        rec = EntryRecord.model_validate_json(manifest.read_bytes())
        e = N.parse(rec.name)
    except (OSError, ValueError, RecursionError, UsageError) as exc:
        raise CheckFailed(f"{manifest}: not a readable store manifest ({type(exc).__name__})") from None
    # Pinned or not, and what kind, is the name's to say: the record's own `pinned` and `kind`
    # fields are the sender's claims, and the entry is committed under its name.
    if e.pinned:
        if rec.name not in N.pinned_entries(lock):
            raise CheckFailed(f"{manifest}: {rec.name} is not pinned by this release lock, so nothing can vouch "
                              "for its files", hint="fetch it, or import it as a local: entry")
        if e.kind == "release":
            return import_release(store, lock, files)
        if e.kind == "paper":
            return import_paper(store, lock, files / lock.published_hash("paper").path, files)
        if e.kind == "dataset":
            return import_dataset(store, lock, files, e.split or "")
        if e.kind == "benchmark":
            src = _bundled_benchmark_source(store, lock, rec, manifest)
            if src.md5:
                return import_benchmark(store, src, files / src.filename, files)
            _check_hub_benchmark(rec, src, manifest, signed_by)
            rec = rec.model_copy(update={"notes": {**rec.notes, SIGNED_BY: signed_by}})
        if e.kind == "model":
            published = published_sets(lock, e.repo_id or "", e.revision or "")
            hub_stated = signed_by is not None and not published and is_hub_stated(rec)
            if rec.sha256set not in published and not hub_stated:
                raise CheckFailed(f"{manifest}: {rec.name} has sha256set {rec.sha256set}, which the release lock does "
                                  f"not publish for it ({', '.join(sorted(published)) or 'it publishes none'})"
                                  + _why_not_hub_stated(rec, signed_by, published),
                                  hint=f"fetch it (`trace-tui store fetch --entry {rec.name}`), or carry it in a bundle "
                                       "signed by a key this site trusts")
            if hub_stated:
                rec = rec.model_copy(update={"notes": {**rec.notes, SIGNED_BY: signed_by}})
    with store.staging(rec.name) as st:
        for f in rec.files:
            # the hub's own hashes, where the record carries them, are checked again here
            exp = [Expected(algorithm="sha256", value=f.sha256, source=str(manifest)),
                   *(x for x in f.expected if x.source.startswith("hub metadata"))]
            st.add(f.path, files / f.path, expected=exp, expected_size=f.size, display=str(files / f.path),
                   within=files)
        staged = sha256set({f.path: f.sha256 for f in st.files.values()})
        if staged != rec.sha256set:
            raise CheckFailed(f"{manifest}: sha256set {rec.sha256set} does not match its files ({staged})",
                              hint="nothing was stored")
        src = rec.source.model_copy(update={"imported_from": str(entry_dir.resolve())})
        return st.commit(revision=rec.revision, source=src, absent=rec.absent, notes=rec.notes)


def _model_sets(lock: "ReleaseLock", name: str) -> set[str]:
    e = N.parse(name)
    return published_sets(lock, e.repo_id or "", e.revision or "") if e.kind == "model" else set()


def _why_not_hub_stated(rec: EntryRecord, signed_by: str | None, published: set[str]) -> str:
    if published:
        return ""
    what = "a benchmark the provenance matrix states no file hash for" if N.parse(rec.name).kind == "benchmark" else \
        "a model whose hashes the release does not publish"
    if signed_by is None:
        return f"; {what} enters a site hub-stated, only from a bundle signed by a key the site trusts, and this " \
               "folder is not one"
    return "; its record does not carry the hub's hash of every file (it was not fetched from the hub), so nothing " \
           "but its own files vouches for them"


def _bundled_benchmark_source(store: Store, lock: "ReleaseLock", rec: EntryRecord, manifest: Path) -> S.BenchmarkSource:
    """Where the provenance matrix of the verified release in this store says the benchmark comes from."""
    src = S.benchmark_sources(provenance_bytes(store, lock)).get(N.parse(rec.name).key or "")
    if src is None:
        raise CheckFailed(f"{manifest}: {rec.name} is not in the provenance matrix {S.PROVENANCE}",
                          hint="export the bundle again from a store that holds this release")
    return src


def _check_hub_benchmark(rec: EntryRecord, src: S.BenchmarkSource, manifest: Path, signed_by: str | None) -> None:
    """A benchmark the provenance matrix pins by a hub dataset revision and no file hash: its record is the
    matrix's repository at its revision (the whole snapshot, or the one file it names), every file with the
    hash the hub stated, carried in a verified bundle (the hashes are checked again in staging)."""
    fix = f"fetch it (`trace-tui store fetch --entry {rec.name}`), or carry it in a bundle signed by a key this " \
          "site trusts"
    if src.kind == "url":
        raise CheckFailed(f"{manifest}: the provenance matrix states no file hash for {rec.name} and names no hub "
                          "revision, so nothing can vouch for its file", hint=f"fetch it: trace-tui store fetch --entry "
                                                                               f"{rec.name}")
    pinned_at = f"{src.repo_id}@{src.revision}"
    claimed = f"{rec.source.repo_id}@{rec.revision}"
    if claimed != pinned_at or rec.source.repo_type != "dataset":
        raise CheckFailed(f"{manifest}: {rec.name} records {rec.source.repo_type or 'no'} repository {claimed}, the "
                          f"provenance matrix pins the dataset {pinned_at}", hint=fix)
    if src.kind == "hf-file" and [f.path for f in rec.files] != [src.filename]:
        raise CheckFailed(f"{manifest}: {rec.name} holds {', '.join(f.path for f in rec.files) or 'no file'}, the "
                          f"provenance matrix names the one file {src.path} ({src.filename})", hint=fix)
    if signed_by is None or not is_hub_stated(rec):
        raise CheckFailed(f"{manifest}: {rec.name}: the provenance matrix states no file hash for it"
                          + _why_not_hub_stated(rec, signed_by, set()), hint=fix)


# -- benchmarks -------------------------------------------------------------------------------

def provenance_bytes(store: Store, lock: "ReleaseLock") -> bytes:
    """The provenance matrix from the store's (verified) release entry."""
    name = N.release_entry(lock)
    rec = store.record(name)
    if rec is None:
        raise CheckFailed(f"{name} is not in the store, and benchmark files are checked against its "
                          f"provenance matrix", hint="import or fetch the release first")
    return (store.root_of(name) / S.PROVENANCE).read_bytes()


def import_benchmark(store: Store, src: S.BenchmarkSource, path: Path, within: Path | None = None) -> EntryRecord:
    name = N.benchmark_entry(src.key)
    with store.staging(name) as st:
        st.add(src.filename, path, expected=list(src.expected()), display=str(path), within=within)
        notes = {} if src.md5 else {"checksum": "the provenance matrix publishes none; sha256 computed on import"}
        return st.commit(revision=src.revision,
                         source=Source(type="import", url=src.url, repo_id=src.repo_id,
                                       repo_type="dataset" if src.repo_id else None, revision=src.revision,
                                       imported_from=str(path.resolve())), notes=notes)


# -- the command ----------------------------------------------------------------------------

def _linked_part(root: Path, path: Path) -> Path | None:
    """The first symbolic link on the way from ``root`` down to ``path`` (itself included), if any."""
    at = root
    for part in path.relative_to(root).parts:
        at = at / part
        if at.is_symlink():
            return at
    return None


def _is_bundle_manifest(path: Path) -> bool:
    import json

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("schema_version") == "trace-tui-bundle-v1"


def import_dir(store: Store, lock: "ReleaseLock", root: Path, *, only: list[str] | None = None,
               report: Report = lambda _line: None) -> ImportResult:
    """Import every entry recognised in ``root`` (or only the named ones)."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    want = set(only) if only else None
    pinned = set(N.pinned_entries(lock))
    for name in want or ():
        N.parse(name)
    result = ImportResult()

    def wanted(name: str) -> bool:
        return want is None or name in want

    # A store entry folder (bundle) or a folder of them.
    # one entry folder; a store root (entries/...); a bundle (store/...); a store's entries/ folder
    manifests = [m for pattern in ("manifest.json", "entries/*/*/manifest.json", "store/*/*/manifest.json",
                                   "*/*/manifest.json") for m in root.glob(pattern)]
    for manifest in sorted(set(manifests)):
        link = _linked_part(root, manifest)
        if link is not None:
            result.refused.append((str(manifest), f"{link}: a symbolic link; entries are read only from inside "
                                                  f"{root}, never through a link"))
            continue
        if manifest.parent == root and _is_bundle_manifest(manifest):
            report(f"{root} is a bundle: importing its store entries (`trace-tui bundle import {root}` also "
                   "loads its images)")
            continue
        try:
            rec_name = EntryRecord.model_validate_json(manifest.read_bytes()).name
        except (OSError, ValueError, RecursionError):
            result.refused.append((str(manifest), f"{manifest}: not a store manifest"))
            continue
        if wanted(rec_name):
            report(f"importing {rec_name} from {manifest.parent}")
            result.add(lambda m=manifest: import_entry_dir(store, m.parent, lock), rec_name)

    release_root = root if (root / S.RELEASE_MANIFEST).is_file() else (
        root.parent if root.name == "rlvr" and (root / "release_files.v1.json").is_file() else None)
    if release_root is not None and wanted(N.release_entry(lock)):
        report(f"importing {N.release_entry(lock)} from {release_root}")
        result.add(lambda: import_release(store, lock, release_root), N.release_entry(lock))
    paper = lock.published_hash("paper").path
    if (root / paper).is_file() and wanted(N.paper_entry(lock)):
        result.add(lambda: import_paper(store, lock, root / paper, root), N.paper_entry(lock))

    for split in ("validation", "train"):
        name = N.dataset_entry(lock, split)
        if not wanted(name):
            continue
        present = [f for f in lock.dataset.file(split) if _find(root, f.path) is not None]
        if present or (want and name in want):
            report(f"importing {name} from {root}")
            result.add(lambda s=split: import_dataset(store, lock, root, s), name)

    for snap in find_snapshots(root):
        if snap.repo_type != "model":
            continue
        name = N.model_entry(snap.repo_id, snap.revision)
        if want is None and name not in pinned:
            report(f"skipping {snap.path}: {name} is not pinned by the release (name it with --entry to import it)")
            continue
        if wanted(name):
            report(f"importing {name} from {snap.path}")
            result.add(lambda n=name, s=snap: import_snapshot(store, n, s, _model_sets(lock, n)), name)

    if want:
        handled = {r.name for r in result.imported} | {n for n, _ in result.refused}
        for name in sorted(want - handled):
            e = N.parse(name)
            if e.kind == "model" and (root / ".cache" / "huggingface" / "download").is_dir():
                report(f"importing {name} from {root} (a --local-dir download)")
                result.add(lambda n=name: import_local_dir(store, n, root, _model_sets(lock, n)), name)

    # Benchmarks last: they are checked against the release entry imported above.
    bench_files = {p.name: p for p in root.rglob("*.tsv")} if any(root.rglob("*.tsv")) else {}
    if bench_files:
        try:
            srcs = S.benchmark_sources(provenance_bytes(store, lock))
        except CheckFailed as exc:
            result.refused.append(("benchmarks", exc.line()))
            srcs = {}
        for key, src in srcs.items():
            name = N.benchmark_entry(key)
            if src.kind != "hf-repo" and src.filename in bench_files and wanted(name):
                report(f"importing {name} from {bench_files[src.filename]}")
                result.add(lambda s=src: import_benchmark(store, s, bench_files[s.filename], root), name)

    if want:
        handled = {r.name for r in result.imported} | {n for n, _ in result.refused}
        for name in sorted(want - handled):
            result.refused.append((name, f"{root}: holds nothing recognisable as {name}"))
    return result

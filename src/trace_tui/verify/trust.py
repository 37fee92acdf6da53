"""The release's trust chain (SPEC §4): release lock -> published hashes -> declared hashes -> files.

The release lock pins the published hashes and the hash of ``rlvr/release_files.v1.json``.
A file whose bytes match a trusted hash is *intact*; the hashes an intact file declares
(the release files manifest, the receipts, the provenance and source maps, the configs)
become trusted in turn, breadth first, so the hash closest to the lock wins. Every
declaration is then checked against the actual bytes, and a mismatch is blamed on the file
whose bytes differ from a trusted hash: the target when the target differs from its trusted
hash, otherwise the declaring file (a receipt that states a wrong hash for an intact file
fails itself, not the file).
"""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.common.digest import sha256_bytes
from trace_tui.common.safe_read import MAX_DOCUMENT_BYTES, Folder, NotRead
from trace_tui.verify import documents as d
from trace_tui.verify.checklist import Check
from trace_tui.verify.yaml_docs import TOO_DEEP, BackgroundParse, is_yaml, parse as parse_yaml

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from trace_tui.release import ReleaseLock

LOCK = "release lock"
NOT_READ = "not read"  # a check's "actual" for a file that is there but was not read: never a hash of other bytes

# Documents (paths from the repository root) that the checks read. The lock names
# the results, suites and configs; the rest are fixed names of this release layout.
RELEASE_FILES = "rlvr/release_files.v1.json"
RELEASE_RECEIPTS = "rlvr/evaluation/trace_eval/release_receipts.v1.json"
PROVENANCE = "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json"
VALIDATION_RECEIPT = "rlvr/evaluation/trace_validation/release_receipt.v1.json"
SOURCE_MAP = "rlvr/source_map.v1.json"


class Declaration(namedtuple("Declaration", "declarer location target sha256")):
    """declarer: a path, or LOCK; location: where inside the declarer, e.g. "files[3].sha256"; target: a
    path from the repository root; sha256: the hash it states (all str)."""

    __slots__ = ()


class Trust(namedtuple("Trust", "sha256 decl depth")):
    """sha256 (str), the Declaration it came from, its depth from the lock (int)."""

    __slots__ = ()


def _short(h: str | None) -> str:
    return h if h is None else h[:12] + "…"


def source_of(decl: Declaration) -> str:
    return LOCK if decl.declarer == LOCK else f"{decl.declarer} {decl.location}"


class ReleaseFiles:
    """Reads each file once; parses each document once; remembers what went wrong.

    A file is read only when it is a regular file whose real path lies inside the release
    directory (``common.safe_read``); a document (JSON or YAML) only up to MAX_DOCUMENT_BYTES.
    Anything else is present but not read: ``unreadable`` says why, and it fails every check on it.
    """

    def __init__(self, root: Path, yaml_ahead: BackgroundParse | None = None) -> None:
        self.root = root
        self._folder = Folder(root, "the release directory")
        self._bytes: dict[str, bytes | None] = {}  # a document's bytes; None when absent or not read
        self._sha: dict[str, str | None] = {}  # each file is asked for its hash by several checks
        self._raw: dict[str, tuple[Any, str | None]] = {}
        self._docs: dict[tuple[str, type], tuple[Any, str | None]] = {}
        self.unreadable: dict[str, str] = {}  # present, not read: path -> why
        self._yaml = yaml_ahead  # the YAML documents, being parsed in the background (yaml_docs)

    def data(self, path: str) -> bytes | None:
        """The bytes of the document at ``path``; None when it is absent or not read (see ``unreadable``)."""
        if path not in self._bytes:
            try:
                self._bytes[path] = self._folder.read(path, MAX_DOCUMENT_BYTES)
            except NotRead as exc:
                self._bytes[path] = None
                self.unreadable[path] = exc.reason
        return self._bytes[path]

    def present(self, path: str) -> bool:
        return self.sha(path) is not None or path in self.unreadable

    def sha(self, path: str) -> str | None:
        """The file's sha256; None when it is absent or not read (see ``unreadable``)."""
        if path not in self._sha:
            if is_document(path):  # read whole: the same bytes are parsed
                b = self.data(path)
                self._sha[path] = None if b is None else sha256_bytes(b)
            else:  # the paper, code: hashed as they are read, whatever their size
                try:
                    self._sha[path] = self._folder.sha256(path)
                except NotRead as exc:
                    self._sha[path] = None
                    self.unreadable[path] = exc.reason
        return self._sha[path]

    def raw(self, path: str) -> tuple[Any, str | None]:
        """(parsed value, error line); error when the file is not valid JSON/YAML."""
        if path not in self._raw:
            data = self.data(path)
            if data is None:
                self._raw[path] = (None, self.unreadable.get(path, "absent"))
            elif is_yaml(path):
                self._raw[path] = self._yaml.take(path, data) if self._yaml else parse_yaml(data)
            else:
                try:
                    self._raw[path] = (json.loads(data), None)
                except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                    self._raw[path] = (None, f"not valid JSON: {exc}")
                except RecursionError:  # this file fails; the others are still verified
                    self._raw[path] = (None, TOO_DEEP)
        return self._raw[path]

    def doc(self, path: str, schema: type) -> tuple[Any, str | None]:
        key = (path, schema)
        if key not in self._docs:
            value, err = self.raw(path)
            if err is not None:
                self._docs[key] = (None, err)
            elif not isinstance(value, dict):
                self._docs[key] = (None, f"schema: expected an object at the top level, found {type(value).__name__}")
            else:
                try:
                    self._docs[key] = (schema.model_validate(value), None)
                except d.SchemaError as exc:
                    self._docs[key] = (None, f"schema: {exc.line()}")
                except RecursionError:
                    self._docs[key] = (None, TOO_DEEP)
        return self._docs[key]


def is_document(path: str) -> bool:
    """A JSON or YAML file: read whole (up to MAX_DOCUMENT_BYTES), since its bytes may be parsed too."""
    return path.endswith((".json", ".yaml", ".yml"))


def _safe_relpath(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return not path.startswith("/") and all(x not in ("", ".", "..") for x in parts) \
        and ":" not in parts[0] and "\x00" not in path


def _rlvr(path: str) -> str:
    return path if path.startswith("rlvr/") else f"rlvr/{path}"


class Declarer(namedtuple("Declarer", "path schema extract")):
    """path (str), schema (a documents.Doc class), extract: doc -> [(location, target, sha256)]."""

    __slots__ = ()


def declarers(lock: ReleaseLock) -> list[Declarer]:
    tv, te = lock.trace_validation, lock.trace_eval
    configs = list(lock.training.configs.values())

    def release_files(doc: d.ReleaseFilesDoc):
        out = [(f"files[{i}].sha256", _rlvr(f.path), f.sha256) for i, f in enumerate(doc.files)]
        out += [
            ("canonical_evaluation.results_sha256", te.results_path, doc.canonical_evaluation.results_sha256),
            ("canonical_evaluation.source_map_sha256", SOURCE_MAP, doc.canonical_evaluation.source_map_sha256),
            ("canonical_trace_validation.results_sha256", tv.results_path, doc.canonical_trace_validation.results_sha256),
            ("canonical_trace_validation.suite_sha256", tv.suite_path, doc.canonical_trace_validation.suite_sha256),
            ("dataset_release.equivalence_receipt.sha256", doc.dataset_release.equivalence_receipt.path,
             doc.dataset_release.equivalence_receipt.sha256),
        ]
        return out

    def receipts(doc: d.ReleaseReceiptsDoc):
        out = [(f"canonical_files[{i}].sha256", f.path, f.sha256) for i, f in enumerate(doc.canonical_files)]
        env = doc.evaluation_environment
        out.append(("evaluation_environment.requirements_sha256", env.requirements_path, env.requirements_sha256))
        return out

    def validation_receipt(doc: d.ValidationReceiptDoc):
        pr = doc.public_release
        return [("public_release.suite_sha256", pr.suite_path, pr.suite_sha256),
                ("public_release.results_sha256", pr.results_path, pr.results_sha256)]

    def validation_suite(doc: d.ValidationSuiteDoc):
        return [("prompt.system_prompt_sha256", doc.prompt.system_prompt_file, doc.prompt.system_prompt_sha256)]

    def config(doc: d.TrainingConfigDoc):
        r = doc.release
        return [("release.prompt.sha256", r.prompt.path, r.prompt.sha256),
                ("release.dataset.equivalence_receipt_sha256", r.dataset.equivalence_receipt_path,
                 r.dataset.equivalence_receipt_sha256)]

    def results(doc: d.ResultsDoc):
        # results.json names its suite by the producer tree's path (relative to rlvr/).
        return [("suite.suite_sha256", _rlvr(doc.suite.suite_path), doc.suite.suite_sha256)]

    def source_map(doc: d.SourceMapDoc):
        # An exact copy's source hash is the destination's hash; adaptations hash another file.
        out = [(f"files[{i}].source_sha256", f.destination_path, f.source_sha256)
               for i, f in enumerate(doc.files) if f.review_status == "approved_exact_copy"]
        ri = doc.release_inputs
        out += [
            ("release_inputs.answer_prompt_sha256", tv.system_prompt_file, ri.answer_prompt_sha256),
            ("release_inputs.trace_dataset.equivalence_receipt.sha256", ri.trace_dataset.equivalence_receipt.path,
             ri.trace_dataset.equivalence_receipt.sha256),
            ("release_inputs.trace_validation.results_sha256", tv.results_path, ri.trace_validation.results_sha256),
            ("release_inputs.trace_validation.suite_sha256", tv.suite_path, ri.trace_validation.suite_sha256),
            ("release_inputs.training_contract.dataset_equivalence_receipt_sha256", lock.dataset.equivalence_receipt,
             ri.training_contract.dataset_equivalence_receipt_sha256),
        ]
        return out

    return [
        Declarer(RELEASE_FILES, d.ReleaseFilesDoc, release_files),
        Declarer(te.results_path, d.ResultsDoc, results),
        Declarer(RELEASE_RECEIPTS, d.ReleaseReceiptsDoc, receipts),
        Declarer(VALIDATION_RECEIPT, d.ValidationReceiptDoc, validation_receipt),
        Declarer(tv.suite_path, d.ValidationSuiteDoc, validation_suite),
        *[Declarer(c, d.TrainingConfigDoc, config) for c in configs],
        Declarer(SOURCE_MAP, d.SourceMapDoc, source_map),
    ]


def needed_documents(lock: ReleaseLock) -> dict[str, type]:
    """The files the checks need (results, suites, receipts, provenance, configs) and their schemas.

    Without one of these a check cannot run, so its absence fails verification
    even without --strict. The paper, code files and other receipts are verified
    when present and reported absent otherwise.
    """
    tv, te = lock.trace_validation, lock.trace_eval
    out: dict[str, type] = {
        te.results_path: d.ResultsDoc,
        te.suite_path: d.EvalSuiteDoc,
        PROVENANCE: d.ProvenanceDoc,
        RELEASE_FILES: d.ReleaseFilesDoc,
        RELEASE_RECEIPTS: d.ReleaseReceiptsDoc,
        tv.suite_path: d.ValidationSuiteDoc,
        tv.results_path: d.ValidationResultsDoc,
        VALIDATION_RECEIPT: d.ValidationReceiptDoc,
        lock.dataset.equivalence_receipt: d.AnyObject,
    }
    for c in lock.training.configs.values():
        out[c] = d.TrainingConfigDoc
    return out


class TrustChain:
    """The hash chain from the release lock to every file, and its checks (lock, declared).

    ``collect`` reads each declarer's hash declarations, ``propagate`` walks them breadth
    first from the lock's published hashes, and the checks record in ``hash_failed`` the
    files whose bytes differ from a trusted hash (the content checks blame those first).
    """

    def __init__(self, root: Path, lock: ReleaseLock, yaml_ahead: BackgroundParse | None = None) -> None:
        self.declarers = declarers(lock)
        if yaml_ahead is None:
            yaml_ahead = BackgroundParse(root, [dec.path for dec in self.declarers if is_yaml(dec.path)])
        self.rel = ReleaseFiles(root, yaml_ahead)
        self.lock = lock
        self.checks: list[Check] = []
        self.needed = needed_documents(lock)
        self.trusted: dict[str, Trust] = {}
        self.decls: dict[str, list[Declaration]] = {}  # declarer -> its declarations (when readable)
        self.hash_failed: set[str] = set()
        self.bad_paths: list[Declaration] = []

    # ---- the chain ----------------------------------------------------------------------
    def collect(self) -> None:
        # The YAML declarers are read last: they are being parsed in the background meanwhile.
        docs = {dec.path: self.rel.doc(dec.path, dec.schema)
                for dec in sorted(self.declarers, key=lambda dec: is_yaml(dec.path))}
        for dec in self.declarers:
            doc, err = docs[dec.path]
            if doc is not None:
                decls = [Declaration(dec.path, loc, t, h) for loc, t, h in dec.extract(doc)]
                # A declared path must stay inside the release: never read outside DIR on a file's say-so.
                self.bad_paths += [x for x in decls if not _safe_relpath(x.target)]
                self.decls[dec.path] = [x for x in decls if _safe_relpath(x.target)]

    def intact(self, path: str) -> bool:
        t = self.trusted.get(path)
        return t is not None and self.rel.sha(path) == t.sha256 and path in self.decls

    def propagate(self) -> None:
        frontier: list[Declaration] = [Declaration(LOCK, f"published_hashes[{h.role}]", h.path, h.sha256)
                                       for h in self.lock.published_hashes]
        depth = 0
        done: set[str] = set()
        while frontier:
            for decl in frontier:
                self.trusted.setdefault(decl.target, Trust(decl.sha256, decl, depth))
            depth += 1
            nxt: list[Declaration] = []
            for dec in self.declarers:  # fixed order: deterministic winner among equal depths
                if dec.path not in done and self.intact(dec.path):
                    done.add(dec.path)
                    nxt.extend(self.decls[dec.path])
            frontier = [x for x in nxt if x.target not in self.trusted]

    # ---- hash checks ------------------------------------------------------------------------
    def lock_checks(self) -> None:
        for h in self.lock.published_hashes:
            actual = self.rel.sha(h.path)
            not_read = self.rel.unreadable.get(h.path)
            if not_read is not None:
                st, msg, actual = "failed", not_read, NOT_READ
                self.hash_failed.add(h.path)
            elif actual is None:
                st, msg = "absent", "not in this directory"
            elif actual == h.sha256:
                st, msg = "passed", f"sha256 matches the published {h.role} hash"
            else:
                st, msg = "failed", f"bytes differ from the published {h.role} hash"
                self.hash_failed.add(h.path)
            self.checks.append(Check(id=f"lock:{h.path}", group="lock", title=f"published {h.role} hash",
                                    file=h.path, status=st, expected=h.sha256, actual=actual, message=msg,
                                    source=LOCK))

    def declared_checks(self) -> None:
        for decl in self.bad_paths:
            self.hash_failed.add(decl.declarer)
            self.checks.append(Check(
                id=f"declared:{decl.declarer}#{decl.location}", group="declared",
                title=f"hash declared in {decl.declarer}", file=decl.declarer, status="failed",
                expected="a path inside the release", actual=decl.target, source=source_of(decl),
                message=f"declares a hash for {decl.target!r}, a path outside the release"))
        for dec in self.declarers:
            for decl in self.decls.get(dec.path, []):
                self.checks.append(self._declared(decl))

    def _declared(self, decl: Declaration) -> Check:
        actual = self.rel.sha(decl.target)
        not_read = self.rel.unreadable.get(decl.target)
        base = dict(id=f"declared:{decl.declarer}#{decl.location}", group="declared",
                    title=f"hash declared in {decl.declarer}", expected=decl.sha256,
                    actual=NOT_READ if not_read is not None else actual, source=source_of(decl))
        if not_read is not None:  # the file fails, whatever its declarer says: what is there was not read
            self.hash_failed.add(decl.target)
            return Check(**base, file=decl.target, status="failed", message=f"{decl.target}: {not_read}")
        if actual is None:
            return Check(**base, file=decl.target, status="absent", message=f"{decl.target} is not in this directory")
        declarer_ok = self.intact(decl.declarer)
        note = "" if declarer_ok else f" (declared by {decl.declarer}, which is not intact)"
        if actual == decl.sha256:
            return Check(**base, file=decl.target, status="passed", message=f"matches{note}")
        trust = self.trusted.get(decl.target)
        if trust is not None and (trust.decl == decl or actual != trust.sha256):
            self.hash_failed.add(decl.target)
            return Check(**base, file=decl.target, status="failed",
                        message=f"{decl.target}: bytes differ from the trusted hash ({source_of(trust.decl)})")
        why = (f"states {_short(decl.sha256)} for {decl.target}, whose bytes match the trusted hash "
               f"({source_of(trust.decl)})" if trust is not None else
               f"states {_short(decl.sha256)} for {decl.target}, which no trusted hash covers")
        self.hash_failed.add(decl.declarer)
        return Check(**base, file=decl.declarer, status="failed", message=why + note)

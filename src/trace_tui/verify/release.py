"""Offline verification of a release directory (laid out like the upstream repository).

``verify_release(release_dir, lock) -> ReleaseVerification`` is a checklist:
every check is passed, failed (with expected and actual) or absent, and names
the one file it is about. Nothing here prints or exits; the command and the TUI
render the checklist.

Trust chain (SPEC §4): the release lock pins the published hashes and the hash
of ``rlvr/release_files.v1.json``. A file whose bytes match a trusted hash is
*intact*; the hashes an intact file declares become trusted in turn (breadth
first, so the hash closest to the lock wins). Every declaration inside the
release is then checked against the actual bytes, and a mismatch is blamed on
the file whose bytes differ from a trusted hash: the target when the target
differs from its trusted hash, otherwise the declaring file (a receipt that
states a wrong hash for an intact file fails itself, not the file).

Content checks (results.json complete and consistent with the suite, stored
aggregates recomputed, TRACE validation consistent with its suite and receipt)
blame the first involved file that failed its hash, else the file that makes
the claim.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from trace_tui.common.digest import sha256_bytes
from trace_tui.verify.record import Record
from trace_tui.verify import documents as d

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

TOLERANCE = 1e-9
Status = Literal["passed", "failed", "absent"]
FileState = Literal["verified", "failed", "absent", "unverified"]
LOCK = "release lock"

# Documents (paths from the repository root) that the checks read. The lock names
# the results, suites and configs; the rest are fixed names of this release layout.
RELEASE_FILES = "rlvr/release_files.v1.json"
RELEASE_RECEIPTS = "rlvr/evaluation/trace_eval/release_receipts.v1.json"
PROVENANCE = "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json"
VALIDATION_RECEIPT = "rlvr/evaluation/trace_validation/release_receipt.v1.json"
SOURCE_MAP = "rlvr/source_map.v1.json"


# Records, not pydantic models: the checklist is built from our own values (hundreds per
# run) on the timed `trace-tui verify` path, which must not pay for importing pydantic.
class Check(Record):
    """One line of the checklist. ``file`` is the file the status is about (blamed when failed)."""

    __slots__ = ("id", "group", "title", "file", "status", "expected", "actual", "message", "source", "details")
    _defaults = {"expected": None, "actual": None, "message": "", "source": None, "details": list}
    id: str
    group: Literal["lock", "declared", "document", "results", "aggregates", "validation"]
    title: str
    file: str
    status: Status
    expected: str | None
    actual: str | None
    message: str
    source: str | None  # where the expected value comes from
    details: list[str]


class FileReport(Record):
    __slots__ = ("path", "state", "needed", "sha256", "trusted_sha256", "trusted_by")
    _defaults = {"needed": False, "sha256": None, "trusted_sha256": None, "trusted_by": None}
    path: str
    state: FileState
    needed: bool
    sha256: str | None
    trusted_sha256: str | None
    trusted_by: str | None  # the declaration the trusted hash came from


class ReleaseVerification(Record):
    __slots__ = ("release_dir", "checks", "files")
    release_dir: str
    checks: list[Check]
    files: list[FileReport]

    # -- views used by the CLI and the TUI --
    def by_status(self, status: Status) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    @property
    def failed(self) -> list[Check]:
        return self.by_status("failed")

    @property
    def failed_files(self) -> list[str]:
        return sorted({c.file for c in self.failed})

    def files_in(self, state: FileState) -> list[FileReport]:
        return [f for f in self.files if f.state == state]

    @property
    def needed_absent(self) -> list[str]:
        return [f.path for f in self.files if f.needed and f.state == "absent"]

    def counts(self) -> dict[str, int]:
        c = Counter(x.status for x in self.checks)
        f = Counter(x.state for x in self.files)
        return {
            "checks": len(self.checks), "checks_passed": c["passed"], "checks_failed": c["failed"],
            "checks_absent": c["absent"], "files": len(self.files), "files_verified": f["verified"],
            "files_failed": f["failed"], "files_unverified": f["unverified"], "files_absent": f["absent"],
            "files_needed_absent": len(self.needed_absent),
        }

    def ok(self, strict: bool = False) -> bool:
        if self.failed or self.needed_absent:
            return False
        # --strict: the whole release, every file verified (nothing absent, nothing outside the chain).
        return not (strict and (self.by_status("absent") or self.files_in("absent") or self.files_in("unverified")))

    def exit_code(self, strict: bool = False) -> int:
        return 0 if self.ok(strict) else 1

    @property
    def tables(self) -> list[Any]:
        """The release page's tables (verify.tables.SimpleTable), for the TUI's Tables tab.

        Computed on demand, never on the CLI's timed path; empty unless results.json passed
        its completeness and aggregate checks (tables from a broken results file would mislead).
        """
        if any(c.status != "passed" for c in self.checks if c.group in ("results", "aggregates")):
            return []
        try:
            from trace_tui.verify.tables import as_simple_tables, release_tables

            return as_simple_tables(release_tables(Path(self.release_dir)))
        except Exception:  # noqa: BLE001 - a view extra; the checklist already says what is wrong
            return []


def _check(**fields: Any) -> Check:
    # Built from our own values: skip validation (hundreds per run; the CLI path is timed).
    return Check(**fields)


class Declaration(NamedTuple):
    declarer: str  # a path, or LOCK
    location: str  # where inside the declarer, e.g. "files[3].sha256"
    target: str  # path from the repository root
    sha256: str


class _Trust(NamedTuple):
    sha256: str
    decl: Declaration
    depth: int


def _short(h: str | None) -> str:
    return h if h is None else h[:12] + "…"


def _src(decl: Declaration) -> str:
    return LOCK if decl.declarer == LOCK else f"{decl.declarer} {decl.location}"


class _Problem(NamedTuple):
    message: str
    expected: Any = None
    actual: Any = None


TOO_DEEP = "nested too deeply to be a release document"


class _Release:
    """Reads each file once; parses each document once; remembers what went wrong."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._bytes: dict[str, bytes | None] = {}
        self._raw: dict[str, tuple[Any, str | None]] = {}
        self._docs: dict[tuple[str, type], tuple[Any, str | None]] = {}
        self.unreadable: dict[str, str] = {}

    def data(self, path: str) -> bytes | None:
        if path not in self._bytes:
            p = self.root / path
            if not os.path.lexists(p):
                self._bytes[path] = None
            else:
                # Present but not a readable regular file: it cannot match any hash, and it is
                # not absent either. Empty bytes make every check on it fail, with the reason noted.
                try:
                    self._bytes[path] = p.read_bytes() if p.is_file() else b""
                    if not p.is_file():
                        self.unreadable[path] = "not a regular file"
                except OSError as exc:
                    self._bytes[path] = b""
                    self.unreadable[path] = f"cannot read: {exc.strerror or exc}"
        return self._bytes[path]

    def why(self, path: str) -> str:
        return f" ({self.unreadable[path]})" if path in self.unreadable else ""

    def present(self, path: str) -> bool:
        return self.data(path) is not None

    def sha(self, path: str) -> str | None:
        b = self.data(path)
        return None if b is None else sha256_bytes(b)

    def raw(self, path: str) -> tuple[Any, str | None]:
        """(parsed value, error line); error when the file is not valid JSON/YAML."""
        if path not in self._raw:
            data = self.data(path)
            if data is None:
                self._raw[path] = (None, "absent")
            elif path.endswith((".yaml", ".yml")):
                import yaml

                loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                try:
                    self._raw[path] = (yaml.load(data.decode("utf-8"), Loader=loader), None)  # noqa: S506 - safe loader
                except (yaml.YAMLError, UnicodeDecodeError) as exc:
                    self._raw[path] = (None, f"not valid YAML: {str(exc).splitlines()[0]}")
                except RecursionError:
                    self._raw[path] = (None, TOO_DEEP)
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


def _safe_relpath(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return not path.startswith("/") and all(x not in ("", ".", "..") for x in parts) \
        and ":" not in parts[0] and "\x00" not in path


def _rlvr(path: str) -> str:
    return path if path.startswith("rlvr/") else f"rlvr/{path}"


class _Declarer(NamedTuple):
    path: str
    schema: type
    extract: Callable[[Any], list[tuple[str, str, str]]]  # doc -> [(location, target, sha256)]


def _declarers(lock: ReleaseLock) -> list[_Declarer]:
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
        _Declarer(RELEASE_FILES, d.ReleaseFilesDoc, release_files),
        _Declarer(te.results_path, d.ResultsDoc, results),
        _Declarer(RELEASE_RECEIPTS, d.ReleaseReceiptsDoc, receipts),
        _Declarer(VALIDATION_RECEIPT, d.ValidationReceiptDoc, validation_receipt),
        _Declarer(tv.suite_path, d.ValidationSuiteDoc, validation_suite),
        *[_Declarer(c, d.TrainingConfigDoc, config) for c in configs],
        _Declarer(SOURCE_MAP, d.SourceMapDoc, source_map),
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


class _Verifier:
    def __init__(self, root: Path, lock: ReleaseLock) -> None:
        self.rel = _Release(root)
        self.lock = lock
        self.checks: list[Check] = []
        self.declarers = _declarers(lock)
        self.needed = needed_documents(lock)
        self.trusted: dict[str, _Trust] = {}
        self.decls: dict[str, list[Declaration]] = {}  # declarer -> its declarations (when readable)
        self.hash_failed: set[str] = set()
        self.bad_paths: list[Declaration] = []

    # ---- trust chain ----------------------------------------------------------------------
    def _collect(self) -> None:
        for dec in self.declarers:
            doc, err = self.rel.doc(dec.path, dec.schema)
            if doc is not None:
                decls = [Declaration(dec.path, loc, t, h) for loc, t, h in dec.extract(doc)]
                # A declared path must stay inside the release: never read outside DIR on a file's say-so.
                self.bad_paths += [x for x in decls if not _safe_relpath(x.target)]
                self.decls[dec.path] = [x for x in decls if _safe_relpath(x.target)]

    def _intact(self, path: str) -> bool:
        t = self.trusted.get(path)
        return t is not None and self.rel.sha(path) == t.sha256 and path in self.decls

    def _propagate(self) -> None:
        frontier: list[Declaration] = [Declaration(LOCK, f"published_hashes[{h.role}]", h.path, h.sha256)
                                       for h in self.lock.published_hashes]
        depth = 0
        done: set[str] = set()
        while frontier:
            for decl in frontier:
                self.trusted.setdefault(decl.target, _Trust(decl.sha256, decl, depth))
            depth += 1
            nxt: list[Declaration] = []
            for dec in self.declarers:  # fixed order: deterministic winner among equal depths
                if dec.path not in done and self._intact(dec.path):
                    done.add(dec.path)
                    nxt.extend(self.decls[dec.path])
            frontier = [x for x in nxt if x.target not in self.trusted]

    # ---- hash checks ------------------------------------------------------------------------
    def _lock_checks(self) -> None:
        for h in self.lock.published_hashes:
            actual = self.rel.sha(h.path)
            if actual is None:
                st, msg = "absent", "not in this directory"
            elif actual == h.sha256:
                st, msg = "passed", f"sha256 matches the published {h.role} hash"
            else:
                st, msg = "failed", f"bytes differ from the published {h.role} hash{self.rel.why(h.path)}"
                self.hash_failed.add(h.path)
            self.checks.append(_check(id=f"lock:{h.path}", group="lock", title=f"published {h.role} hash",
                                     file=h.path, status=st, expected=h.sha256, actual=actual, message=msg,
                                     source=LOCK))

    def _declared_checks(self) -> None:
        for decl in self.bad_paths:
            self.hash_failed.add(decl.declarer)
            self.checks.append(_check(
                id=f"declared:{decl.declarer}#{decl.location}", group="declared",
                title=f"hash declared in {decl.declarer}", file=decl.declarer, status="failed",
                expected="a path inside the release", actual=decl.target, source=_src(decl),
                message=f"declares a hash for {decl.target!r}, a path outside the release"))
        for dec in self.declarers:
            for decl in self.decls.get(dec.path, []):
                self.checks.append(self._declared(decl))

    def _declared(self, decl: Declaration) -> Check:
        actual = self.rel.sha(decl.target)
        base = dict(id=f"declared:{decl.declarer}#{decl.location}", group="declared",
                    title=f"hash declared in {decl.declarer}", expected=decl.sha256, actual=actual, source=_src(decl))
        if actual is None:
            return _check(**base, file=decl.target, status="absent", message=f"{decl.target} is not in this directory")
        declarer_ok = self._intact(decl.declarer)
        note = "" if declarer_ok else f" (declared by {decl.declarer}, which is not intact)"
        if actual == decl.sha256:
            return _check(**base, file=decl.target, status="passed", message=f"matches{note}")
        trust = self.trusted.get(decl.target)
        if trust is not None and (trust.decl == decl or actual != trust.sha256):
            self.hash_failed.add(decl.target)
            return _check(**base, file=decl.target, status="failed",
                         message=f"{decl.target}: bytes differ from the trusted hash ({_src(trust.decl)})"
                                 f"{self.rel.why(decl.target)}")
        why = (f"states {_short(decl.sha256)} for {decl.target}, whose bytes match the trusted hash "
               f"({_src(trust.decl)})" if trust is not None else
               f"states {_short(decl.sha256)} for {decl.target}, which no trusted hash covers")
        self.hash_failed.add(decl.declarer)
        return _check(**base, file=decl.declarer, status="failed", message=why + note)

    def _document_checks(self) -> None:
        """Each needed document (and each declarer) is present, parses, and has the fields we read."""
        docs = dict(self.needed)
        for dec in self.declarers:
            docs.setdefault(dec.path, dec.schema)
        for path, schema in docs.items():
            needed = path in self.needed
            what = "needed by the checks" if needed else "declares hashes"
            if not self.rel.present(path):
                self.checks.append(_check(id=f"document:{path}", group="document", title="readable document",
                                         file=path, status="absent", message=f"not in this directory ({what})"))
                continue
            _doc, err = self.rel.doc(path, schema)
            if err is None:
                self.checks.append(_check(id=f"document:{path}", group="document", title="readable document",
                                         file=path, status="passed", message=f"parses and has the fields read ({what})"))
            else:
                self.hash_failed.add(path)
                self.checks.append(_check(id=f"document:{path}", group="document", title="readable document",
                                         file=path, status="failed", actual=err.split(":", 1)[0],
                                         expected="valid " + ("YAML" if path.endswith(".yaml") else "JSON") + " with the fields read",
                                         message=err))

    # ---- content checks -----------------------------------------------------------------------
    def _content(self, cid: str, group: str, title: str, subject: str, involved: Sequence[str],
                 fn: Callable[..., tuple[str, list[_Problem]]]) -> None:
        docs = []
        for p in involved:
            if not self.rel.present(p):
                self.checks.append(_check(id=cid, group=group, title=title, file=p, status="absent",
                                         message=f"cannot check: {p} is not in this directory"))
                return
            doc, err = self.rel.doc(p, self.needed.get(p, d.AnyObject))
            if err is not None:
                self.checks.append(_check(id=cid, group=group, title=title, file=p, status="failed",
                                         message=f"cannot check: {p} is unreadable (see document:{p})"))
                return
            docs.append(doc)
        try:
            ok_message, problems = fn(*docs)
        except (ValueError, KeyError, ZeroDivisionError, TypeError) as exc:
            problems, ok_message = [_Problem(f"cannot recompute: {exc}")], ""
        if not problems:
            self.checks.append(_check(id=cid, group=group, title=title, file=subject, status="passed", message=ok_message))
            return
        blame = next((p for p in involved if p in self.hash_failed), subject)
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        self.checks.append(_check(
            id=cid, group=group, title=title, file=blame, status="failed",
            expected=None if first.expected is None else str(first.expected),
            actual=None if first.actual is None else str(first.actual),
            message=first.message + more, details=[p.message for p in problems[:50]]))

    def _content_checks(self) -> None:
        lock = self.lock
        te, tv = lock.trace_eval, lock.trace_validation
        R, S, P = te.results_path, te.suite_path, PROVENANCE
        self._content("suite.categories", "results", "suite categories and benchmarks agree", S, [S], _suite_categories)
        self._content("provenance.suite", "results", "provenance covers the suite's benchmarks", P, [P, S],
                      _provenance_vs_suite)
        self._content("results.suite", "results", "results.json names the suite it was built from", R, [R, S],
                      _results_suite)
        self._content("results.models", "results", "models are the release's models", R, [R],
                      lambda r: _results_models(r, lock))
        self._content("results.complete", "results", "models x seeds x benchmarks, once each", R, [R, S],
                      lambda r, s: _results_complete(r, s, lock))
        self._content("results.evaluated_rows", "results", "evaluated rows as in the suite", R, [R, S],
                      _results_rows)
        for name, title in _AGGREGATES:
            self._content(f"aggregates.{name}", "aggregates", title, R, [R, S],
                          lambda r, s, name=name: _aggregate_check(name, r, s, lock))
        self._content("aggregates.pairs", "aggregates", "each trained model is compared with its same-scale base",
                      R, [R], lambda r: _comparison_pairs(r, lock))
        V, VS, VR = tv.results_path, tv.suite_path, VALIDATION_RECEIPT
        self._content("validation.suite", "validation", "validation suite matches the release lock", VS, [VS],
                      lambda s: _validation_suite(s, lock))
        self._content("validation.models", "validation", "validation results cover the suite's models", V, [V, VS],
                      lambda r, s: _validation_models(r, s, lock))
        self._content("validation.rows", "validation", "every model scored on all rows, with the suite's seed", V,
                      [V, VS], _validation_rows)
        self._content("validation.scores", "validation", "scores are accuracies over whole rows", V, [V],
                      _validation_scores)
        self._content("validation.receipt", "validation", "release receipt agrees with results and suite", VR,
                      [VR, V, VS], lambda rc, r, s: _validation_receipt(rc, r, s, lock))
        for scale, c in lock.training.configs.items():
            self._content(f"config.pins:{c}", "results", f"{scale} training config pins the release's models and data",
                          c, [c], lambda doc, scale=scale: _config_pins(doc, scale, lock))

    # ---- files -----------------------------------------------------------------------------------
    def _files(self) -> list[FileReport]:
        paths: dict[str, None] = {}
        for h in self.lock.published_hashes:
            paths[h.path] = None
        for decls in self.decls.values():
            for x in decls:
                paths[x.target] = None
        for p in self.needed:
            paths[p] = None
        for dec in self.declarers:
            paths[dec.path] = None
        # Anything else under rlvr/ is a present file no hash covers (the manifest is default-deny).
        rlvr = self.rel.root / "rlvr"
        for dirpath, dirnames, filenames in os.walk(rlvr):
            dirnames[:] = [x for x in dirnames if not x.startswith(".") and x != "__pycache__"]
            for name in filenames:
                paths.setdefault(os.path.relpath(os.path.join(dirpath, name), self.rel.root).replace(os.sep, "/"))
        failed = {c.file for c in self.checks if c.status == "failed"}
        out = []
        for p in sorted(paths):
            sha = self.rel.sha(p)
            trust = self.trusted.get(p)
            if sha is None:
                state: FileState = "absent"
            elif p in failed:
                state = "failed"
            elif trust is not None and trust.sha256 == sha:
                state = "verified"
            else:
                state = "unverified"  # present, but no hash reached from the lock covers it
            out.append(FileReport(path=p, state=state, needed=p in self.needed, sha256=sha,
                                  trusted_sha256=trust.sha256 if trust else None,
                                  trusted_by=_src(trust.decl) if trust else None))
        return out

    def run(self) -> ReleaseVerification:
        self._collect()
        self._propagate()
        self._lock_checks()
        self._document_checks()
        self._declared_checks()
        self._content_checks()
        return ReleaseVerification(release_dir=str(self.rel.root), checks=self.checks,
                                                   files=self._files())


def verify_release(release_dir: Path | str, lock: ReleaseLock | None = None) -> ReleaseVerification:
    """Verify a release directory offline. Raises nothing for bad contents: they become failed checks."""
    return _Verifier(Path(release_dir), lock if lock is not None else _packaged_lock()).run()


class _LockView(dict):
    """The packaged release lock read as plain JSON, with attribute access (``lock.trace_eval.seeds``).

    What the checks read of ``trace_tui.release.ReleaseLock``, without importing pydantic on the
    timed `trace-tui verify` path. The packaged lock is the project's own file, validated by
    ReleaseLock wherever else it is loaded (and by its tests); verify only reads it.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def model_dump(self) -> dict[str, Any]:
        return dict(self)

    @property
    def ref(self) -> str:  # ModelPin.ref / RepoPin's repo_id@revision
        return f"{self['repo_id']}@{self['revision']}"


def _packaged_lock() -> Any:
    from trace_tui.resources import release_lock_path

    return json.loads(release_lock_path().read_text(encoding="utf-8"), object_hook=_LockView)


def is_release_layout(path: Path) -> bool:
    """A release directory has the upstream layout: an ``rlvr/`` folder at its root."""
    return (path / "rlvr").is_dir()


# ================================================================================================
# Content checks: pure functions of parsed documents -> (message when passed, problems)
# ================================================================================================

def _suite_categories(suite: d.EvalSuiteDoc):
    problems = []
    by_bench = {b.key: b.category for b in suite.benchmarks}
    listed = [k for ks in suite.categories.values() for k in ks]
    if sorted(listed) != sorted(by_bench):
        problems.append(_Problem("categories list other benchmarks than benchmarks[]", sorted(by_bench), sorted(listed)))
    for cat, keys in suite.categories.items():
        for k in keys:
            if k in by_bench and by_bench[k] != cat:
                problems.append(_Problem(f"{k}: category {by_bench[k]!r} in benchmarks[], {cat!r} in categories",
                                         cat, by_bench[k]))
    dup = [k for k, n in Counter(b.key for b in suite.benchmarks).items() if n > 1]
    if dup:
        problems.append(_Problem(f"duplicate benchmarks {dup}"))
    return f"{len(suite.benchmarks)} benchmarks in {len(suite.categories)} categories", problems


def _provenance_vs_suite(prov: d.ProvenanceDoc, suite: d.EvalSuiteDoc):
    problems = []
    if prov.suite_id != suite.suite_id:
        problems.append(_Problem("suite_id differs from the suite's", suite.suite_id, prov.suite_id))
    p = {b.benchmark_id: b for b in prov.benchmarks}
    s = {b.key: b for b in suite.benchmarks}
    if set(p) != set(s):
        problems.append(_Problem("provenance covers other benchmarks than the suite", sorted(s), sorted(p)))
    for k in sorted(set(p) & set(s)):
        if p[k].category != s[k].category:
            problems.append(_Problem(f"{k}: category differs", s[k].category, p[k].category))
        if p[k].row_count != s[k].rows:
            problems.append(_Problem(f"{k}: row_count differs from the suite's rows", s[k].rows, p[k].row_count))
    return f"{len(p)} benchmarks, categories and rows as in the suite", problems


_DECODING_KEYS = ("temperature", "top_p", "top_k", "presence_penalty", "repetition_penalty", "max_tokens",
                  "min_image_pixels", "max_image_pixels")


def _results_suite(res: d.ResultsDoc, suite: d.EvalSuiteDoc):
    rs = res.suite
    problems = []
    if rs.suite_id != suite.suite_id:
        problems.append(_Problem("suite.suite_id differs from the suite", suite.suite_id, rs.suite_id))
    if rs.benchmark_count != len(suite.benchmarks):
        problems.append(_Problem("suite.benchmark_count differs from the suite", len(suite.benchmarks), rs.benchmark_count))
    rows = sum(b.rows for b in suite.benchmarks)
    if rs.rows_per_model_seed != rows:
        problems.append(_Problem("suite.rows_per_model_seed differs from the suite's rows", rows, rs.rows_per_model_seed))
    for k in _DECODING_KEYS:
        if rs.decoding.get(k) != suite.generation.get(k):
            problems.append(_Problem(f"suite.decoding.{k} differs from the suite's generation",
                                     suite.generation.get(k), rs.decoding.get(k)))
    if rs.vlmevalkit.commit != suite.vlmevalkit.commit:
        problems.append(_Problem("suite.vlmevalkit.commit differs", suite.vlmevalkit.commit, rs.vlmevalkit.commit))
    return f"{suite.suite_id}: {len(suite.benchmarks)} benchmarks, {rows} rows per model and seed", problems


def _results_models(res: d.ResultsDoc, lock: ReleaseLock):
    problems = []
    ids = [m.model_id for m in res.models]
    want = [m.id for m in lock.models]
    if sorted(ids) != sorted(want) or len(ids) != len(set(ids)):
        problems.append(_Problem("models[] differ from the release's models", want, ids))
    for m in res.models:
        pin = next((p for p in lock.models if p.id == m.model_id), None)
        if pin is None:
            continue
        if (m.repository_id, m.repository_revision) != (pin.repo_id, pin.revision):
            problems.append(_Problem(f"{m.model_id}: repository differs from the release lock", pin.ref,
                                     f"{m.repository_id}@{m.repository_revision}"))
        if m.parameter_scale != pin.scale:
            problems.append(_Problem(f"{m.model_id}: parameter_scale differs", pin.scale, m.parameter_scale))
    if res.seeds != list(lock.trace_eval.seeds):
        problems.append(_Problem("seeds differ from the release's seeds", lock.trace_eval.seeds, res.seeds))
    return f"{len(ids)} models, seeds {', '.join(map(str, res.seeds))}", problems


def _results_complete(res: d.ResultsDoc, suite: d.EvalSuiteDoc, lock: ReleaseLock):
    models = [m.id for m in lock.models]
    seeds = list(lock.trace_eval.seeds)
    benches = [b.key for b in suite.benchmarks]
    want = {(m, s, b) for m in models for s in seeds for b in benches}
    got = Counter((x.model_id, x.seed, x.benchmark_id) for x in res.scores.benchmark_scores)
    problems = []
    for k in sorted(want - set(got)):
        problems.append(_Problem(f"missing score {k[0]}/{k[1]}/{k[2]}"))
    for k in sorted(set(got) - want):
        problems.append(_Problem(f"unexpected score {k[0]}/{k[1]}/{k[2]} (not in the suite x models x seeds)"))
    for k, n in sorted(got.items()):
        if n > 1:
            problems.append(_Problem(f"duplicate score {k[0]}/{k[1]}/{k[2]} ({n} rows)"))
    for x in res.scores.benchmark_scores:
        if not math.isfinite(x.score) or not 0.0 <= x.score <= 100.0:
            problems.append(_Problem(f"score {x.model_id}/{x.seed}/{x.benchmark_id} is not a percentage", "0..100", x.score))
    if problems:
        problems[0] = problems[0]._replace(expected=f"{len(want)} scores", actual=f"{sum(got.values())} rows")
    n = len(want)
    return (f"{n} scores = {len(models)} models x {len(seeds)} seeds x {len(benches)} benchmarks, no duplicates",
            problems)


def _results_rows(res: d.ResultsDoc, suite: d.EvalSuiteDoc):
    rows = {b.key: b.rows for b in suite.benchmarks}
    problems = []
    for x in res.scores.benchmark_scores:
        if x.benchmark_id in rows and x.evaluated_rows != rows[x.benchmark_id]:
            problems.append(_Problem(f"{x.model_id}/{x.seed}/{x.benchmark_id}: evaluated_rows differs from the suite",
                                     rows[x.benchmark_id], x.evaluated_rows))
    for x in res.scores.benchmark_summaries:
        if x.benchmark_id in rows and x.evaluated_rows != rows[x.benchmark_id]:
            problems.append(_Problem(f"summary {x.model_id}/{x.benchmark_id}: evaluated_rows differs from the suite",
                                     rows[x.benchmark_id], x.evaluated_rows))
    return f"every score evaluated on the suite's rows ({sum(rows.values())} per model and seed)", problems


# ---- aggregates ----------------------------------------------------------------------------------

_AGGREGATES = (
    ("benchmark_summaries", "benchmark mean ± sample std over seeds"),
    ("category_scores", "per-seed category scores"),
    ("category_summaries", "category mean ± sample std"),
    ("overall_scores", "per-seed overall scores"),
    ("overall_summaries", "overall mean ± sample std"),
    ("overall_deltas", "paired overall changes against the base"),
    ("benchmark_deltas", "paired per-benchmark changes against the base"),
)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= TOLERANCE


class _Compare:
    """Collects stored-vs-recomputed differences for one aggregate family."""

    def __init__(self) -> None:
        self.problems: list[_Problem] = []
        self.values = 0

    def value(self, what: str, stored: float | None, recomputed: float | None) -> None:
        self.values += 1
        if not _close(stored, recomputed):
            self.problems.append(_Problem(f"{what}: stored {stored!r}, recomputed {recomputed!r}", recomputed, stored))

    def equal(self, what: str, stored: Any, expected: Any) -> None:
        if stored != expected:
            self.problems.append(_Problem(f"{what}: stored {stored!r}, expected {expected!r}", expected, stored))

    def keys(self, what: str, stored: Iterable[tuple], recomputed: Iterable[tuple]) -> None:
        st = Counter(stored)
        rc = set(recomputed)
        for k in sorted(rc - set(st), key=str):
            self.problems.append(_Problem(f"{what} {'/'.join(map(str, k))}: missing from results.json"))
        for k in sorted(set(st) - rc, key=str):
            self.problems.append(_Problem(f"{what} {'/'.join(map(str, k))}: stored but not derivable from the scores"))
        for k, n in st.items():
            if n > 1:
                self.problems.append(_Problem(f"{what} {'/'.join(map(str, k))}: stored {n} times"))

    def delta(self, what: str, stored: d.StoredDelta, rec) -> None:
        self.value(f"{what} mean", stored.mean, rec.mean)
        self.value(f"{what} stddev", stored.stddev, rec.stddev)
        sv = {x.seed: x.delta for x in stored.seed_values}
        if len(sv) != len(stored.seed_values) or set(sv) != set(rec.seed_values):
            self.problems.append(_Problem(f"{what}: seeds {sorted(sv)} stored, {sorted(rec.seed_values)} paired",
                                          sorted(rec.seed_values), sorted(sv)))
        for s in sorted(set(sv) & set(rec.seed_values)):
            self.value(f"{what} seed {s}", sv[s], rec.seed_values[s])


def _aggregate_check(name: str, res: d.ResultsDoc, suite: d.EvalSuiteDoc, lock: ReleaseLock):
    from trace_tui.verify import aggregate as agg

    # Converted once per results document, not in each of the seven aggregate checks.
    records = res.__dict__.get("_score_records")
    if records is None:
        records = res.__dict__["_score_records"] = agg.as_records(res.scores.benchmark_scores)
    keys = [(x.model_id, x.seed, x.benchmark_id) for x in records]
    if len(set(keys)) != len(keys):
        return "", [_Problem("cannot recompute: duplicate benchmark scores (see results.complete)")]
    categories = {c: list(ks) for c, ks in suite.categories.items()}
    n_bench = len(suite.benchmarks)
    c = _Compare()
    sc = res.scores
    if name == "benchmark_summaries":
        rec = agg.benchmark_summaries(records)
        c.keys("benchmark summary", [(x.model_id, x.benchmark_id) for x in sc.benchmark_summaries], rec)
        for x in sc.benchmark_summaries:
            r = rec.get((x.model_id, x.benchmark_id))
            if r is not None:
                what = f"{x.model_id}/{x.benchmark_id}"
                c.value(f"{what} mean", x.mean, r.mean)
                c.value(f"{what} stddev", x.stddev, r.stddev)
                c.equal(f"{what} seed_count", x.seed_count, r.n)
    elif name == "category_scores":
        rec = agg.category_scores(records, categories)
        c.keys("category score", [(x.model_id, x.seed, x.category_name) for x in sc.category_scores], rec)
        for x in sc.category_scores:
            r = rec.get((x.model_id, x.seed, x.category_name))
            if r is not None:
                c.value(f"{x.model_id}/{x.seed}/{x.category_name}", x.score, r)
                c.equal(f"{x.model_id}/{x.seed}/{x.category_name} benchmark_count", x.benchmark_count,
                        len(categories[x.category_name]))
    elif name == "category_summaries":
        rec = agg.category_summaries(records, categories)
        c.keys("category summary", [(x.model_id, x.category_name) for x in sc.category_summaries], rec)
        for x in sc.category_summaries:
            r = rec.get((x.model_id, x.category_name))
            if r is not None:
                c.value(f"{x.model_id}/{x.category_name} mean", x.mean, r.mean)
                c.value(f"{x.model_id}/{x.category_name} stddev", x.stddev, r.stddev)
                c.equal(f"{x.model_id}/{x.category_name} seed_count", x.seed_count, r.n)
    elif name == "overall_scores":
        rec = agg.overall_scores(records)
        c.keys("overall score", [(x.model_id, x.seed) for x in sc.overall_scores], rec)
        for x in sc.overall_scores:
            r = rec.get((x.model_id, x.seed))
            if r is not None:
                c.value(f"{x.model_id}/{x.seed}", x.score, r)
                c.equal(f"{x.model_id}/{x.seed} benchmark_count", x.benchmark_count, n_bench)
        # The suite's rule: the overall also equals the mean of the category means.
        cats = agg.category_scores(records, categories)
        for (m, s), v in rec.items():
            cm = [cats[(m, s, cat)] for cat in categories if (m, s, cat) in cats]
            if len(cm) == len(categories) and not _close(v, agg.mean(cm)):
                c.problems.append(_Problem(f"{m}/{s}: overall {v!r} is not the mean of category means", v, agg.mean(cm)))
    elif name == "overall_summaries":
        rec = agg.overall_summaries(records)
        c.keys("overall summary", [(x.model_id,) for x in sc.overall_summaries], [(k,) for k in rec])
        for x in sc.overall_summaries:
            r = rec.get(x.model_id)
            if r is not None:
                c.value(f"{x.model_id} mean", x.mean, r.mean)
                c.value(f"{x.model_id} stddev", x.stddev, r.stddev)
                c.equal(f"{x.model_id} seed_count", x.seed_count, r.n)
    elif name == "overall_deltas":
        for cmp in res.comparisons:
            rec = agg.overall_delta(records, cmp.model_id, cmp.base_model_id)
            c.delta(f"{cmp.model_id} vs {cmp.base_model_id} overall", cmp.overall_delta, rec)
    elif name == "benchmark_deltas":
        for cmp in res.comparisons:
            rec = agg.benchmark_deltas(records, cmp.model_id, cmp.base_model_id)
            c.keys(f"{cmp.model_id} delta", [(x.benchmark_id,) for x in cmp.benchmark_deltas], [(k,) for k in rec])
            for x in cmp.benchmark_deltas:
                r = rec.get(x.benchmark_id)
                if r is not None:
                    c.delta(f"{cmp.model_id} vs {cmp.base_model_id} {x.benchmark_id}", x, r)
    n = c.values
    return f"{n} stored values agree with recomputation from {len(records)} scores (tolerance {TOLERANCE:g})", c.problems


def _comparison_pairs(res: d.ResultsDoc, lock: ReleaseLock):
    want = {m.id: (m.base_model_id, m.scale) for m in lock.models if not m.is_base}
    got = Counter(x.model_id for x in res.comparisons)
    problems = []
    if set(got) != set(want):
        problems.append(_Problem("comparisons cover other models than the trained ones", sorted(want), sorted(got)))
    for m, n in got.items():
        if n > 1:
            problems.append(_Problem(f"{m}: compared {n} times"))
    for x in res.comparisons:
        if x.model_id in want and (x.base_model_id, x.parameter_scale) != want[x.model_id]:
            problems.append(_Problem(f"{x.model_id}: paired with {x.base_model_id} ({x.parameter_scale})",
                                     "{} ({})".format(*want[x.model_id]), f"{x.base_model_id} ({x.parameter_scale})"))
    return f"{len(res.comparisons)} comparisons, each with its same-scale base", problems


# ---- TRACE validation --------------------------------------------------------------------------------

def _validation_suite(suite: d.ValidationSuiteDoc, lock: ReleaseLock):
    tv = lock.trace_validation
    problems = []
    if suite.suite_id != tv.suite_id:
        problems.append(_Problem("suite_id differs from the release lock", tv.suite_id, suite.suite_id))
    if suite.dataset.rows != tv.rows:
        problems.append(_Problem("dataset.rows differs from the release lock", tv.rows, suite.dataset.rows))
    if suite.prompt.system_prompt_file != tv.system_prompt_file:
        problems.append(_Problem("prompt.system_prompt_file differs", tv.system_prompt_file, suite.prompt.system_prompt_file))
    for k, v in tv.generation.model_dump().items():
        if suite.generation.get(k) != v:
            problems.append(_Problem(f"generation.{k} differs from the release lock", v, suite.generation.get(k)))
    return f"{tv.suite_id}: {tv.rows} rows, seed {tv.generation.seed}, generation as pinned", problems


def _validation_models(res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc, lock: ReleaseLock):
    problems = []
    got = [(r.model_id, r.label) for r in res.results]
    want = [(m.slug, m.label) for m in suite.models]
    if got != want:
        problems.append(_Problem("results[] differ from the suite's models (id, label, order)", want, got))
    pins = {m.id: m for m in lock.models}
    for m in suite.models:
        pin = pins.get(m.slug)
        if pin is None:
            problems.append(_Problem(f"{m.slug}: not a release model", sorted(pins), m.slug))
        elif (m.repo_id, m.revision) != (pin.repo_id, pin.revision):
            problems.append(_Problem(f"{m.slug}: repository differs from the release lock", pin.ref, f"{m.repo_id}@{m.revision}"))
        elif m.label != pin.validation_label:
            problems.append(_Problem(f"{m.slug}: label differs from the release lock", pin.validation_label, m.label))
    if sorted(pins) != sorted(m.slug for m in suite.models):
        problems.append(_Problem("suite models differ from the release's models", sorted(pins),
                                 sorted(m.slug for m in suite.models)))
    return f"{len(got)} models, as in the suite and the release lock", problems


def _validation_rows(res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc):
    rows, seed = suite.dataset.rows, suite.generation.get("seed")
    problems = []
    if res.evaluation.rows_per_model != rows:
        problems.append(_Problem("evaluation.rows_per_model differs from the suite", rows, res.evaluation.rows_per_model))
    if res.evaluation.seed != seed:
        problems.append(_Problem("evaluation.seed differs from the suite's generation seed", seed, res.evaluation.seed))
    for r in res.results:
        if r.evaluated_rows != rows:
            problems.append(_Problem(f"{r.model_id}: evaluated_rows differs from the suite", rows, r.evaluated_rows))
    return f"every model scored on {rows} rows at seed {seed}", problems


def _validation_scores(res: d.ValidationResultsDoc):
    problems = []
    for r in res.results:
        correct = r.score * r.evaluated_rows / 100.0
        if not (math.isfinite(r.score) and 0.0 <= r.score <= 100.0) or abs(correct - round(correct)) > 1e-6:
            problems.append(_Problem(f"{r.model_id}: score {r.score} is not a whole number of {r.evaluated_rows} rows",
                                     "k/rows x 100", r.score))
    return f"{len(res.results)} accuracies, each a whole number of correct rows", problems


def _validation_receipt(rc: d.ValidationReceiptDoc, res: d.ValidationResultsDoc, suite: d.ValidationSuiteDoc,
                        lock: ReleaseLock):
    tv = lock.trace_validation
    problems = []
    cv, pr, src = rc.campaign_verification, rc.public_release, rc.immutable_source
    n_models, rows, seed = len(suite.models), suite.dataset.rows, suite.generation.get("seed")

    def same(what, expected, actual):
        if expected != actual:
            problems.append(_Problem(f"{what}: receipt states {actual!r}, expected {expected!r}", expected, actual))

    same("campaign_verification.status", "ok", cv.status)
    same("campaign_verification.models", n_models, cv.models)
    same("campaign_verification.seed", seed, cv.seed)
    same("campaign_verification.rows_per_model", rows, cv.rows_per_model)
    same("campaign_verification.generation_rows", n_models * rows, cv.generation_rows)
    same("campaign_verification.scored_rows", n_models * rows, cv.scored_rows)
    same("public_release.result_rows", len(res.results), pr.result_rows)
    same("public_release.suite_path", tv.suite_path, pr.suite_path)
    same("public_release.results_path", tv.results_path, pr.results_path)
    same("immutable_source.dataset_revision", res.source.dataset_revision, src.dataset_revision)
    same("immutable_source.run_id", res.source.run_id, src.run_id)
    scores = src.files.get("benchmark_scores")
    same("immutable_source.files.benchmark_scores.sha256", res.source.results_sha256, scores.sha256 if scores else None)
    return f"receipt agrees: {n_models} models x {rows} rows, seed {seed}, source {src.run_id}", problems


def _config_pins(doc: d.TrainingConfigDoc, scale: str, lock: ReleaseLock):
    problems = []
    r = doc.release
    trained = next((m for m in lock.models if m.scale == scale and not m.is_base and m.post_training_data
                    and m.post_training_data.startswith("TRACE")), None)
    base = lock.training_base_models.get(scale)
    if trained is not None and (r.released_model.repo_id, r.released_model.revision) != (trained.repo_id, trained.revision):
        problems.append(_Problem("release.released_model differs from the release lock", trained.ref,
                                 f"{r.released_model.repo_id}@{r.released_model.revision}"))
    if base is not None and (r.base_model.repo_id, r.base_model.revision) != (base.repo_id, base.revision):
        problems.append(_Problem("release.base_model differs from the release lock", base.ref,
                                 f"{r.base_model.repo_id}@{r.base_model.revision}"))
    ds = lock.dataset
    if (r.dataset.repo_id, r.dataset.revision) != (ds.repo_id, ds.revision):
        problems.append(_Problem("release.dataset differs from the release lock", f"{ds.repo_id}@{ds.revision}",
                                 f"{r.dataset.repo_id}@{r.dataset.revision}"))
    if r.prompt.path != lock.trace_validation.system_prompt_file:
        problems.append(_Problem("release.prompt.path differs", lock.trace_validation.system_prompt_file, r.prompt.path))
    return f"{doc.config_id}: models, dataset and prompt as pinned", problems


def release_dir_arg(value: str | None, *, option: str = "--release-dir") -> Path:
    """The release directory, or a UsageError naming what is wrong with it (exit 2)."""
    from trace_tui.errors import UsageError

    if not value:
        raise UsageError(f"{option} DIR is required", hint="a directory laid out like the upstream repository")
    path = Path(value).expanduser()
    if not path.exists():
        raise UsageError(f"{option} {value}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{option} {value}: not a directory")
    if not is_release_layout(path):
        raise UsageError(f"{option} {value}: not a release layout (no rlvr/ folder)",
                         hint="point it at a copy of the upstream repository: rlvr/..., paper.pdf at its root")
    return path

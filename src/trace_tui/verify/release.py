"""Offline verification of a release directory (laid out like the upstream repository).

``verify_release(release_dir, lock) -> ReleaseVerification`` is a checklist
(``verify.checklist``): every check is passed, failed (with expected and actual) or
absent, and names the one file it is about. Nothing here prints or exits; the command
and the TUI render the checklist.

This module runs the checks in order: the trust chain's (``verify.trust``: the lock's
published hashes, then every declared hash), each needed document readable, then the
content checks (``verify.content``: results.json complete and consistent with the suite,
stored aggregates recomputed, TRACE validation consistent with its suite and receipt,
configs pinning the release). A content check blames the first involved file that failed
its hash, else the file that makes the claim.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.errors import CheckFailed, UsageError
from trace_tui.resources import release_lock_path
from trace_tui.verify import content as ct
from trace_tui.verify import documents as d
from trace_tui.verify import trust
from trace_tui.verify.checklist import Check, FileReport, ReleaseVerification
from trace_tui.verify.trust import NOT_READ
from trace_tui.verify.yaml_docs import BackgroundParse, is_yaml

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from trace_tui.release import ReleaseLock
    from trace_tui.verify.checklist import FileState
    from trace_tui.verify.tables import ReleaseTables, SimpleTable

    # (check id, group, title, the file it is about, the documents it reads, what it computes from them)
    _ContentSpec = tuple[str, str, str, str, Sequence[str], Callable[..., tuple[str, list[ct.Problem]]]]
    # ("absent" | "unreadable", the document) or (message when passed, problems)
    _Outcome = tuple[Any, Any]


class _Verifier(trust.TrustChain):
    """The trust chain's checks, then the documents', then the content checks, then the file list."""

    def _document_checks(self) -> None:
        """Each needed document (and each declarer) is present, parses, and has the fields we read."""
        docs = dict(self.needed)
        for dec in self.declarers:
            docs.setdefault(dec.path, dec.schema)
        for path, schema in docs.items():
            needed = path in self.needed
            what = "needed by the checks" if needed else "declares hashes"
            if not self.rel.present(path):
                self.checks.append(Check(id=f"document:{path}", group="document", title="readable document",
                                        file=path, status="absent", message=f"not in this directory ({what})"))
                continue
            _doc, err = self.rel.doc(path, schema)
            if err is None:
                self.checks.append(Check(id=f"document:{path}", group="document", title="readable document",
                                        file=path, status="passed", message=f"parses and has the fields read ({what})"))
            else:
                self.hash_failed.add(path)
                actual = NOT_READ if path in self.rel.unreadable else err.split(":", 1)[0]
                self.checks.append(Check(id=f"document:{path}", group="document", title="readable document",
                                        file=path, status="failed", actual=actual,
                                        expected="valid " + ("YAML" if path.endswith(".yaml") else "JSON") + " with the fields read",
                                        message=err))

    # ---- content checks -----------------------------------------------------------------------
    def _outcome(self, involved: Sequence[str], fn: Callable[..., tuple[str, list[ct.Problem]]]) -> _Outcome:
        """What a content check finds: its documents' state, else its message and problems."""
        docs = []
        for p in involved:
            if not self.rel.present(p):
                return ("absent", p)
            doc, err = self.rel.doc(p, self.needed.get(p, d.AnyObject))
            if err is not None:
                return ("unreadable", p)
            docs.append(doc)
        try:
            return fn(*docs)
        except OverflowError:  # a stored number so large that sums or squares of it leave the floats
            return "", [ct.Problem("cannot recompute: a value out of range (the sums overflow)")]
        except (ValueError, KeyError, ArithmeticError, TypeError) as exc:
            return "", [ct.Problem(f"cannot recompute: {exc}")]

    def _content(self, spec: _ContentSpec, outcome: _Outcome | None) -> None:
        """The checklist line of one content check, from its outcome (found now when not found ahead)."""
        cid, group, title, subject, involved, fn = spec
        if outcome is None:
            outcome = self._outcome(involved, fn)
        if outcome[0] == "absent":
            self.checks.append(Check(id=cid, group=group, title=title, file=outcome[1], status="absent",
                                    message=f"cannot check: {outcome[1]} is not in this directory"))
            return
        if outcome[0] == "unreadable":
            p = outcome[1]
            self.checks.append(Check(id=cid, group=group, title=title, file=p, status="failed",
                                    message=f"cannot check: {p} is unreadable (see document:{p})"))
            return
        ok_message, problems = outcome
        if not problems:
            self.checks.append(Check(id=cid, group=group, title=title, file=subject, status="passed", message=ok_message))
            return
        blame = next((p for p in involved if p in self.hash_failed), subject)
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        self.checks.append(Check(
            id=cid, group=group, title=title, file=blame, status="failed",
            expected=None if first.expected is None else str(first.expected),
            actual=None if first.actual is None else str(first.actual),
            message=first.message + more, details=[p.message for p in problems[:50]]))

    def _content_specs(self) -> list[_ContentSpec]:
        lock = self.lock
        te, tv = lock.trace_eval, lock.trace_validation
        R, S, P = te.results_path, te.suite_path, trust.PROVENANCE
        specs: list[_ContentSpec] = [
            ("suite.categories", "results", "suite categories and benchmarks agree", S, [S], ct.suite_categories),
            ("provenance.suite", "results", "provenance covers the suite's benchmarks", P, [P, S],
             ct.provenance_vs_suite),
            ("results.suite", "results", "results.json names the suite it was built from", R, [R, S],
             ct.results_suite),
            ("results.models", "results", "models are the release's models", R, [R],
             lambda r: ct.results_models(r, lock)),
            ("results.complete", "results", "models x seeds x benchmarks, once each", R, [R, S],
             lambda r, s: ct.results_complete(r, s, lock)),
            ("results.evaluated_rows", "results", "evaluated rows as in the suite", R, [R, S], ct.results_rows),
        ]
        for name, title in ct.AGGREGATES:
            specs.append((f"aggregates.{name}", "aggregates", title, R, [R, S],
                          lambda r, s, name=name: ct.aggregate_check(name, r, s, lock)))
        specs.append(("aggregates.pairs", "aggregates", "each trained model is compared with its same-scale base",
                      R, [R], lambda r: ct.comparison_pairs(r, lock)))
        V, VS, VR = tv.results_path, tv.suite_path, trust.VALIDATION_RECEIPT
        specs += [
            ("validation.suite", "validation", "validation suite matches the release lock", VS, [VS],
             lambda s: ct.validation_suite(s, lock)),
            ("validation.models", "validation", "validation results cover the suite's models", V, [V, VS],
             lambda r, s: ct.validation_models(r, s, lock)),
            ("validation.rows", "validation", "every model scored on all rows, with the suite's seed", V,
             [V, VS], ct.validation_rows),
            ("validation.scores", "validation", "scores are accuracies over whole rows", V, [V],
             ct.validation_scores),
            ("validation.receipt", "validation", "release receipt agrees with results and suite", VR,
             [VR, V, VS], lambda rc, r, s: ct.validation_receipt(rc, r, s, lock)),
        ]
        for scale, c in lock.training.configs.items():
            specs.append((f"config.pins:{c}", "results", f"{scale} training config pins the release's models and data",
                          c, [c], lambda doc, scale=scale: ct.config_pins(doc, scale, lock)))
        return specs

    def _outcomes_ahead(self, specs: list[_ContentSpec]) -> dict[str, _Outcome]:
        """check id -> outcome of the content checks that read no YAML, found while the YAML is parsed in
        the background (yaml_docs); their lines are made later, in their place, once the hash checks
        have said which files to blame."""
        return {spec[0]: self._outcome(spec[4], spec[5]) for spec in specs if not any(is_yaml(p) for p in spec[4])}

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
        unlisted: list[OSError] = []  # folders that could not be listed: what they hold is unknown, not absent
        for dirpath, dirnames, filenames in os.walk(rlvr, onerror=unlisted.append):
            dirnames[:] = [x for x in dirnames if not x.startswith(".") and x != "__pycache__"]
            for name in filenames:
                paths.setdefault(os.path.relpath(os.path.join(dirpath, name), self.rel.root).replace(os.sep, "/"))
        for exc in unlisted:
            folder = os.path.relpath(exc.filename, self.rel.root).replace(os.sep, "/") + "/"
            self.checks.append(Check(id=f"readable:{folder}", group="document", title="readable folder", file=folder,
                                     status="failed",
                                     message=f"cannot be listed ({exc.strerror or exc}): its files are not verified"))
        failed = {c.file for c in self.checks if c.status == "failed"}
        out = []
        for p in sorted(paths):
            sha = self.rel.sha(p)
            t = self.trusted.get(p)
            not_read = self.rel.unreadable.get(p)
            if not_read is not None:
                state: FileState = "failed"
                if p not in failed:  # a file no check reads (no hash covers it) fails all the same
                    self.checks.append(Check(id=f"readable:{p}", group="document", title="readable file", file=p,
                                             status="failed", message=not_read))
            elif sha is None:
                state = "absent"
            elif p in failed:
                state = "failed"
            elif t is not None and t.sha256 == sha:
                state = "verified"
            else:
                state = "unverified"  # present, but no hash reached from the lock covers it
            out.append(FileReport(path=p, state=state, needed=p in self.needed, sha256=sha,
                                  trusted_sha256=t.sha256 if t else None,
                                  trusted_by=trust.source_of(t.decl) if t else None))
        return out

    def run(self) -> ReleaseVerification:
        # Meanwhile the YAML is parsed in the background (yaml_docs): first what needs none of it.
        self.lock_checks()
        specs = self._content_specs()
        ahead = self._outcomes_ahead(specs)
        self.collect()
        self.propagate()
        self._document_checks()
        self.declared_checks()
        for spec in specs:
            self._content(spec, ahead.get(spec[0]))
        files = self._files()  # may add the failures of files and folders no other check reads
        return ReleaseVerification(release_dir=str(self.rel.root), checks=self.checks, files=files)


def verify_release(release_dir: Path | str, lock: ReleaseLock | None = None, *,
                   yaml_ahead: BackgroundParse | None = None) -> ReleaseVerification:
    """Verify a release directory offline. Raises nothing for bad contents: they become failed checks.

    ``yaml_ahead``: the release's YAML already being parsed (``yaml_docs.parse_configs_ahead``).
    """
    return _Verifier(Path(release_dir), lock if lock is not None else _packaged_lock(), yaml_ahead).run()


def checked_release_tables(root: Path, *, warn: Callable[[str], None] | None = None) -> ReleaseTables:
    """verify.tables.release_tables of ROOT (`report`, `verify --report-dir`), once verify's reader has read
    the documents they are made from.

    release_tables opens results.json and the validation results by path. Verify's reader reads them
    first: only a regular file inside ROOT (never through a link out of it, never a FIFO or a device),
    at most MAX_DOCUMENT_BYTES, parsed with its depth guarded. The first it refuses or cannot parse is
    CheckFailed, its line verify's document check's; release_tables raises CheckFailed for the rest.
    """
    from trace_tui.release import release_lock
    from trace_tui.verify.tables import release_tables

    lock = release_lock()
    files = trust.ReleaseFiles(root)
    te, tv = lock.trace_eval, lock.trace_validation
    for rel, schema in ((te.results_path, d.ResultsDoc), (tv.results_path, d.ValidationResultsDoc)):
        if not files.present(rel):
            continue  # release_tables says what an absent file means for the tables
        _doc, err = files.doc(rel, schema)
        if err is not None:
            raise CheckFailed(f"{rel}: report: {err}",
                              hint=f"`trace-tui verify --release-dir {root}` checks every file")
    return release_tables(root, warn=warn, lock=lock)


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


def _packaged_lock() -> _LockView:
    return json.loads(release_lock_path().read_text(encoding="utf-8"), object_hook=_LockView)


def is_release_layout(path: Path) -> bool:
    """A release directory has the upstream layout: an ``rlvr/`` folder at its root."""
    return (path / "rlvr").is_dir()


def release_dir_arg(value: str | None, *, option: str = "--release-dir") -> Path:
    """The release directory, or a UsageError naming what is wrong with it (exit 2)."""
    if not value:
        raise UsageError(f"{option} DIR is required", hint="a directory laid out like the upstream repository")
    path = Path(value).expanduser()
    try:
        if not path.exists():
            raise UsageError(f"{option} {value}: no such directory")
        if not path.is_dir():
            raise UsageError(f"{option} {value}: not a directory")
        if not is_release_layout(path):
            raise UsageError(f"{option} {value}: not a release layout (no rlvr/ folder)",
                             hint="point it at a copy of the upstream repository: rlvr/..., paper.pdf at its root")
    except OSError as exc:  # a folder on the way that this user may not search (EACCES), a link loop, ...
        raise UsageError(f"{option} {value}: cannot be read ({exc.strerror or exc})",
                         hint="give a release directory this user can read") from None
    return path


def view_tables(result: ReleaseVerification) -> list[SimpleTable]:
    """The release page's tables for the TUI's Tables tab, computed on demand (never on the CLI's timed path);
    empty unless results.json passed its completeness and aggregate checks (tables from a broken results file
    would mislead), and read by verify's reader: never a results file through a link out of the release."""
    if any(c.status != "passed" for c in result.checks if c.group in ("results", "aggregates")):
        return []
    from trace_tui.verify.tables import as_simple_tables  # pydantic: never on `verify --release-dir`'s path

    try:
        return as_simple_tables(checked_release_tables(Path(result.release_dir)))
    except Exception:  # noqa: BLE001 - a view extra; the checklist already says what is wrong
        return []


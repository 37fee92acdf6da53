"""`verify --attestation FILE [--campaign DIR]`: a verification summary or a step's provenance checked
offline, after its signature (trace_tui.signing.attestations): its predicate against the
in-toto-attestation library's own message, what it says, and each subject re-hashed in a campaign.

A plain statement has no signature: it is checked like a signed one, and is a failure unless the
reader accepts unsigned statements (``allow_unsigned``), since anyone could have written it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.signing import predicates
from trace_tui.signing.attestations import Attestation
from trace_tui.verify.vsa import read_policy

SUBJECT_PROBLEMS_SHOWN = 50  # lines naming subjects; the rest are counted in one more


@dataclass
class AttestationReport:
    """What was found: facts (what the statement says) and problems (each a failed check, one line)."""

    file: str
    predicate_type: str
    keyid: str | None
    subjects: int
    facts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    campaign: str | None = None
    rehashed: int = 0  # subjects found equal in the campaign

    def ok(self) -> bool:
        return not self.problems

    def exit_code(self) -> int:
        return 0 if self.ok() else 1

    def as_dict(self) -> dict[str, Any]:
        return {"attestation": self.file, "predicate_type": self.predicate_type, "signed_by": self.keyid,
                "subjects": self.subjects, "facts": self.facts, "problems": self.problems,
                "campaign": self.campaign, "subjects_equal": self.rehashed if self.campaign else None,
                "ok": self.ok(), "exit_code": self.exit_code()}


def check_attestation(att: Attestation, *, where: str, campaign: Path | None = None,
                      allow_unsigned: bool = False) -> AttestationReport:
    report = AttestationReport(where, att.predicate_type, att.keyid, len(att.subjects()))
    if att.keyid is None and not allow_unsigned:
        report.problems.append(f"{where}: unsigned (a plain statement, which anyone could have written; sign it "
                               "where it is made, after `trace-tui keys init`, or pass --allow-unsigned to accept it)")
    kind = predicates.NAMES.get(att.predicate_type)
    if kind is None:
        report.problems.append(f"{where}: predicateType {att.predicate_type!r} is not one trace-tui checks "
                               f"({', '.join(predicates.NAMES)})")
    else:
        try:
            predicates.check_predicate(att.predicate_type, att.predicate)
        except ValueError as exc:
            report.problems.append(f"{where}: not a valid {kind} predicate: {exc}")
        else:
            if att.predicate_type == predicates.VSA_TYPE:
                _summary(att.predicate, where, report)
            else:
                _provenance(att.predicate, report)
    if campaign is not None:
        report.campaign = str(campaign)
        _rehash(att.subjects(), campaign, report)
    return report


def _summary(p: dict[str, Any], where: str, report: AttestationReport) -> None:
    result = p.get("verificationResult")
    levels = ", ".join(predicates.verified_levels(p))
    report.facts.append(f"verification {result} ({levels}) of {p.get('resourceUri')}, {p.get('timeVerified')}, "
                        f"by {p.get('verifier', {}).get('id')}")
    if result != "PASSED":
        report.problems.append(f"{where}: verificationResult {result}: the campaign did not verify when the summary "
                               "was written")
    try:
        policy = read_policy(p.get("policy") or {})
    except LookupError:
        report.facts.append(f"policy {p.get('policy', {}).get('uri')} (not carried in the summary)")
        return
    except ValueError as exc:
        report.problems.append(f"{where}: {exc}")
        return
    named = []
    for key in ("releaseLock", "recipe", "imagesLock"):
        entry = policy.get(key)
        if entry is None and key == "imagesLock":
            named.append("no image lock on the verifying machine")
        elif isinstance(entry, dict):
            digest = (entry.get("digest") or {}).get("sha256")
            named.append(f"{entry.get('name')} " + (f"sha256 {digest}" if digest else f"({entry.get('notHashed')})"))
    report.facts.append("policy: " + "; ".join(named or ["(names nothing)"]))


def _provenance(p: dict[str, Any], report: AttestationReport) -> None:
    build = p.get("buildDefinition", {})
    run = p.get("runDetails", {})
    step = (build.get("externalParameters") or {}).get("step") or {}
    meta = run.get("metadata") or {}
    report.facts.append(f"step {step.get('id') if isinstance(step, dict) else step} "
                        f"({(build.get('externalParameters') or {}).get('slice')}), {build.get('buildType')}, "
                        f"built by {run.get('builder', {}).get('id')}, {meta.get('startedOn')} to "
                        f"{meta.get('finishedOn')}; {len(build.get('resolvedDependencies', []))} resolved dependencies")


def _rehash(subjects: list[tuple[str, dict[str, str]]], campaign: Path, report: AttestationReport) -> None:
    folder = Folder(campaign, name="the campaign")
    problems: list[str] = []
    for name, digest in subjects:
        want = digest.get("sha256")
        rel = PurePosixPath(name)
        if not name or rel.is_absolute() or ".." in rel.parts:
            problems.append(f"subject {name!r}: not a path inside the campaign; not read")
            continue
        if not want:
            problems.append(f"subject {name}: no sha256 digest to compare ({', '.join(digest) or 'none'})")
            continue
        try:
            got = folder.sha256(name)
        except NotRead as exc:
            problems.append(f"subject {name}: {exc.reason} in {campaign}")
            continue
        if got is None:
            problems.append(f"subject {name}: absent from {campaign}")
        elif got != want:
            problems.append(f"subject {name}: differs in {campaign} (sha256 {got}, attested {want})")
        else:
            report.rehashed += 1
    report.problems += problems[:SUBJECT_PROBLEMS_SHOWN]
    if len(problems) > SUBJECT_PROBLEMS_SHOWN:
        report.problems.append(f"{len(problems) - SUBJECT_PROBLEMS_SHOWN} more subjects absent or different in "
                               f"{campaign}")

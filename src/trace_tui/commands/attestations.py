"""The attestation flags of `trace-tui verify`: `--vsa FILE` and `--provenance OUTDIR` with `--campaign DIR`,
and `--attestation FILE [--trust-key FILE]... [--allow-unsigned] [--campaign DIR]`.

Exit codes of `--attestation`: 0 the statement verified (signed by a key this site trusts, a valid statement
and predicate, a summary that says PASSED, every subject equal in DIR); 1 a check failed; 2 bad input (no
such file, not JSON, neither an envelope nor a statement, a bad key file).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.commands.arguments import non_empty
from trace_tui.errors import UsageError
from trace_tui.paths import campaign_dir_arg, home
from trace_tui.signing.keys import short

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.service.attest import Written
    from trace_tui.verify.attestation_check import AttestationReport

UNSIGNED = ("unsigned: this home has no signing key (`trace-tui keys init` makes one); a reader accepts an unsigned "
            "statement only with --allow-unsigned")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("attestations (in-toto statements, SLSA predicates)")
    g.add_argument("--vsa", metavar="FILE", type=non_empty,
                   help="with --campaign: also write the verification summary (SLSA VSA v1) to FILE")
    g.add_argument("--provenance", metavar="OUTDIR", type=non_empty,
                   help="with --campaign: also write each step's receipt as SLSA provenance v1 into OUTDIR")
    g.add_argument("--attestation", metavar="FILE", type=non_empty,
                   help="check a summary or provenance file offline: signature, statement, predicate; with "
                        "--campaign DIR also each subject's sha256 there")
    g.add_argument("--trust-key", metavar="FILE", action="append", default=[], type=non_empty,
                   help="with --attestation: also trust this public key file (repeatable)")
    g.add_argument("--allow-unsigned", action="store_true",
                   help="with --attestation: accept a statement that is not signed")


def check_combination(args: argparse.Namespace) -> None:
    """One usage line for flags that do not go together."""
    if args.attestation:
        given = [flag for flag, value in (("--release-dir", args.release_dir), ("--vsa", args.vsa),
                                          ("--provenance", args.provenance)) if value]
        if given:
            raise UsageError(f"--attestation checks a file and does not go with {', '.join(given)}",
                             hint="check the attestation and verify the campaign in two commands")
        return
    if (args.vsa or args.provenance) and not args.campaign:
        raise UsageError("--vsa and --provenance write attestations of a campaign", hint="give --campaign DIR")
    if args.trust_key or args.allow_unsigned:
        raise UsageError("--trust-key and --allow-unsigned are for checking an attestation",
                         hint="give --attestation FILE")


def run_check(args: argparse.Namespace) -> int:
    from trace_tui.service.attest import check_attestation_file

    campaign = Path(campaign_dir_arg(args.campaign)) if args.campaign else None
    report = check_attestation_file(Path(args.attestation), home=home(getattr(args, "home", None)),
                                    trust=[Path(p) for p in args.trust_key], campaign=campaign,
                                    allow_unsigned=args.allow_unsigned)
    print(json.dumps(report.as_dict(), indent=2) if args.json else render_report(report))
    return report.exit_code()


def render_report(report: AttestationReport) -> str:
    from trace_tui.signing.predicates import NAMES

    kind = NAMES.get(report.predicate_type, report.predicate_type)
    signed = f"signed by key {short(report.keyid)}" if report.keyid else "unsigned"
    lines = [f"attestation {report.file}: {kind}, {signed}, {report.subjects} subjects"]
    lines += [f"  {fact}" for fact in report.facts]
    if report.campaign is not None:
        lines.append(f"  campaign {report.campaign}: {report.rehashed} of {report.subjects} subjects equal")
    lines += [f"FAILED {problem}" for problem in report.problems]
    lines.append("VERIFIED" if report.ok() else "FAILED")
    return "\n".join(lines)


def check_targets(args: argparse.Namespace, campaign: Path) -> None:
    """Before the campaign is verified: --vsa and --provenance name places outside it."""
    if not (args.vsa or args.provenance):
        return
    from trace_tui.service.attest import check_outside

    for flag, target in (("--vsa", args.vsa), ("--provenance", args.provenance)):
        if target:
            check_outside(campaign, Path(target), flag)


def write_for_campaign(args: argparse.Namespace, campaign: Path, *, passed: bool) -> dict[str, Any]:
    """The attestations --vsa and --provenance ask for, written; what was written, for the output."""
    from trace_tui.service.attest import write_provenance, write_summary

    root = home(getattr(args, "home", None))
    out: dict[str, Any] = {}
    if args.vsa:
        out["vsa"] = write_summary(campaign, passed=passed, path=Path(args.vsa), home=root)
    if args.provenance:
        out["provenance"] = write_provenance(campaign, passed=passed, outdir=Path(args.provenance), home=root)
    return out


def written_lines(written: dict[str, Written]) -> list[str]:
    lines = []
    vsa, prov = written.get("vsa"), written.get("provenance")
    if vsa is not None:
        lines.append(f"verification summary (SLSA VSA v1, {vsa.count} subjects): {vsa.path}, {_signed(vsa)}")
        lines += [f"  not a subject: {name} ({why})" for name, why in vsa.left_out]
    if prov is not None and prov.not_written:
        lines.append(f"provenance (SLSA provenance v1): nothing written to {prov.path}: {prov.not_written}")
    elif prov is not None:
        lines.append(f"provenance (SLSA provenance v1): {prov.count} statements in {prov.path}, {_signed(prov)}")
        lines += [f"  not exported: {name} ({why})" for name, why in prov.left_out]
    return lines


def written_data(written: dict[str, Written]) -> dict[str, Any]:
    return {key: {"path": str(w.path), "signed_by": w.keyid, "count": w.count, "not_written": w.not_written,
                  "left_out": [{"file": name, "why": why} for name, why in w.left_out]}
            for key, w in written.items()}


def _signed(w: Written) -> str:
    return f"signed by key {short(w.keyid)}" if w.keyid else UNSIGNED

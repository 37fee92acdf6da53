"""`trace-tui verify --release-dir DIR [--strict] [--json] [--report-dir OUT]` and `--campaign DIR [--vsa FILE]
[--provenance OUTDIR]`; `--attestation FILE` (trace_tui.commands.attestations).

Exit codes: 0 nothing present failed and every file the checks need is
present (with --strict: and nothing is absent); 1 a check failed or a needed
file is absent; 2 usage (no such directory, not a release layout).
Only the standard library at top level: `trace-tui --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui import logs
from trace_tui.commands import attestations
from trace_tui.commands.arguments import non_empty, skip_teardown
from trace_tui.common.atomic import atomic_write_text
from trace_tui.errors import CheckFailed, UsageError, out_of_space
from trace_tui.paths import campaign_dir_arg
from trace_tui.service.requests import VerifyRequest
from trace_tui.verify.release import release_dir_arg, verify_release
from trace_tui.verify.yaml_docs import parse_configs_ahead

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.verify.campaign import CampaignVerification

STATUS_WORD = {"passed": "PASS", "failed": "FAIL", "absent": "ABSENT"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--release-dir", metavar="DIR",
                   help="a release directory laid out like the upstream repository (rlvr/..., paper.pdf)")
    p.add_argument("--campaign", metavar="DIR", type=non_empty, help="a campaign directory to verify offline")
    p.add_argument("--strict", action="store_true", help="also fail when any release file is absent")
    p.add_argument("--json", action="store_true", help="print the checklist as JSON")
    p.add_argument("--report-dir", metavar="OUT", type=non_empty, help="also write OUT/report.json and OUT/report.md")
    attestations.add_arguments(p)
    p.epilog = ("exit status: 0 nothing present failed and every file the checks need is present; "
                "1 a check failed or a needed file is absent (with --strict: any file absent); 2 usage error "
                "or DIR missing / not a release layout. With --attestation: 0 it verified; 1 a check failed "
                "(a key this site does not trust, a changed or unsigned statement, a FAILED summary, a subject "
                "that differs); 2 not an attestation file")


def run(args: argparse.Namespace) -> int:
    campaign_dir = getattr(args, "campaign", None)
    attestations.check_combination(args)
    if args.attestation:
        return attestations.run_check(args)
    if not args.release_dir and not campaign_dir:
        raise UsageError("nothing to verify", hint="give --release-dir DIR and/or --campaign DIR (or --attestation "
                                                   "FILE)")
    if not campaign_dir:
        code = _verify_release(args)
        if not getattr(args, "log_file", None):  # no log handler to flush; a report's files are closed

            skip_teardown()
        return code

    campaign_dir_arg(campaign_dir)  # a file, a link loop, a folder this user may not read: one line first
    request = VerifyRequest(campaign=Path(campaign_dir), home=getattr(args, "home", None),
                            release_dir=Path(args.release_dir) if args.release_dir else None)
    if not args.release_dir:
        return _verify_campaign(request, args, as_json=args.json)
    # Both: the release is verified, and its published values are what the campaign is compared with.
    if args.json:
        import contextlib
        import io

        rel_out, camp_out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(rel_out):
            code = _verify_release(args)
        with contextlib.redirect_stdout(camp_out):
            code = max(code, _verify_campaign(request, args, as_json=True))
        print(json.dumps({"release": json.loads(rel_out.getvalue()), "campaign": json.loads(camp_out.getvalue()),
                          "exit_code": code}, indent=2))
        return code
    code = _verify_release(args)
    print()
    return max(code, _verify_campaign(request, args, as_json=False))


def _verify_campaign(request: VerifyRequest, args: argparse.Namespace, *, as_json: bool) -> int:
    # pydantic (the campaign's records) and the store: loaded only for a campaign, never for `--release-dir`
    from trace_tui.service.verify import verify_campaign_request

    attestations.check_targets(args, request.campaign)
    res = verify_campaign_request(request)
    if not as_json:  # the checklist first: an attestation that cannot be written is one line after it
        print(render_campaign(res), flush=True)
    written = attestations.write_for_campaign(args, request.campaign, passed=res.ok())
    if as_json:
        data = res.model_dump()
        data.update(ok=res.ok(), exit_code=res.exit_code(), counts=res.counts())
        if written:
            data["attestations"] = attestations.written_data(written)
        print(json.dumps(data, indent=2, default=str))
    elif written:
        print("\n".join(attestations.written_lines(written)))
    return res.exit_code()


def _verify_release(args: argparse.Namespace) -> int:
    # Before the verifier's own imports: the YAML parse then runs beside them, not after.
    yaml_ahead = parse_configs_ahead(Path(args.release_dir or "."))

    root = release_dir_arg(args.release_dir)
    result = verify_release(root, yaml_ahead=yaml_ahead)
    code = result.exit_code(args.strict)
    if getattr(args, "log_file", None):
        _log(result, args, code)
    if args.report_dir:
        write_report(result, Path(args.report_dir), strict=args.strict, root=root)
    if args.json:
        print(json.dumps(as_json(result, strict=args.strict), indent=2))
        for line in failure_lines(result):  # data on stdout, the failures also as lines on stderr
            print(f"trace-tui: {line}", file=sys.stderr)
    else:
        print(render_text(result, strict=args.strict))
    return code


def _log(result: Any, args: argparse.Namespace, code: int) -> None:
    """With --log-file only (a command that only looks writes nothing by default): the outcome as log events."""
    # The terminal already gets the checklist; log lines go to the file (and stderr only for json).
    logs.configure(args.log_format, log_file=Path(args.log_file),
                   stream=sys.stderr if args.log_format == "json" else open(os.devnull, "w"))  # noqa: SIM115
    log = logs.get_logger()
    try:
        for c in result.failed:
            log.error("verify.check_failed", file=c.file, check=c.id, expected=c.expected, actual=c.actual,
                      message=c.message)
        for p in result.needed_absent:
            log.error("verify.needed_file_absent", file=p)
        log.info("verify.release", release_dir=result.release_dir, exit_code=code, strict=args.strict,
                 **result.counts())
    except OSError as exc:  # each line is written and flushed as it is logged: a full disk shows here
        line = f"--log-file {args.log_file}: cannot be written ({exc.strerror or exc})"
        if out_of_space(exc):  # as any full disk: exit 1, and the same command works once space is freed
            raise CheckFailed(line, hint="free space there, or name a file elsewhere") from None
        raise UsageError(line, hint="name a file in a writable directory") from None


# ---- rendering (pure: verification -> text / data) ------------------------------------------------

def as_json(result: Any, *, strict: bool) -> dict[str, Any]:
    return {
        "release_dir": result.release_dir,
        "ok": result.ok(strict),
        "strict": strict,
        "exit_code": result.exit_code(strict),
        "counts": result.counts(),
        "needed_absent": result.needed_absent,
        "failed_files": result.failed_files,
        "checks": [c.model_dump() for c in result.checks],
        "files": [f.model_dump() for f in result.files],
    }


def _expected_actual(c: Any) -> str:
    if c.expected is None and c.actual is None:
        return ""
    return f" (expected {c.expected}, actual {c.actual})"


def failure_lines(result: Any) -> list[str]:
    """One line per failed check naming the file and the check, then each absent needed file."""
    lines = [f"FAIL {c.file}: {c.id}: {c.message}{_expected_actual(c)}" for c in result.failed]
    lines += [f"ABSENT {p}: needed by the checks" for p in result.needed_absent]
    return lines


_GROUPS = (
    ("lock", "1. Files pinned in the release lock (sha256)"),
    ("document", "   Documents the checks read (parse and schema)"),
    ("declared", "2. Hashes declared inside the release (trust chain)"),
    ("results", "3. results.json complete and consistent with the suite"),
    ("aggregates", "4. Stored aggregates recomputed from the benchmark scores"),
    ("validation", "5. TRACE validation consistent with its suite and receipt"),
)


def render_text(result: Any, *, strict: bool) -> str:
    out = [f"Release: {result.release_dir}"]
    for group, title in _GROUPS:
        checks = [c for c in result.checks if c.group == group]
        if not checks:
            continue
        n = {s: sum(1 for c in checks if c.status == s) for s in ("passed", "failed", "absent")}
        out.append("")
        out.append(f"{title}: {n['passed']} passed, {n['failed']} failed, {n['absent']} absent")
        for c in checks:
            if group == "declared" and c.status == "absent":
                continue  # folded into the absent-file list below: one line per file, not per declaration
            word = STATUS_WORD[c.status]
            if group == "declared":
                label = f"declared in {c.source}"
            elif group in ("lock", "document"):
                label = c.title
            else:
                label = c.id
            text = f"  {word:<6} {c.file}  [{label}] {c.message}"
            if c.status == "failed":
                text += _expected_actual(c)
            out.append(text)
    absent = result.files_in("absent")
    if absent:
        out.append("")
        out.append(f"Absent files ({len(absent)}; reported absent, never passed):")
        for f in absent:
            out.append(f"  ABSENT {f.path}" + ("  (needed by the checks)" if f.needed else ""))
    unverified = result.files_in("unverified")
    if unverified:
        out.append("")
        out.append("Present but not verified (no intact chain from the release lock reaches them):")
        out += [f"  ?      {f.path}" for f in unverified]
    c = result.counts()
    out.append("")
    out.append(f"Files: {c['files_verified']} verified, {c['files_failed']} failed, {c['files_unverified']} unverified, "
               f"{c['files_absent']} absent ({c['files_needed_absent']} needed by the checks) of {c['files']} known files")
    out.append(f"Checks: {c['checks_passed']} passed, {c['checks_failed']} failed, {c['checks_absent']} absent")
    lines = failure_lines(result)
    if result.ok(strict):
        out.append("Result: OK" + (" (strict)" if strict else f" ({c['files_absent']} files absent; --strict fails on them)"
                                   if c["files_absent"] else ""))
    else:
        if not lines and strict:
            lines = [f"ABSENT {f.path}: --strict fails on any absent file" for f in absent[:1]]
            lines[0] += f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        out.append("Result: FAILED")
        out += [f"  {line}" for line in lines]
    return "\n".join(out)


def render_markdown(result: Any, *, strict: bool, tables_md: str | None) -> str:
    c = result.counts()
    verdict = "OK" if result.ok(strict) else "FAILED"
    out = [f"# trace-tui verify: {verdict}", "", f"Release directory: `{result.release_dir}`" + (" (strict)" if strict else ""),
           "", f"- Files: {c['files_verified']} verified, {c['files_failed']} failed, {c['files_unverified']} unverified, "
           f"{c['files_absent']} absent ({c['files_needed_absent']} needed by the checks) of {c['files']} known",
           f"- Checks: {c['checks_passed']} passed, {c['checks_failed']} failed, {c['checks_absent']} absent", ""]
    failures = failure_lines(result)
    if failures:
        out += ["## Failures", ""] + [f"- {line}" for line in failures] + [""]
    for group, title in _GROUPS:
        checks = [x for x in result.checks if x.group == group]
        if not checks:
            continue
        out += [f"## {title.strip()}", "", "| Status | File | Check | Message | Expected | Actual |", "|---|---|---|---|---|---|"]
        for x in checks:
            cells = [STATUS_WORD[x.status], f"`{x.file}`", x.source or x.id if group in ("lock", "declared") else x.id,
                     x.message, x.expected or "", x.actual or ""]
            out.append("| " + " | ".join(str(v).replace("|", "\\|") for v in cells) + " |")
        out.append("")
    absent = result.files_in("absent")
    if absent:
        out += [f"## Absent files ({len(absent)})", ""] + [f"- `{f.path}`" + (" (needed)" if f.needed else "") for f in absent]
        out.append("")
    if tables_md:
        out += ["# Release tables (recomputed from results.json)", "", tables_md]
    return "\n".join(out) + "\n"


def write_report(result: Any, out_dir: Path, *, strict: bool, root: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--report-dir {out_dir}: cannot create it ({exc.strerror})") from None
    tables_md = None
    if not any(c.status != "passed" for c in result.checks if c.group in ("results", "aggregates")):
        try:
            from trace_tui.verify.release import checked_release_tables

            tables_md = checked_release_tables(root).to_markdown()
        except Exception:  # noqa: BLE001 - the checklist is the report; tables are a bonus when computable
            tables_md = None
    try:
        atomic_write_text(out_dir / "report.json", json.dumps(as_json(result, strict=strict), indent=2) + "\n")
        atomic_write_text(out_dir / "report.md", render_markdown(result, strict=strict, tables_md=tables_md))
    except OSError as exc:
        raise UsageError(f"--report-dir {out_dir}: cannot write the report ({exc.strerror})") from None


def render_campaign(res: CampaignVerification) -> str:
    lines = [f"campaign {res.campaign} (recipe {res.recipe}, run tag {res.run_tag})"]
    counts = res.counts()
    for c in res.checks:
        if c.status != "passed":
            extra = f" (expected {c.expected}, actual {c.actual})" if c.expected is not None or c.actual is not None \
                else ""
            lines.append(f"{c.status.upper():6} {c.id:8} {c.subject}: {c.message}{extra}")
    lines.append(f"checks: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
                 f"{counts.get('info', 0)} information")
    if res.comparisons:
        lines.append(f"comparison with published values ({res.published_source}); information, not a failure:")
        for cmp_ in res.comparisons:
            seed = "" if cmp_.seed is None else f"/{cmp_.seed}"
            lines.append(f"  {cmp_.model}{seed}/{cmp_.benchmark}: {cmp_.score:.2f} vs {cmp_.published:.2f} "
                         f"({cmp_.difference:+.2f}, tolerance {cmp_.tolerance:.2f}: {cmp_.verdict})")
    elif res.published_source is None:
        lines.append("no published values to compare with (give --release-dir DIR or import the release files)")
    lines.append("VERIFIED" if res.ok() else "FAILED")
    return "\n".join(lines)

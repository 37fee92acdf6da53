"""Attestations of a campaign, written and read: the summary of `verify --campaign` (`--vsa FILE`), each
step's receipt as provenance (`--provenance OUTDIR`), and any of them checked (`--attestation FILE`).

What is written is signed with the home's key when it has one (`trace-tui keys init`), else written as
the plain statement and said to be unsigned. Nothing is written into the campaign: it holds only what its
runs wrote, and its verification fails on a file its receipts do not list.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.common.safe_write import NotWritten, file_inside
from trace_tui.errors import UsageError
from trace_tui.signing.attestations import open_attestation, read_attestation, sealed, write_attestation
from trace_tui.signing.keys import KeyFiles, load_signer, public_key_of, site_keys
from trace_tui.verify.attestation_check import AttestationReport, check_attestation
from trace_tui.verify.provenance import campaign_statements
from trace_tui.verify.vsa import campaign_summary

if TYPE_CHECKING:  # pragma: no cover
    from securesystemslib.signer import Signer


@dataclass(frozen=True)
class Written:
    """Attestations written: where, by which key (None: unsigned), and what was left out and why."""

    path: Path
    keyid: str | None
    count: int  # subjects of a summary; statements of a provenance export
    left_out: list[tuple[str, str]] = field(default_factory=list)
    not_written: str | None = None  # why nothing was written


def home_signer(home: Path) -> tuple[Signer | None, str | None]:
    """(the signer of HOME's key, its keyid), or (None, None) when the home has no key."""
    if not KeyFiles.of(home).private.is_file():
        return None, None
    return load_signer(home), public_key_of(home).keyid


def check_outside(campaign: Path, target: Path, flag: str) -> None:
    """A usage line when TARGET (where FLAG writes) lies inside CAMPAIGN."""
    root, where = campaign.resolve(), target.expanduser().resolve()
    if where == root or root in where.parents:
        raise UsageError(f"{flag} {target}: inside the campaign {campaign}",
                         hint="write attestations beside the campaign, not into it: its verification fails on "
                              "files its receipts do not list")


def write_summary(campaign: Path, *, passed: bool, path: Path, home: Path) -> Written:
    """The verification summary (VSA) of CAMPAIGN, whose verification PASSED or not, written to PATH."""
    check_outside(campaign, path, "--vsa")
    statement, left = campaign_summary(campaign.resolve(), passed=passed, when=time.time())
    signer, keyid = home_signer(home)
    try:
        path.expanduser().parent.mkdir(parents=True, exist_ok=True)
        write_attestation(path.expanduser(), sealed(statement, signer))
    except OSError as exc:
        raise UsageError(f"--vsa {path}: cannot be written ({exc.strerror or exc})",
                         hint="name a file in a writable folder") from None
    return Written(path, keyid, len(statement["subject"]), left)


def write_provenance(campaign: Path, *, passed: bool, outdir: Path, home: Path) -> Written:
    """One provenance statement per completed job's receipt, in OUTDIR (mirroring the receipts' folders), once
    the campaign verified (PASSED): a signed statement vouches for the receipts it restates, and a receipt is
    only as good as the checks of its outputs."""
    check_outside(campaign, outdir, "--provenance")
    signer, keyid = home_signer(home)
    if not passed:
        return Written(outdir, keyid, 0, not_written="the campaign did not verify, and a statement would vouch for "
                                                     "its receipts: fix what failed, then export again")
    exported, skipped = campaign_statements(campaign.resolve())
    out = outdir.expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for e in exported:
            write_attestation(file_inside(out, e.name), sealed(e.statement, signer))
    except NotWritten as exc:
        raise UsageError(f"--provenance {outdir}: {exc}", hint="name an empty folder") from None
    except OSError as exc:
        raise UsageError(f"--provenance {outdir}: cannot be written ({exc.strerror or exc})",
                         hint="name a folder that can be written") from None
    return Written(outdir, keyid, len(exported), skipped)


def check_attestation_file(path: Path, *, home: Path, trust: list[Path], campaign: Path | None,
                           allow_unsigned: bool) -> AttestationReport:
    """The attestation at PATH checked against the keys this site trusts (HOME's trusted keys, TRUST, its own
    key), and with CAMPAIGN each subject re-hashed there."""
    if campaign is not None and not campaign.is_dir():
        raise UsageError(f"--campaign {campaign}: no such directory", hint="give the campaign the attestation is of")
    data = read_attestation(path)
    attestation = open_attestation(data, site_keys(home, trust), where=str(path))
    return check_attestation(attestation, where=str(path), campaign=campaign, allow_unsigned=allow_unsigned)

"""An attestation file as trace-tui writes and reads it: an in-toto Statement v1 in a DSSE envelope signed
with the home's key, or, from a home without a key, the plain Statement. A plain statement says what
was checked or produced, but nothing about who vouches for it: a reader reports it as unsigned."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.atomic import atomic_write_bytes
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.signing import envelopes

if TYPE_CHECKING:  # pragma: no cover
    from securesystemslib.signer import Signer, SSlibKey

ATTESTATION_LIMIT = 512 << 20  # as a signed bundle's envelope: a statement of every output of a full campaign


@dataclass(frozen=True)
class Attestation:
    """A statement read from a file, and the trusted key whose signature verified (None: it was unsigned)."""

    statement: dict[str, Any]
    keyid: str | None

    @property
    def predicate_type(self) -> str:
        return str(self.statement.get("predicateType", ""))

    @property
    def predicate(self) -> dict[str, Any]:
        value = self.statement.get("predicate")
        return value if isinstance(value, dict) else {}

    def subjects(self) -> list[tuple[str, dict[str, str]]]:
        return [(str(s.get("name", "")), dict(s.get("digest") or {})) for s in self.statement.get("subject", [])
                if isinstance(s, dict)]


def sealed(doc: dict[str, Any], signer: Signer | None) -> dict[str, Any]:
    """DOC as it is written: a DSSE envelope signed by SIGNER, or the plain statement without one."""
    return envelopes.sign(doc, signer) if signer is not None else doc


def write_attestation(path: Path, doc: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def read_attestation(path: Path) -> bytes:
    """The file's bytes; one usage line (exit 2) when it cannot be read or is too large to be one."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(ATTESTATION_LIMIT + 1)
    except IsADirectoryError:
        raise UsageError(f"--attestation {path}: a directory, not an attestation file",
                         hint="name one of the .json files `verify --vsa` or `--provenance` wrote") from None
    except OSError as exc:
        raise UsageError(f"--attestation {path}: cannot be read ({exc.strerror or exc})",
                         hint="name the attestation file") from None
    if len(data) > ATTESTATION_LIMIT:
        raise UsageError(f"--attestation {path}: larger than {ATTESTATION_LIMIT >> 20} MiB, not an attestation "
                         "trace-tui wrote")
    return data


def open_attestation(data: bytes, keys: list[SSlibKey], *, where: str) -> Attestation:
    """The statement in DATA: from a DSSE envelope once a signature of one of KEYS verifies (CheckFailed, one
    line, when none does or the payload was changed), or a plain statement, unsigned. The statement is
    validated by the in-toto-attestation library either way. UsageError when DATA is neither."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise UsageError(f"{where}: not JSON ({type(exc).__name__})",
                         hint="name a DSSE envelope or in-toto statement file") from None
    if isinstance(doc, dict) and "payload" in doc and "signatures" in doc:
        verified = envelopes.verify(doc, keys, where=where)
        return Attestation(verified.statement, verified.keyid)
    if not isinstance(doc, dict) or doc.get("_type") != envelopes.STATEMENT_TYPE:
        raise UsageError(f"{where}: neither a DSSE envelope (payload, signatures) nor an in-toto Statement "
                         f"(_type {envelopes.STATEMENT_TYPE})", hint="name a file `verify --vsa` or `--provenance` "
                                                                      "wrote")
    try:
        envelopes.validated(doc)
    except (ValueError, TypeError) as exc:
        raise CheckFailed(f"{where}: not a valid in-toto Statement v1 ({str(exc).splitlines()[0]})") from None
    return Attestation(doc, None)

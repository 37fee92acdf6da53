"""in-toto Statements (v1) in DSSE envelopes: made and read with the in-toto-attestation and
securesystemslib libraries, so that any tool that checks those formats accepts what we write.

in-toto-attestation keeps a predicate as a protobuf Struct, where every number is a float: exact
values go into subject digests or strings, never numbers in a predicate.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trace_tui.errors import CheckFailed

if TYPE_CHECKING:  # pragma: no cover
    from securesystemslib.signer import Signer, SSlibKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
ENVELOPE_LIMIT = 512 << 20


@dataclass(frozen=True)
class Subject:
    name: str
    digest: dict[str, str]


@dataclass(frozen=True)
class VerifiedStatement:
    """A statement whose envelope verified, with the keyid that signed it."""

    statement: dict[str, Any]
    keyid: str

    @property
    def predicate_type(self) -> str:
        return str(self.statement.get("predicateType", ""))

    @property
    def predicate(self) -> dict[str, Any]:
        return dict(self.statement.get("predicate") or {})

    def subjects(self) -> dict[str, dict[str, str]]:
        return {s.get("name", ""): dict(s.get("digest") or {}) for s in self.statement.get("subject", [])}


def statement(subjects: list[Subject], predicate_type: str, predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto Statement v1, built and validated by the in-toto-attestation library, as JSON."""
    from google.protobuf import json_format
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
    from in_toto_attestation.v1.statement import Statement

    stmt = Statement([ResourceDescriptor(name=s.name, digest=s.digest).pb for s in subjects], predicate_type,
                     predicate)
    stmt.validate()
    return json_format.MessageToDict(stmt.pb)


def validated(doc: dict[str, Any]) -> None:
    """Check DOC as an in-toto Statement v1 with the library's own code; ValueError names the problem."""
    from google.protobuf import json_format
    from in_toto_attestation.v1.statement import Statement
    from in_toto_attestation.v1.statement_pb2 import Statement as StatementProto

    try:
        proto = json_format.ParseDict(doc, StatementProto(), ignore_unknown_fields=False)
    except json_format.ParseError as exc:  # not a ValueError: said as one, as validate() says its problems
        raise ValueError(str(exc).splitlines()[0]) from None
    Statement.copy_from_pb(proto).validate()


def canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(doc: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """DOC (a statement) as a DSSE envelope signed by SIGNER."""
    from securesystemslib.dsse import Envelope

    env = Envelope(payload=canonical(doc), payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(signer)
    return env.to_dict()


def envelope_keyids(envelope: dict[str, Any]) -> list[str]:
    return [str(s.get("keyid", "")) for s in envelope.get("signatures", []) if isinstance(s, dict)]


def verify(envelope: dict[str, Any], keys: list[SSlibKey], *, where: str) -> VerifiedStatement:
    """The statement in ENVELOPE, once a signature verifies against one of KEYS (the keys this site
    trusts) and the payload is an in-toto Statement v1. Raises CheckFailed, one line naming WHERE and
    what would make it acceptable."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    try:
        env = Envelope.from_dict(copy.deepcopy(envelope))  # from_dict consumes the dict it is given
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckFailed(f"{where}: not a DSSE envelope ({type(exc).__name__}: {exc})",
                          hint="sign it again with trace-tui") from None
    if env.payload_type != PAYLOAD_TYPE:
        raise CheckFailed(f"{where}: payloadType {env.payload_type!r}, not an in-toto statement ({PAYLOAD_TYPE})")
    signed_by = envelope_keyids(envelope)
    if not keys:
        raise CheckFailed(f"{where}: signed by key {_shown_ids(signed_by)}, and this site trusts no key",
                          hint="add the signer's public key with `trace-tui keys trust FILE`, or pass --trust-key FILE")
    try:
        accepted = env.verify(keys, 1)
    except VerificationError:
        known = {k.keyid for k in keys}
        if set(signed_by) & known:
            raise CheckFailed(f"{where}: the signature of key {_shown_ids(sorted(set(signed_by) & known))} does not "
                              "verify: the signed statement was changed after signing",
                              hint="export it again where it was made") from None
        raise CheckFailed(f"{where}: signed by key {_shown_ids(signed_by)}, which this site does not trust",
                          hint="add the signer's public key with `trace-tui keys trust FILE`, or pass --trust-key FILE"
                          ) from None
    try:
        doc = json.loads(env.payload)
        if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
            raise ValueError(f"_type is not {STATEMENT_TYPE}")
        validated(doc)
    except (ValueError, TypeError) as exc:
        raise CheckFailed(f"{where}: the signed payload is not an in-toto Statement v1 ({exc})") from None
    return VerifiedStatement(doc, next(iter(accepted)))


def _shown_ids(keyids: list[str]) -> str:
    return ", ".join(k[:16] for k in keyids) or "(none)"


def read_envelope(data: bytes, *, where: str) -> dict[str, Any]:
    """An envelope file's JSON, or one line naming WHERE."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CheckFailed(f"{where}: not valid JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or "payload" not in doc or "signatures" not in doc:
        raise CheckFailed(f"{where}: not a DSSE envelope (payload, payloadType, signatures)")
    return doc

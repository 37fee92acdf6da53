"""The SLSA predicates trace-tui writes into in-toto Statements, checked with the in-toto-attestation
library's own protobuf messages, so that what passes here parses in any tool built on them.

The library's messages are proto3: a field left out parses as empty. The fields the SLSA specifications
require are therefore checked by name after the parse.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

VSA_TYPE = "https://slsa.dev/verification_summary/v1"
PROVENANCE_TYPE = "https://slsa.dev/provenance/v1"
NAMES = {VSA_TYPE: "SLSA verification summary v1", PROVENANCE_TYPE: "SLSA provenance v1"}
VERIFICATION_RESULTS = ("PASSED", "FAILED")


def timestamp(seconds: float) -> str:
    """SECONDS since the epoch as the RFC 3339 UTC time a protobuf Timestamp reads in JSON."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_predicate(predicate_type: str, predicate: dict[str, Any]) -> None:
    """PREDICATE parsed into the library's message for PREDICATE_TYPE (no field it does not define), then its
    required fields present. ValueError names the first problem; LookupError: not a predicate type trace-tui
    checks."""
    if predicate_type == VSA_TYPE:
        _parse_vsa(predicate)
    elif predicate_type == PROVENANCE_TYPE:
        _parse_provenance(predicate)
    else:
        raise LookupError(predicate_type)


def _parse(predicate: dict[str, Any], message: Any) -> Any:
    from google.protobuf import json_format

    try:
        return json_format.ParseDict(predicate, message, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None


def vsa_levels_repeated() -> bool:
    """Whether the library's VSA message has verifiedLevels as a list, as the SLSA specification does.
    in-toto-attestation 0.9.3 declares it a single string (in-toto/attestation#425)."""
    from in_toto_attestation.predicates.vsa.v1 import vsa_pb2

    return bool(vsa_pb2.VerificationSummary.DESCRIPTOR.fields_by_name["verified_levels"].is_repeated)


def verified_levels(predicate: dict[str, Any]) -> list[str]:
    """A VSA's verifiedLevels: a list of strings, as the specification has it (a single string, as the library's
    message has it, is read as a list of one)."""
    levels = predicate.get("verifiedLevels")
    levels = [levels] if isinstance(levels, str) else levels
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and x for x in levels):
        raise ValueError(f"verifiedLevels is {levels!r}, not a list of one or more SlsaResult strings")
    return levels


def _parse_vsa(predicate: dict[str, Any]) -> None:
    from in_toto_attestation.predicates.vsa.v1 import vsa_pb2

    levels = verified_levels(predicate)
    if not vsa_levels_repeated():
        # The list was checked above, as the specification has it; the library's message, which takes one
        # string, checks every other field.
        predicate = {**predicate, "verifiedLevels": levels[0]}
    vsa = _parse(predicate, vsa_pb2.VerificationSummary())
    missing = [name for name, value in (("verifier.id", vsa.verifier.id), ("resourceUri", vsa.resource_uri),
                                        ("policy.uri", vsa.policy.uri), ("slsaVersion", vsa.slsa_version))
               if not value]
    if not vsa.HasField("time_verified"):
        missing.append("timeVerified")
    if missing:
        raise ValueError(f"required field {missing[0]} is missing")
    if vsa.verification_result not in VERIFICATION_RESULTS:
        raise ValueError(f"verificationResult is {vsa.verification_result!r}, not PASSED or FAILED")


def _parse_provenance(predicate: dict[str, Any]) -> None:
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2

    prov = _parse(predicate, provenance_pb2.Provenance())
    missing = [name for name, value in (("buildDefinition.buildType", prov.build_definition.build_type),
                                        ("runDetails.builder.id", prov.run_details.builder.id)) if not value]
    if not prov.build_definition.HasField("external_parameters"):
        missing.append("buildDefinition.externalParameters")
    if missing:
        raise ValueError(f"required field {missing[0]} is missing")
    for i, dep in enumerate(prov.build_definition.resolved_dependencies):
        if not (dep.name or dep.uri or dep.digest):
            raise ValueError(f"buildDefinition.resolvedDependencies[{i}] has no name, uri or digest")

"""A campaign's verification as an in-toto Verification Summary Attestation (SLSA VSA v1).

Subjects: the files the verification covered (trace_tui.verify.attest_subjects), with their sha256 as
they are when the summary is written. ``verifiedLevels`` is ``TRACE_TUI_CAMPAIGN_VERIFIED`` when every
check of ``verify --campaign`` passed: a level of trace-tui's own, not a SLSA build level (nothing here
says how the images or the release were built), and ``FAILED`` otherwise, as the specification asks.

The policy is the resource the campaign was held to: the release lock (model revisions, generation
settings), the campaign's resolved recipe and the image lock of the verifying machine, each named with
its sha256. The VSA message of in-toto-attestation gives a policy only a ``uri`` and a ``digest``, so
the policy document travels inside its uri as a ``data:`` URI (RFC 2397), and the digest is the sha256
of the document's bytes: the summary alone says what it was checked against.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_tui import __version__
from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.common.digest import sha256_bytes, sha256_file
from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.errors import CheckFailed, TraceTuiError
from trace_tui.images import images_lock_path
from trace_tui.resources import release_lock_path
from trace_tui.signing import envelopes, predicates
from trace_tui.signing.envelopes import Subject
from trace_tui.verify.attest_subjects import covered_files, hashed_subjects

VERIFIED_LEVEL = "TRACE_TUI_CAMPAIGN_VERIFIED"
FAILED_LEVEL = "FAILED"
SLSA_VERSION = "1.0"
POLICY_SCHEMA = "trace-tui-campaign-policy-v1"
POLICY_URI_PREFIX = "data:application/json;base64,"
CHECKS = ("campaign identity", "resolved recipe", "completeness", "receipts", "outputs", "scores recomputed",
          "pinned inputs")


def verifier_id() -> str:
    return f"urn:trace-tui:verifier:{__version__}"


@dataclass(frozen=True)
class NamedFile:
    """A file the policy names, by its name and sha256."""

    name: str
    sha256: str | None
    why_not: str = ""  # why there is no sha256 (absent, not a regular file)

    def descriptor(self) -> dict[str, Any]:
        if self.sha256 is None:
            return {"name": self.name, "notHashed": self.why_not}
        return {"name": self.name, "digest": {"sha256": self.sha256}}


def policy_document(*, release_lock: NamedFile, recipe: NamedFile, config_sha256: str | None,
                    images_lock: NamedFile | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": POLICY_SCHEMA, "verifier": verifier_id(), "checks": list(CHECKS),
                           "releaseLock": release_lock.descriptor(), "recipe": recipe.descriptor()}
    if config_sha256:
        doc["recipe"]["configSha256"] = config_sha256
    # The machine that verifies may have built no images (a reviewer's laptop): then none was compared.
    doc["imagesLock"] = images_lock.descriptor() if images_lock is not None else None
    return doc


def policy_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def policy_descriptor(doc: dict[str, Any]) -> dict[str, Any]:
    data = policy_bytes(doc)
    return {"uri": POLICY_URI_PREFIX + base64.b64encode(data).decode(), "digest": {"sha256": sha256_bytes(data)}}


def read_policy(descriptor: dict[str, Any]) -> dict[str, Any]:
    """The policy document a VSA's policy descriptor carries, its digest checked. ValueError names the problem
    (LookupError: a policy named by an ordinary URI, whose document is not at hand)."""
    uri = str(descriptor.get("uri", ""))
    if not uri.startswith(POLICY_URI_PREFIX):
        raise LookupError(uri)
    try:
        data = base64.b64decode(uri[len(POLICY_URI_PREFIX):], validate=True)
        doc = json.loads(data)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"policy.uri holds no JSON document ({type(exc).__name__})") from None
    want = (descriptor.get("digest") or {}).get("sha256")
    if want != sha256_bytes(data):
        raise ValueError(f"policy.digest sha256 {want} is not the sha256 of the document its uri holds "
                         f"({sha256_bytes(data)})")
    if not isinstance(doc, dict):
        raise ValueError("policy.uri holds no JSON object")
    return doc


def vsa_predicate(*, passed: bool, resource_uri: str, policy: dict[str, Any], when: float) -> dict[str, Any]:
    return {
        "verifier": {"id": verifier_id()},
        "timeVerified": predicates.timestamp(when),
        "resourceUri": resource_uri,
        "policy": policy,
        "verificationResult": "PASSED" if passed else "FAILED",
        "verifiedLevels": [VERIFIED_LEVEL if passed else FAILED_LEVEL],
        "slsaVersion": SLSA_VERSION,
    }


def campaign_vsa(subjects: list[Subject], *, passed: bool, campaign: Path, policy_doc: dict[str, Any],
                 when: float) -> dict[str, Any]:
    """The summary as an in-toto Statement v1, built and validated by the library, its predicate too."""
    predicate = vsa_predicate(passed=passed, resource_uri=campaign.resolve().as_uri(),
                              policy=policy_descriptor(policy_doc), when=when)
    predicates.check_predicate(predicates.VSA_TYPE, predicate)
    return envelopes.statement(subjects, predicates.VSA_TYPE, predicate)


def campaign_policy(root: Path) -> dict[str, Any]:
    """The policy document of ROOT's verification: the release lock trace-tui ships, the campaign's recipe.json
    (and the config_sha256 it records) and this machine's image lock when it has one."""
    release = release_lock_path()
    try:
        digest = Folder(root, name="the campaign").sha256(RECIPE_FILE)
        recipe = NamedFile(RECIPE_FILE, digest, "" if digest else "absent")
    except NotRead as exc:
        recipe = NamedFile(RECIPE_FILE, None, exc.reason)
    try:
        config_sha256 = read_campaign_recipe(root).get("config_sha256")
    except TraceTuiError:
        config_sha256 = None
    images = images_lock_path()
    return policy_document(release_lock=NamedFile(release.name, sha256_file(release)),
                           recipe=recipe,
                           config_sha256=config_sha256 if isinstance(config_sha256, str) else None,
                           images_lock=NamedFile(images.name, sha256_file(images)) if images.is_file() else None)


def campaign_summary(root: Path, *, passed: bool, when: float) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(the VSA statement of ROOT's verification, [(file, why it is not a subject)] for the covered files that
    could not be hashed: absent, or not a regular file inside the campaign)."""
    subjects, left = hashed_subjects(root, covered_files(root))
    if not subjects:
        raise CheckFailed(f"--campaign {root}: none of the files a verification covers is there to summarize",
                          hint="give a campaign a `trace-tui --recipe` run wrote")
    return campaign_vsa(subjects, passed=passed, campaign=root, policy_doc=campaign_policy(root), when=when), left

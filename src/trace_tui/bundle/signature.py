"""The bundle's signature: an in-toto Statement whose subjects are the manifest, every file (the image
archives among them), every image (by id) and every store entry (by its sha256set), in a DSSE envelope
signed with the exporting home's key (``manifest.dsse.json``, beside the manifest).

An import verifies the envelope against the keys the site trusts before it reads anything else, then
holds the bundle to it: the manifest's bytes, and every file, image and entry the manifest names, must
be exactly the signed subjects. Images and hub-stated entries enter a site only from a bundle whose
signature verified.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui import __version__
from trace_tui.bundle.files import MANIFEST, REEXPORT, BundleManifest, _read_bundle_file, shown
from trace_tui.common.digest import sha256_bytes
from trace_tui.errors import CheckFailed
from trace_tui.signing import envelopes
from trace_tui.signing.envelopes import Subject, VerifiedStatement
from trace_tui.signing.keys import short

if TYPE_CHECKING:  # pragma: no cover
    from securesystemslib.signer import Signer, SSlibKey

SIGNATURE = "manifest.dsse.json"
PUBLIC_KEY_FILE = "signing-key.pub.json"  # the signer's public key, carried for the operator to look at
PREDICATE_TYPE = "urn:trace-tui:bundle:v1"
SIGNATURE_LIMIT = 512 << 20
IMAGE, ENTRY = "image:", "entry:"


def bundle_subjects(manifest_bytes: bytes, manifest: BundleManifest, entry_sets: dict[str, str]) -> list[Subject]:
    """What a bundle's signature vouches for: the manifest's bytes, every file, image and entry."""
    subjects = [Subject(MANIFEST, {"sha256": sha256_bytes(manifest_bytes)})]
    subjects += [Subject(rel, {"sha256": f.sha256}) for rel, f in sorted(manifest.files.items())]
    subjects += [Subject(IMAGE + name, {"sha256": image_id.removeprefix("sha256:")})
                 for name, image_id in sorted(manifest.images.items())]
    subjects += [Subject(ENTRY + name, {"sha256": entry_sets[name].removeprefix("sha256set:")})
                 for name in sorted(manifest.entries)]
    return subjects


def write_signature(dest: Path, manifest_bytes: bytes, manifest: BundleManifest, entry_sets: dict[str, str],
                    trust: dict[str, str], signer: Signer) -> None:
    """Sign the bundle in DEST (its manifest already written as MANIFEST_BYTES). TRUST: each entry's trust
    level at the exporting site, carried in the predicate for the importing site to show."""
    predicate = {"recipe": manifest.recipe, "traceTuiVersion": __version__, "entryTrust": dict(sorted(trust.items()))}
    doc = envelopes.statement(bundle_subjects(manifest_bytes, manifest, entry_sets), PREDICATE_TYPE, predicate)
    envelope = envelopes.sign(doc, signer)
    (dest / SIGNATURE).write_text(json.dumps(envelope, indent=1) + "\n", encoding="utf-8")


def verify_signature(src: Path, keys: list[SSlibKey]) -> VerifiedStatement:
    """The bundle's signed statement, once its envelope verifies against one of KEYS."""
    where = str(src / SIGNATURE)
    envelope = envelopes.read_envelope(_read_bundle_file(src, SIGNATURE, limit=SIGNATURE_LIMIT), where=where)
    verified = envelopes.verify(envelope, keys, where=where)
    if verified.predicate_type != PREDICATE_TYPE:
        raise CheckFailed(f"{where}: a statement of type {shown(verified.predicate_type)}, not a trace-tui bundle's "
                          f"({PREDICATE_TYPE})", hint=REEXPORT)
    return verified


def hold_to_signature(src: Path, verified: VerifiedStatement, manifest_bytes: bytes, manifest: BundleManifest) -> None:
    """The manifest, its files, images and entries are exactly the signed subjects (entries' sets are
    held to it once their records are read: check_entry_set)."""
    signed = verified.subjects()
    digest = sha256_bytes(manifest_bytes)
    if signed.get(MANIFEST, {}).get("sha256") != digest:
        raise CheckFailed(f"{src / MANIFEST}: changed after signing (sha256 {digest}, signed "
                          f"{signed.get(MANIFEST, {}).get('sha256', 'absent')})", hint=REEXPORT)
    expected = {s.name: s.digest for s in bundle_subjects(manifest_bytes, manifest, {e: "" for e in manifest.entries})}
    for name in sorted(set(expected) | set(signed)):
        if name.startswith(ENTRY):
            if (name in expected) != (name in signed):
                raise CheckFailed(f"{src / MANIFEST}: store entry {shown(name[len(ENTRY):])} is "
                                  f"{'not signed' if name in expected else 'signed but not in the manifest'}",
                                  hint=REEXPORT)
            continue
        if expected.get(name) != signed.get(name):
            what = "image" if name.startswith(IMAGE) else "file"
            raise CheckFailed(f"{src / MANIFEST}: {what} {shown(name.removeprefix(IMAGE))} is "
                              f"{_shown_digest(expected.get(name))}, signed {_shown_digest(signed.get(name))}",
                              hint=REEXPORT)


def check_entry_set(src: Path, verified: VerifiedStatement, entry: str, sha256set: str) -> None:
    signed = verified.subjects().get(ENTRY + entry, {}).get("sha256")
    if signed != sha256set.removeprefix("sha256set:"):
        raise CheckFailed(f"{src / 'store'}: store entry {shown(entry)} has {shown(sha256set)}, signed "
                          f"sha256set:{signed}", hint=REEXPORT)


def _shown_digest(digest: dict[str, str] | None) -> str:
    if not digest:
        return "absent"
    return ", ".join(f"{alg} {value}" for alg, value in sorted(digest.items()))


def signed_by(verified: VerifiedStatement) -> str:
    return short(verified.keyid)

"""A training checkpoint signed with OpenSSF model signing (the ``model_signing`` library) and the home's
ECDSA key.

The signature (a Sigstore bundle) is written into the checkpoint folder as ``model.sig``, the name
``model_signing sign`` gives it by default, and is left out of what it signs; so the folder travels
with its signature, and ``model_signing verify key --signature CKPT/model.sig --public_key
HOME/keys/signing-key.pub.pem CKPT`` checks it wherever it is copied. Only the private key's path is
handed to the library: the key itself is never read into a message or a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trace_tui.errors import CheckFailed
from trace_tui.signing.keys import KeyFiles, public_key_of

SIGNATURE_FILE = "model.sig"


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Path
    signature: Path
    keyid: str


class CheckpointSigner:
    """Signs checkpoint folders with the key of HOME (which has one: see ``checkpoint_signer``)."""

    def __init__(self, home: Path) -> None:
        self.private_key = KeyFiles.of(home).private
        self.keyid = public_key_of(home).keyid

    def sign(self, folder: Path) -> SignedCheckpoint:
        from model_signing import hashing, signing

        signature = folder / SIGNATURE_FILE
        hashing_config = hashing.Config().set_ignored_paths(paths=[SIGNATURE_FILE], ignore_git_paths=True)
        try:
            (signing.Config().use_elliptic_key_signer(private_key=self.private_key)
             .set_hashing_config(hashing_config).sign(folder, signature))
        except (OSError, ValueError, TypeError) as exc:
            raise CheckFailed(f"{folder}: model_signing could not sign the checkpoint ({type(exc).__name__}: {exc})",
                              hint="check the key with `trace-tui keys show`, then run the same command again") \
                from None
        return SignedCheckpoint(folder, signature, self.keyid)


def checkpoint_signer(home: Path) -> CheckpointSigner | None:
    """The signer of HOME's key; None when the home has none (`trace-tui keys init` makes one)."""
    files = KeyFiles.of(home)
    if not (files.private.is_file() and files.public.is_file()):
        return None
    return CheckpointSigner(home)

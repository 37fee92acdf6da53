"""The appliance's signing key and the keys a site trusts (securesystemslib keys).

A home keeps one private key (``keys/signing-key.pem``, 0600, never copied into a bundle, a campaign
or a log): ECDSA on P-256, the curve both securesystemslib's DSSE signatures and OpenSSF model
signing (``model_signing sign key``) accept, so that one key signs bundles, attestations and
checkpoints. Its public half is written twice: ``keys/signing-key.pub.json`` (the securesystemslib
key with its keyid, the file another site adds to its trusted keys) and ``keys/signing-key.pub.pem``
(what ``model_signing verify key --public_key`` reads). The keys a site trusts are the public key
files in ``trusted-keys/`` and any the operator names on the command line (``--trust-key``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.common.atomic import atomic_write_bytes
from trace_tui.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from securesystemslib.signer import CryptoSigner, SSlibKey

PRIVATE_KEY = Path("keys") / "signing-key.pem"
PUBLIC_KEY = Path("keys") / "signing-key.pub.json"
PUBLIC_PEM = Path("keys") / "signing-key.pub.pem"
TRUSTED_KEYS = Path("trusted-keys")
KEY_LIMIT = 64 << 10  # a public key file is a few hundred bytes


@dataclass(frozen=True)
class KeyFiles:
    """Where a home keeps its signing key."""

    private: Path
    public: Path
    public_pem: Path

    @classmethod
    def of(cls, home: Path) -> KeyFiles:
        return cls(home / PRIVATE_KEY, home / PUBLIC_KEY, home / PUBLIC_PEM)


def short(keyid: str) -> str:
    """A keyid as messages show it (its first 16 hex digits, like an image id's short form)."""
    return keyid[:16]


def init_key(home: Path, *, replace: bool = False) -> SSlibKey:
    """Make this home's signing key (ECDSA P-256); an existing key is kept unless REPLACE (a new key
    invalidates every site's trust in the old one, so that is a decision, not a default)."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.signer import CryptoSigner

    files = KeyFiles.of(home)
    if files.private.exists() and not replace:
        raise UsageError(f"{files.private} already exists (key {short(public_key_of(home).keyid)})",
                         hint="keep it, or pass --replace to make a new one (sites that trust the old key must "
                              "then trust the new one)")
    signer = CryptoSigner.generate_ecdsa()
    private_key = signer._private_key  # noqa: SLF001 - the key object CryptoSigner wraps
    pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    files.private.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(files.private.parent, 0o700)
    _write_private(files.private, pem)
    public = signer.public_key
    atomic_write_bytes(files.public, public_key_json(public))
    atomic_write_bytes(files.public_pem, private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return public


def _write_private(path: Path, pem: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def public_key_json(key: SSlibKey) -> bytes:
    """A public key file's bytes, as `keys init` writes it and `keys trust` reads it."""
    return (json.dumps({"keyid": key.keyid, **key.to_dict()}, indent=2, sort_keys=True) + "\n").encode()


def load_signer(home: Path, key_path: Path | None = None) -> CryptoSigner:
    """The signer for this home's key (or the private key file KEY_PATH)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from securesystemslib.signer import CryptoSigner

    path = key_path or KeyFiles.of(home).private
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no signing key there",
                         hint="make one with `trace-tui keys init`" if key_path is None else "name a PEM private key "
                              "file `trace-tui keys init` wrote") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path}: not an unencrypted PEM private key ({exc})",
                         hint="name the signing-key.pem `trace-tui keys init` wrote") from None
    if not isinstance(private, (Ed25519PrivateKey, ec.EllipticCurvePrivateKey)):
        raise UsageError(f"{path}: a {type(private).__name__.removeprefix('_')}, not an ECDSA or ed25519 key",
                         hint="make one with `trace-tui keys init`")
    return CryptoSigner(private)


def public_key_of(home: Path) -> SSlibKey:
    return read_public_key(KeyFiles.of(home).public)


def read_public_key(path: Path) -> SSlibKey:
    """A public key file: the JSON `keys init` writes (securesystemslib's key with its keyid), or a PEM
    public key. One line naming the file when it is neither."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.signer import SSlibKey

    try:
        with open(path, "rb") as fh:
            data = fh.read(KEY_LIMIT + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read as a public key ({exc.strerror or exc})",
                         hint="name the signing-key.pub.json of the site that signed") from None
    if len(data) > KEY_LIMIT:
        raise UsageError(f"{path}: larger than a public key file", hint="name a signing-key.pub.json")
    if b"PRIVATE KEY" in data[:256]:
        raise UsageError(f"{path}: a private key; a site trusts the public half",
                         hint="name signing-key.pub.json, never signing-key.pem")
    if data.lstrip().startswith(b"-----BEGIN"):
        try:
            return SSlibKey.from_crypto(serialization.load_pem_public_key(data))
        except (ValueError, TypeError) as exc:
            raise UsageError(f"{path}: not a PEM public key ({exc})") from None
    try:
        doc = json.loads(data)
        keyid = doc.pop("keyid")
        key = SSlibKey.from_dict(keyid, doc)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: not a public key file (a securesystemslib key with its keyid, or PEM): "
                         f"{type(exc).__name__} {exc}", hint="name the signing-key.pub.json `keys init` wrote") from None
    if key.keyid != _keyid(key):
        raise UsageError(f"{path}: keyid {short(keyid)} is not the key's own ({short(_keyid(key))})",
                         hint="a key file whose keyid was edited is not trusted")
    return key


def _keyid(key: SSlibKey) -> str:
    """securesystemslib's default keyid: the sha256 of the key's canonical JSON."""
    import hashlib

    from securesystemslib.formats import encode_canonical

    return hashlib.sha256(encode_canonical(key.to_dict()).encode()).hexdigest()


def trusted_keys(home: Path, extra: list[Path] | tuple[Path, ...] = ()) -> list[SSlibKey]:
    """The keys this site trusts: each public key file in HOME/trusted-keys, then EXTRA (--trust-key)."""
    folder = home / TRUSTED_KEYS
    paths = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    keys = [read_public_key(p) for p in [*paths, *extra]]
    seen: dict[str, SSlibKey] = {}
    for key in keys:
        seen.setdefault(key.keyid, key)
    return list(seen.values())


def trust_key(home: Path, path: Path) -> SSlibKey:
    """Add the public key file PATH to this site's trusted keys (named by its keyid)."""
    key = read_public_key(path)
    dest = home / TRUSTED_KEYS / f"{key.keyid}.pub.json"
    atomic_write_bytes(dest, public_key_json(key))
    return key


def site_keys(home: Path, extra: list[Path] | tuple[Path, ...] = ()) -> list[SSlibKey]:
    """What an import on this home trusts: its trusted keys, EXTRA (--trust-key), and its own public key
    (a bundle this home exported comes back to it)."""
    own = [KeyFiles.of(home).public] if KeyFiles.of(home).public.is_file() else []
    return trusted_keys(home, [*extra, *own])


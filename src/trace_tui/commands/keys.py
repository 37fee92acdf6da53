"""`trace-tui keys init|show|trust FILE`: the signing key a home signs bundles and attestations with, and
the keys a site trusts."""

from __future__ import annotations

import argparse
from pathlib import Path

from trace_tui.commands.arguments import non_empty
from trace_tui.paths import home
from trace_tui.signing import keys


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    i = sub.add_parser("init", help="make this home's signing key (ECDSA P-256, HOME/keys/)")
    i.add_argument("--replace", action="store_true", help="make a new key even though one exists")
    sub.add_parser("show", help="this home's public key and the keys it trusts")
    t = sub.add_parser("trust", help="trust the public key FILE (another site's signing-key.pub.json)")
    t.add_argument("file", metavar="FILE", type=non_empty)
    for sp in sub.choices.values():
        sp.add_argument("--home", metavar="DIR", type=non_empty, help="trace-tui home (default $TRACE_TUI_HOME)")


def run(args: argparse.Namespace) -> int:
    root = home(args.home)
    if args.keys_command == "init":
        key = keys.init_key(root, replace=args.replace)
        files = keys.KeyFiles.of(root)
        print(f"signing key {keys.short(key.keyid)} made: {files.private} (private: never copy it into a bundle "
              f"or a log); give sites {files.public} to trust (`trace-tui keys trust FILE` there)")
        return 0
    if args.keys_command == "trust":
        key = keys.trust_key(root, Path(args.file))
        print(f"trusted key {keys.short(key.keyid)} ({key.keytype}) from {args.file}: bundles and attestations it "
              f"signed are accepted here ({root / keys.TRUSTED_KEYS})")
        return 0
    files = keys.KeyFiles.of(root)
    if files.public.exists():
        print(f"signing key {keys.public_key_of(root).keyid} ({files.public})")
    else:
        print(f"no signing key in {root / 'keys'} (make one with `trace-tui keys init`)")
    trusted = keys.trusted_keys(root)
    print(f"trusted keys ({root / keys.TRUSTED_KEYS}): " + (", ".join(k.keyid for k in trusted) or "none"))
    return 0

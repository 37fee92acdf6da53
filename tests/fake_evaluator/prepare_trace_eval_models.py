"""Test stand-in for the release's prepare_trace_eval_models.py: register-local and verify.

A model directory carries a .trace_model_revision.json marker (slug, source,
immutable revision, file -> sha256 map). register-local writes it for --path;
verify checks every marker under --model-root (--only SLUG ...) against its files.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

MARKER = ".trace_model_revision.json"

p = argparse.ArgumentParser()
sub = p.add_subparsers(dest="cmd", required=True)
reg = sub.add_parser("register-local")
for a in ("--model-root", "--slug", "--path", "--revision", "--source"):
    reg.add_argument(a, required=True)
ver = sub.add_parser("verify")
ver.add_argument("--model-root", required=True)
ver.add_argument("--only", nargs="+", default=None)
ver.add_argument("--deep", action="store_true")
args = p.parse_args()


def files(d: Path) -> dict:
    return {str(f.relative_to(d)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(d.rglob("*")) if f.is_file() and f.name != MARKER}


if args.cmd == "register-local":
    d = Path(args.path)
    if not d.is_dir() or not any(d.iterdir()):
        sys.exit(f"{d}: not a model directory")
    (d / MARKER).write_text(json.dumps({"slug": args.slug, "source": args.source, "revision": args.revision,
                                        "files": files(d)}, indent=1, sort_keys=True))
    print(f"registered {args.slug} at {d}")
    sys.exit(0)

root = Path(args.model_root)
slugs = args.only or sorted(p.name for p in root.iterdir() if p.is_dir())
records, ok = [], True
for slug in slugs:
    marker = root / slug / MARKER
    if not marker.is_file():
        records.append({"slug": slug, "ok": False, "problem": "no revision marker"})
        ok = False
        continue
    data = json.loads(marker.read_text())
    good = data["slug"] == slug and set(data["files"]) == set(files(root / slug)) and \
        (not args.deep or data["files"] == files(root / slug))
    records.append({"slug": slug, "ok": good})
    ok &= good
print(json.dumps({"ok": ok, "records": records}))
sys.exit(0 if ok else 1)

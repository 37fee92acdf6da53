"""What a campaign's files say when its state database cannot: receipts are the record of finished work.

- ``check_campaign_dir``: a ``--campaign`` that cannot hold a campaign is one clear line, early.
- ``receipt_rows``: job and slice rows rebuilt from the receipts whose outputs are intact, for a
  state database that was deleted or emptied (never a silent start from scratch).
- ``supersede`` / ``restore``: finished outputs whose inputs changed are moved aside, kept and
  listed under ``superseded/``, and can be put back; nothing finished is deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from trace_tui.common.digest import sha256_file_size, sha256_json
from trace_tui.common.safe_write import NotWritten, check_not_link, directory_inside, open_append
from trace_tui.errors import UsageError

SUPERSEDED = "superseded"
INDEX = "index.jsonl"


def check_campaign_dir(path: Path) -> None:
    """UsageError naming ``path`` when it exists but is not a writable directory."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"--campaign {path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a file" if stat.S_ISREG(st.st_mode) else "not a directory"
        raise UsageError(f"--campaign {path}: is {kind}, not a campaign directory",
                         hint="name a directory (it is created when missing)")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--campaign {path}: directory is not writable",
                         hint="choose a writable directory, or fix its permissions")
    check_no_planted_links(Path(path))


# What the runner writes at a campaign's top: files it opens (appends to, locks, opens as SQLite) and
# folders it writes under. A link in any of these places (a dangling one too) would have the runner
# write outside the campaign; each deeper path is checked where it is written (trace_tui.common.safe_write).
CAMPAIGN_FILES = (".lock", "state.sqlite", "state.sqlite-wal", "state.sqlite-shm", "state.sqlite-journal",
                  "events.jsonl", "runner.log", "campaign.json", "recipe.json")
CAMPAIGN_FOLDERS = ("jobs", "outputs", "logs", "receipts", SUPERSEDED)


def check_no_planted_links(path: Path) -> None:
    """UsageError naming the first of the campaign's own files or folders that is a link or not what it must
    be: the runner writes into a campaign only in place."""
    try:
        for name in CAMPAIGN_FILES:
            check_not_link(path / name)
        for name in CAMPAIGN_FOLDERS:
            if os.path.lexists(path / name):
                directory_inside(path, name, create=False)
    except NotWritten as exc:
        raise UsageError(str(exc), hint="a campaign handed over is data: its files are written only in place") from None


def _outputs_intact(root: Path, outputs: dict[str, Any]) -> bool:
    for rel, want in outputs.items():
        path = (root / rel).resolve()
        if root not in path.parents or not path.is_file():
            return False
        digest, size = sha256_file_size(path)
        if digest != want.get("sha256") or size != want.get("bytes", size):
            return False
    return True


def receipt_rows(root: Path, receipts: list[Path] | None = None) -> tuple[list[dict], list[dict]]:
    """(job rows, slice rows) for every intact receipt (its own hash and every output's sha256 agree)."""
    jobs: list[dict] = []
    slices: list[dict] = []
    now = time.time()
    for path in sorted(receipts if receipts is not None else (root / "receipts").rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            content = data["content"]
            if sha256_json(content) != data.get("content_sha256"):
                continue
            if not _outputs_intact(root, content.get("outputs") or {}):
                continue
            jobs.append({"step": content["step"], "slice": content["slice"], "model": content.get("model"),
                         "seed": content.get("seed"), "benchmark": content.get("benchmark"),
                         "input_hash": content["input_hash"],
                         "inputs": json.dumps(content.get("inputs") or {}, sort_keys=True),
                         "done": int(content.get("rows") or 0), "total": int(content.get("total") or 0),
                         "score": content.get("score"), "receipt": path.relative_to(root).as_posix(), "now": now})
            for name, sub in (content.get("slices") or {}).items():
                slices.append({"step": content["step"], "slice": name, "model": sub.get("model"),
                               "seed": sub.get("seed"), "benchmark": sub.get("benchmark"),
                               "input_hash": sub["input_hash"], "inputs": "{}", "done": int(sub.get("rows") or 0),
                               "total": int(sub.get("total") or 0), "score": sub.get("score"), "now": now})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # an unreadable or foreign receipt restores nothing; its job runs again
    return jobs, slices


def supersede(root: Path, stamp: str, step: str, slice_rel: str, output_rel: str, receipt: Path,
              changes: list[str]) -> list[str]:
    """Move a job's outputs and receipt to superseded/STAMP/ (same layout) and list them in the index."""
    moved: list[str] = []
    base = root / SUPERSEDED / stamp
    for src in (root / output_rel, receipt):
        if not os.path.lexists(src):
            continue
        rel = src.relative_to(root)
        dst = base / rel
        directory_inside(root, dst.parent.relative_to(root))  # never into a folder linked out
        if dst.exists():
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        os.replace(src, dst)
        moved.append(rel.as_posix())
    if moved:
        with open_append(root / SUPERSEDED / INDEX) as fh:
            fh.write(json.dumps({"stamp": stamp, "step": step, "slice": slice_rel, "moved": moved,
                                 "changes": changes, "at": time.time()}, sort_keys=True) + "\n")
    return moved


def superseded(root: Path) -> list[dict]:
    """Every set of superseded outputs still kept, oldest first."""
    index = root / SUPERSEDED / INDEX
    out = []
    try:
        lines = index.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if any((root / SUPERSEDED / entry["stamp"] / m).exists() for m in entry.get("moved", [])):
            out.append(entry)
    return out


def restore(root: Path, stamp: str) -> list[Path]:
    """Put the outputs and receipts superseded at ``stamp`` back in place (what is there now is
    superseded in turn, never deleted). Returns the restored receipts (for the state rows)."""
    base = root / SUPERSEDED / stamp
    if not base.is_dir():
        raise UsageError(f"{base}: no superseded outputs under this name",
                         hint="`trace-tui status --campaign DIR` lists them")
    now_stamp = f"restore-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    receipts: list[Path] = []
    for entry in [e for e in superseded(root) if e["stamp"] == stamp]:
        for rel in entry["moved"]:
            src, dst = base / rel, root / rel
            if dst.exists():
                supersede(root, now_stamp, entry["step"], entry["slice"], rel, root / "__none__",
                          [f"replaced by the outputs restored from {stamp}"])
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            if rel.startswith("receipts/"):
                receipts.append(dst)
    return receipts

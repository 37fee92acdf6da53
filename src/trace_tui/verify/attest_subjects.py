"""The files of a campaign that attestations name: what ``verify --campaign`` covered, and each step's
receipt with the outputs it lists.

A Slurm parent is its own files and each shard's, named by their path in the parent
(``shards/ID/...``), so that a statement's subjects are re-hashed from the parent alone. Per-row
files (``rows/NNNNNN.json`` of a generate or extract job, 1.6 million in a full campaign) are left
out of a verification summary's subjects: each receipt, itself a subject, holds their sha256.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trace_tui.campaign_files.recipe_file import RECIPE_FILE
from trace_tui.campaign_files.shard_files import MERGED_FILE, is_sharded, read_plan, shard_dir
from trace_tui.campaign_files.shards import PLAN_FILE
from trace_tui.campaign_files.state import read_campaign_json, read_snapshot
from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.errors import CheckFailed, TraceTuiError
from trace_tui.signing.envelopes import Subject
from trace_tui.verify.campaign import IDENTITY_FILE, RECEIPT_LIMIT, locate

ROWS_FOLDER = "rows"


@dataclass(frozen=True)
class CampaignPart:
    """A campaign with a state of its own: the campaign itself, or one shard of a Slurm parent."""

    prefix: str  # "" or "shards/ID/": what names its files from the top of the campaign
    root: Path


@dataclass(frozen=True)
class JobReceipt:
    """A completed job's receipt as read from a campaign part (``content`` None: it could not be read)."""

    part: CampaignPart
    job: Any  # campaign_files.state.JobRecord
    rel: str  # the receipt, inside the part
    content: dict[str, Any] | None
    receipt: dict[str, Any] | None

    @property
    def name(self) -> str:
        return self.part.prefix + self.rel


def campaign_parts(root: Path) -> list[CampaignPart]:
    """The campaign, or each shard of a Slurm parent that ran (a shard folder that is a link, or a plan that
    cannot be read, is left out: ``verify --campaign`` fails them)."""
    if not is_sharded(root) or os.path.lexists(root / "state.sqlite"):
        return [CampaignPart("", root)]
    try:
        shards = read_plan(root).shards
    except CheckFailed:
        return []
    parts = []
    for shard in shards:
        try:
            where = shard_dir(root, shard)
        except CheckFailed:
            continue
        if where is not None and os.path.lexists(where / "state.sqlite"):
            parts.append(CampaignPart(f"{where.relative_to(root).as_posix()}/", where))
    return parts


def job_receipts(part: CampaignPart) -> list[JobReceipt]:
    """Each completed job of PART whose receipt lies inside it, in the state's order, with its content ([] when
    its state cannot be read: ``verify --campaign`` fails that part, naming why)."""
    try:
        _meta, _steps, jobs, _subs = read_snapshot(part.root)
    except (TraceTuiError, sqlite3.Error):
        return []
    out = []
    for job in jobs:
        if job.state != "completed" or not job.receipt:
            continue
        path, _why = locate(part.root.resolve(), job.receipt)
        if path is None:
            continue
        try:
            receipt = read_campaign_json(path, limit=RECEIPT_LIMIT)
        except (FileNotFoundError, CheckFailed):
            receipt = None
        content = receipt.get("content") if isinstance(receipt, dict) else None
        out.append(JobReceipt(part, job, job.receipt, content if isinstance(content, dict) else None,
                              receipt if isinstance(receipt, dict) else None))
    return out


def listed_outputs(content: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    outputs = content.get("outputs") if content else None
    return {k: v if isinstance(v, dict) else {} for k, v in outputs.items() if isinstance(k, str)} \
        if isinstance(outputs, dict) else {}


def is_row_file(rel: str) -> bool:
    return PurePosixPath(rel).parent.name == ROWS_FOLDER


def covered_files(root: Path) -> list[str]:
    """Campaign-relative: the identity, the resolved recipe (a Slurm parent's plan and merged view), each completed
    job's receipt and every output it lists but the per-row files; sorted, each once."""
    names = {IDENTITY_FILE, RECIPE_FILE}
    if is_sharded(root) and not os.path.lexists(root / "state.sqlite"):
        names |= {PLAN_FILE, MERGED_FILE}
    for part in campaign_parts(root):
        if part.prefix:
            names |= {part.prefix + IDENTITY_FILE, part.prefix + RECIPE_FILE}
        for r in job_receipts(part):
            names.add(r.name)
            names |= {part.prefix + rel for rel in listed_outputs(r.content) if not is_row_file(rel)}
    return sorted(names)


def hashed_subjects(root: Path, names: list[str]) -> tuple[list[Subject], list[tuple[str, str]]]:
    """(a subject with its sha256 for each of NAMES that is a regular file inside ROOT, [(name, why not)] for the
    others: absent, a link out of the campaign, a FIFO...)."""
    folder = Folder(root, name="the campaign")
    subjects: list[Subject] = []
    left: list[tuple[str, str]] = []
    for name in names:
        try:
            digest = folder.sha256(name)
        except NotRead as exc:
            left.append((name, exc.reason))
            continue
        if digest is None:
            left.append((name, "absent"))
        else:
            subjects.append(Subject(name, {"sha256": digest}))
    return subjects, left

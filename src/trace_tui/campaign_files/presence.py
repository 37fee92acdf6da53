"""Whether a finished job's receipt and outputs are still there as it left them: presence and sizes, cheaply.

`status` says COMPLETE and a resume skips a job only when this holds; `verify --campaign` is the full check
(every byte hashed). When a job's receipt is written, ``presence_record`` notes what to look at later, in the
state database (table ``presence``): the receipt's size; the size of each output in a folder of few outputs
(score.json, a worker's receipt); and for each folder of many (a step's rows/) how many entries it held and its
modification time. ``presence_problem`` then costs a few stat calls per job, not one per row: a folder whose
modification time is unchanged has had no entry added, removed or renamed since (the kernel sets it on each),
so only a folder whose time moved (or a campaign copied without its times) is listed and its entries counted.

Pure functions over paths and records, and the two queries of the ``presence`` table; no engine state.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FEW = 16  # outputs in a folder up to which each one's size is checked; above, the folder's entries are counted

PRESENCE_SCHEMA = """
CREATE TABLE IF NOT EXISTS presence (
    step TEXT NOT NULL, slice TEXT NOT NULL, receipt TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (step, slice));
"""


def presence_record(campaign: Path, receipt_rel: str, outputs: dict[str, dict[str, Any]],
                    input_hash: str) -> dict[str, Any]:
    """What to look at later to know the job's receipt and outputs are still as written (``outputs``: the
    receipt's campaign-relative path -> {"sha256", "bytes"}; ``input_hash``: the job's, which the record is for)."""
    campaign = Path(campaign)
    by_folder: dict[str, list[str]] = {}
    for rel in outputs:
        by_folder.setdefault(rel.rsplit("/", 1)[0] if "/" in rel else "", []).append(rel)
    files: dict[str, int] = {}
    folders: dict[str, list[int]] = {}
    for folder, rels in by_folder.items():
        if len(rels) <= FEW:
            files.update({rel: int(outputs[rel].get("bytes", -1)) for rel in rels})
        else:
            where = campaign / folder
            folders[folder] = [os.stat(where).st_mtime_ns, len(os.listdir(where))]
    return {"receipt_bytes": os.stat(campaign / receipt_rel).st_size, "files": files, "folders": folders,
            "input_hash": input_hash}


def presence_problem(campaign: Path, receipt_rel: str, record: dict[str, Any] | None) -> str | None:
    """Why the job's receipt or outputs are not as written (missing, another size, entries added or removed), in
    a few words; None when they look intact. Without a record (a campaign of an older trace-tui, or a state rebuilt
    from its receipts) only the receipt is looked at: present, and ending as a written JSON file ends."""
    top = f"{campaign}/"  # plain strings: a campaign has thousands of jobs, and pathlib costs more than a stat
    try:
        size = os.stat(top + receipt_rel).st_size
    except FileNotFoundError:
        return f"receipt {receipt_rel} is missing"
    except OSError as exc:
        return f"receipt {receipt_rel} cannot be read ({exc.strerror or exc})"
    if record is None:
        return None if _ends_as_json(top + receipt_rel, size) else f"receipt {receipt_rel} is cut short"
    if size != record.get("receipt_bytes"):
        return f"receipt {receipt_rel} is {size} bytes, not the {record.get('receipt_bytes')} written"
    for rel, want in (record.get("files") or {}).items():
        try:
            got = os.stat(top + rel).st_size
        except OSError:
            return f"output {rel} is missing"
        if got != want:
            return f"output {rel} is {got} bytes, not the {want} written"
    for folder, (mtime_ns, entries) in (record.get("folders") or {}).items():
        where = top + folder
        try:
            if os.stat(where).st_mtime_ns == mtime_ns:
                continue  # no entry added, removed or renamed since the receipt
            now = len(os.listdir(where))
        except OSError:
            return f"output folder {folder} is missing"
        if now != entries:
            return f"output folder {folder} holds {now} entries, not the {entries} written"
    return None


def _ends_as_json(path: str, size: int) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.pread(fd, 2, max(0, size - 2)).rstrip(b"\n").endswith(b"}")
    finally:
        os.close(fd)


def store_presence(db: sqlite3.Connection, step: str, slice_: str, receipt_rel: str, record: dict[str, Any]) -> None:
    db.execute(PRESENCE_SCHEMA)
    db.execute("INSERT OR REPLACE INTO presence(step, slice, receipt, record) VALUES (?, ?, ?, ?)",
               (step, slice_, receipt_rel, json.dumps(record, sort_keys=True, separators=(",", ":"))))


def read_presence(db: sqlite3.Connection) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """{(step, slice): (receipt path, record)}; empty for a campaign of an older trace-tui."""
    try:
        rows = db.execute("SELECT step, slice, receipt, record FROM presence").fetchall()
    except sqlite3.OperationalError:  # no such table
        return {}
    out = {}
    for step, slice_, receipt, record in rows:
        try:
            data = json.loads(record)
        except ValueError:
            continue  # an unreadable record: the receipt alone is looked at
        if isinstance(data, dict):
            out[(step, slice_)] = (receipt, data)
    return out


def damaged_jobs(campaign: Path, jobs: Iterable[Any],
                 records: dict[tuple[str, str], tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """{(step, slice): why} for each completed job (a JobRecord) whose receipt or outputs are not as written.
    A record made for another receipt or other inputs than the job's (a job redone since, or older outputs put
    back) does not count: then only the receipt is looked at."""
    out = {}
    for j in jobs:
        if j.state != "completed" or not j.receipt or not isinstance(j.receipt, str):
            continue
        if j.receipt.startswith("/") or ".." in j.receipt.split("/"):
            out[(j.step, j.slice)] = f"receipt path {j.receipt[:200]!r} is outside the campaign"
            continue
        noted = records.get((j.step, j.slice))
        record = noted[1] if noted is not None and noted[0] == j.receipt \
            and noted[1].get("input_hash") == j.input_hash else None
        why = presence_problem(campaign, j.receipt, record)
        if why is not None:
            out[(j.step, j.slice)] = why
    return out


__all__ = ["PRESENCE_SCHEMA", "damaged_jobs", "presence_problem", "presence_record", "read_presence",
           "store_presence"]

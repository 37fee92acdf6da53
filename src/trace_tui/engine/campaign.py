"""A campaign directory and its state (SPEC §3).

Layout (one directory per run tag)::

    campaign.json          identity: id, run tag, recipe, created (written once)
    recipe.json            the resolved recipe of the latest run
    state.sqlite           jobs and steps (SQLite, WAL): resume is a lookup here
    events.jsonl           every event the runner published, one JSON object a line
    runner.log             the runner's own log lines (JSON)
    jobs/STEP/SLICE/job.json       job specs (mounted read-only at /job)
    outputs/STEP/SLICE/...         what the stage wrote (per slice: MODEL/SEED/BENCHMARK)
    logs/STEP/SLICE.log            a stage's stderr and non-event stdout
    receipts/STEP/SLICE.json       {"content": {...}, "circumstance": {...}}

A job is one (step, slice) pair; a step that is not per slice has one job whose
slice is ``_step``. Each job's record is keyed by the sha256 of its pinned inputs
(model pin, settings, image id, benchmark/dataset entry, upstream jobs' keys),
so a changed input invalidates exactly the jobs that read it.

Only the runner writes: it holds an exclusive ``flock`` on ``.lock`` for the
whole run, which the kernel releases even on ``kill -9``. Readers (``status``,
``verify``) open the database read-only.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trace_tui.campaign_files.state import (
    _SCHEMA,
    JOB_COLUMNS,
    STEP_SLICE,
    JobRecord,
    SliceRecord,
    _drop_torn_tail,
    check_integrity,
    has_receipts,
    read_jobs,
    read_meta,
    read_slices,
    slice_path,
    unreadable_state,
)
from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.safe_write import directory_inside, open_append, open_nofollow
from trace_tui.engine.recovery import check_campaign_dir, receipt_rows, supersede
from trace_tui.errors import TraceTuiError, UsageError


class Campaign:
    """The writer's view of a campaign directory. Thread-safe (one lock around the connection)."""

    def __init__(self, path: Path, *, lock: bool = True) -> None:
        self.path = Path(path).resolve()
        self._mutex = threading.RLock()
        self._lock_fd: int | None = None
        check_campaign_dir(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create campaign directory {self.path}: {exc.strerror}") from None
        if lock:
            self._acquire_lock()
        state_lost = lock and self._state_lost()
        self.rebuilt = 0  # jobs whose state was rebuilt from their receipts on this open
        try:
            self.db = self._open_db()
        except BaseException:  # an unreadable database: the lock goes too (a TUI retries in this process)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            raise
        self.id = self._identity()
        if state_lost:
            self.rebuilt = self.rebuild_from_receipts()

        for sub in ("jobs", "outputs", "logs", "receipts"):
            directory_inside(self.path, sub)  # checked by check_campaign_dir above; made here
        events = self.path / "events.jsonl"
        if lock:
            _drop_torn_tail(events)
        self._events = open_append(events)  # never through a link planted in its place

    # -- the state database ---------------------------------------------------
    def _state_lost(self) -> bool:
        """The database is gone or empty although receipts say work was finished here."""
        db = self.path / "state.sqlite"
        try:
            empty = db.stat().st_size == 0
        except FileNotFoundError:
            empty = True
        if not empty or not has_receipts(self.path):
            return False
        for stale in (db.with_name("state.sqlite-wal"), db.with_name("state.sqlite-shm")):
            stale.unlink(missing_ok=True)  # a log of a database that is no more must not be replayed
        return True

    def _open_db(self) -> sqlite3.Connection:
        db_path = self.path / "state.sqlite"
        try:
            db = sqlite3.connect(db_path, check_same_thread=False, timeout=30, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a process kill (not a power cut,
            # which the rerun repairs anyway because outputs are checked against receipts).
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("SELECT count(*) FROM jobs").fetchone()
            check_integrity(db, db_path)  # a damaged page: this one line now, not a DatabaseError mid-run
            return db
        except sqlite3.DatabaseError as exc:
            raise unreadable_state(db_path, exc) from None

    def rebuild_from_receipts(self, receipts: list[Path] | None = None) -> int:
        """Job and slice rows from the intact receipts (all of them, or the ones given)."""
        jobs, slices = receipt_rows(self.path, receipts)
        with self._mutex:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR REPLACE INTO jobs(step, slice, model, seed, benchmark, input_hash, inputs, state, done,"
                " total, score, receipt, expected, updated_at) VALUES (:step, :slice, :model, :seed, :benchmark,"
                " :input_hash, :inputs, 'completed', :done, :total, :score, :receipt, 1, :now)", jobs)
            self.db.executemany(
                "INSERT OR REPLACE INTO slices(step, slice, model, seed, benchmark, input_hash, inputs, state, done,"
                " total, score, expected, updated_at) VALUES (:step, :slice, :model, :seed, :benchmark,"
                " :input_hash, :inputs, 'completed', :done, :total, :score, 1, :now)", slices)
            self.db.execute("COMMIT")
        return len(jobs)

    def supersede(self, step: str, slice_: str, stamp: str, changes: list[str]) -> list[str]:
        """Move a finished job's outputs and receipt aside (kept under superseded/STAMP, listed)."""
        return supersede(self.path, stamp, step, slice_, self.output_rel(step, slice_),
                         self.receipt_path(step, slice_), changes)

    def supersede_slice(self, step: str, slice_: str, stamp: str, changes: list[str]) -> list[str]:
        """A whole-step job's slice: its folder OUTPUT_DIR/slices/SLICE goes aside (no receipt of its own)."""
        rel = f"{self.output_rel(step, STEP_SLICE)}/slices/{slice_path(slice_)}"
        return supersede(self.path, stamp, step, slice_, rel, self.path / "__none__", changes)

    # -- identity and locking -------------------------------------------------
    def _acquire_lock(self) -> None:
        # never through a link: a resume would rewrite the file it points to
        fd = open_nofollow(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise TraceTuiError(f"campaign {self.path} is in use by a running trace-tui ({holder})",
                                hint="watch it with `trace-tui status --campaign DIR`, or wait for it") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}\n".encode(), 0)
        self._lock_fd = fd

    def _identity(self) -> str:
        ident = self.path / "campaign.json"
        if ident.is_file():
            return str(json.loads(ident.read_text(encoding="utf-8"))["id"])

        cid = uuid.uuid4().hex[:16]
        atomic_write_json(ident, {"id": cid, "created_at": time.time(), "schema": "trace-tui-campaign-v1"})
        return cid

    def close(self) -> None:
        with self._mutex:
            try:
                self._events.close()
            except OSError:
                pass  # a full disk: the torn last line is cut on the next open
            finally:
                self.db.close()
                if self._lock_fd is not None:
                    os.close(self._lock_fd)
                    self._lock_fd = None

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths ----------------------------------------------------------------
    def job_dir(self, step: str, slice_: str) -> Path:
        return self.path / "jobs" / step / slice_path(slice_)

    def output_rel(self, step: str, slice_: str) -> str:
        return f"outputs/{step}/{slice_path(slice_)}"

    def receipt_path(self, step: str, slice_: str) -> Path:
        return self.path / "receipts" / step / f"{slice_path(slice_)}.json"

    def log_path(self, step: str, slice_: str) -> Path:
        return self.path / "logs" / step / f"{slice_path(slice_)}.log"

    def sweep_temporaries(self) -> int:
        """Remove temp files a killed writer left behind (atomic writes name them .NAME.*.tmp)."""
        n = 0
        for tmp in (self.path / "outputs").rglob(".*.tmp"):
            try:
                tmp.unlink()
                n += 1
            except OSError:
                pass
        return n

    # -- meta, steps ----------------------------------------------------------
    def set_meta(self, **values: str) -> None:
        with self._mutex:
            self.db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(values.items()))

    def meta(self) -> dict[str, str]:
        with self._mutex:
            return read_meta(self.db)

    def upsert_steps(self, steps: Iterable[tuple[str, int, str, str, bool]]) -> None:
        with self._mutex:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM steps")
            self.db.executemany(
                "INSERT INTO steps(step, position, title, kind, per_slice, state) VALUES (?, ?, ?, ?, ?, 'pending')",
                [(s, p, t, k, int(ps)) for s, p, t, k, ps in steps])
            self.db.execute("COMMIT")

    def set_step_state(self, step: str, state: str, message: str = "") -> None:
        now = time.time()
        with self._mutex:
            if state == "running":
                self.db.execute("UPDATE steps SET state=?, message=?, started_at=COALESCE(started_at, ?) "
                                "WHERE step=?", (state, message, now, step))
            else:
                self.db.execute("UPDATE steps SET state=?, message=?, finished_at=? WHERE step=?",
                                (state, message, now, step))

    # -- jobs -----------------------------------------------------------------
    def jobs(self) -> dict[tuple[str, str], JobRecord]:
        with self._mutex:
            return {(j.step, j.slice): j for j in read_jobs(self.db)}

    def job(self, step: str, slice_: str) -> JobRecord | None:
        with self._mutex:
            row = self.db.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE step=? AND slice=?",
                                  (step, slice_)).fetchone()
        return JobRecord.from_row(row) if row else None

    def record_plan(self, rows: list[dict[str, Any]]) -> None:
        """Insert or re-key the expected jobs in one transaction; jobs not expected any more are kept
        but marked so (their outputs stay; verify only looks at expected ones)."""
        with self._mutex:
            self.db.execute("BEGIN")
            self.db.execute("UPDATE jobs SET expected=0")
            self.db.executemany(
                "INSERT INTO jobs(step, slice, model, seed, benchmark, input_hash, inputs, state, total, expected,"
                " updated_at) VALUES (:step, :slice, :model, :seed, :benchmark, :input_hash, :inputs, :state,"
                " :total, 1, :now) ON CONFLICT(step, slice) DO UPDATE SET expected=1, input_hash=:input_hash,"
                " inputs=:inputs, state=CASE WHEN jobs.input_hash=:input_hash THEN jobs.state ELSE :state END,"
                " total=CASE WHEN jobs.input_hash=:input_hash THEN jobs.total ELSE :total END,"
                " done=CASE WHEN jobs.input_hash=:input_hash THEN jobs.done ELSE 0 END,"
                " phase=CASE WHEN jobs.input_hash=:input_hash THEN jobs.phase ELSE '' END,"
                " score=CASE WHEN jobs.input_hash=:input_hash THEN jobs.score ELSE NULL END,"
                " receipt=CASE WHEN jobs.input_hash=:input_hash THEN jobs.receipt ELSE NULL END,"
                " message=CASE WHEN jobs.input_hash=:input_hash THEN jobs.message ELSE :message END,"
                " updated_at=:now",
                rows)
            self.db.execute("COMMIT")

    def sub_slices(self) -> dict[tuple[str, str], SliceRecord]:
        with self._mutex:
            return {(r.step, r.slice): r for r in read_slices(self.db)}

    def record_sub_slices(self, rows: list[dict[str, Any]]) -> None:
        """Expected slices of whole-step jobs; a changed input hash resets the slice's record."""
        with self._mutex:
            self.db.execute("BEGIN")
            self.db.execute("UPDATE slices SET expected=0")
            self.db.executemany(
                "INSERT INTO slices(step, slice, model, seed, benchmark, input_hash, inputs, state, total, message,"
                " expected, updated_at) VALUES (:step, :slice, :model, :seed, :benchmark, :input_hash, :inputs,"
                " 'pending', :total, :message, 1, :now) ON CONFLICT(step, slice) DO UPDATE SET expected=1,"
                " input_hash=:input_hash, inputs=:inputs,"
                " state=CASE WHEN slices.input_hash=:input_hash THEN slices.state ELSE 'pending' END,"
                " total=CASE WHEN slices.input_hash=:input_hash THEN slices.total ELSE :total END,"
                " done=CASE WHEN slices.input_hash=:input_hash THEN slices.done ELSE 0 END,"
                " score=CASE WHEN slices.input_hash=:input_hash THEN slices.score ELSE NULL END,"
                " message=CASE WHEN slices.input_hash=:input_hash THEN slices.message ELSE :message END,"
                " updated_at=:now", rows)
            self.db.execute("COMMIT")

    def update_slice(self, step: str, slice_: str, **fields: object) -> None:
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._mutex:
            self.db.execute(f"UPDATE slices SET {cols} WHERE step=? AND slice=?", (*fields.values(), step, slice_))

    def complete_sub_slices(self, step: str) -> None:
        with self._mutex:
            self.db.execute("UPDATE slices SET state='completed', rate=NULL, updated_at=?"
                            " WHERE step=? AND expected=1", (time.time(), step))

    def update_job(self, step: str, slice_: str, **fields: object) -> None:
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._mutex:
            self.db.execute(f"UPDATE jobs SET {cols} WHERE step=? AND slice=?", (*fields.values(), step, slice_))

    # -- events ---------------------------------------------------------------
    def append_event(self, line: str) -> None:
        with self._mutex:
            self._events.write(line + "\n")

    def flush_events(self) -> None:
        with self._mutex:
            self._events.flush()

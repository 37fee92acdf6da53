"""A campaign's state database, read-only: its schema, the slice and job records, and the readers
that `status`, `verify --campaign` and the engine share (trace_tui.engine.campaign writes it); and the
one safe way those readers open a campaign's small JSON files (campaign.json, shards.json, ...)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from trace_tui.common.runtimes import known_runtime
from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.errors import CheckFailed, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import ValidationError

STEP_SLICE = "_step"  # the slice name of a job that covers a whole step

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    step TEXT PRIMARY KEY, position INTEGER NOT NULL, title TEXT NOT NULL, kind TEXT NOT NULL,
    per_slice INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL DEFAULT '',
    started_at REAL, finished_at REAL);
CREATE TABLE IF NOT EXISTS jobs (
    step TEXT NOT NULL, slice TEXT NOT NULL, model TEXT, seed INTEGER, benchmark TEXT,
    input_hash TEXT NOT NULL, inputs TEXT NOT NULL, state TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',
    done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0, score REAL, rate REAL,
    message TEXT NOT NULL DEFAULT '', receipt TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    expected INTEGER NOT NULL DEFAULT 1, started_at REAL, finished_at REAL, updated_at REAL,
    PRIMARY KEY (step, slice));
CREATE TABLE IF NOT EXISTS slices (
    step TEXT NOT NULL, slice TEXT NOT NULL, model TEXT, seed INTEGER, benchmark TEXT,
    input_hash TEXT NOT NULL, inputs TEXT NOT NULL, state TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',
    done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0, score REAL, rate REAL,
    message TEXT NOT NULL DEFAULT '', expected INTEGER NOT NULL DEFAULT 1, updated_at REAL,
    PRIMARY KEY (step, slice));
"""
# ``jobs``: one row per job (a per-slice step's slice, or a whole step). ``slices``: the slices a
# whole-step job works through (e.g. the release evaluator's model x seed x benchmark matrix), so
# that status, resume and invalidation stay per slice when one container serves many slices.

SLICE_COLUMNS = ("step", "slice", "model", "seed", "benchmark", "input_hash", "inputs", "state", "phase", "done",
                 "total", "score", "rate", "message", "expected", "updated_at")
JOB_COLUMNS = ("step", "slice", "model", "seed", "benchmark", "input_hash", "inputs", "state", "phase", "done",
               "total", "score", "rate", "message", "receipt", "attempts", "expected", "started_at",
               "finished_at", "updated_at")


def slice_name(model: str | None, seed: int | None, benchmark: str | None) -> str:
    if model is None and seed is None and benchmark is None:
        return STEP_SLICE
    return f"{model}/{seed}/{benchmark}"


def _safe(part: str) -> str:
    # Model ids and benchmark keys are path-safe in the lock; this guards hand-written recipes.
    return "".join(c if (c.isalnum() or c in "-_.") else "_" for c in part) or "_"


def slice_path(slice_: str) -> str:
    return "/".join(_safe(p) for p in slice_.split("/"))


_R = TypeVar("_R", bound="SliceRecord")


@dataclass(frozen=True)
class SliceRecord:
    """One slice's state row; a job row (JobRecord) is the same plus its receipt and timing."""

    COLUMNS: ClassVar[tuple[str, ...]] = SLICE_COLUMNS
    step: str
    slice: str
    model: str | None
    seed: int | None
    benchmark: str | None
    input_hash: str
    inputs: dict[str, Any]
    state: str
    phase: str
    done: int
    total: int
    score: float | None
    rate: float | None
    message: str
    expected: bool
    updated_at: float | None

    @classmethod
    def from_row(cls: type[_R], row: tuple[Any, ...]) -> _R:
        d = dict(zip(cls.COLUMNS, row))
        try:
            d["inputs"] = json.loads(d["inputs"])
        except (TypeError, ValueError):
            raise BrokenRow(f"{d.get('step')} {d.get('slice')}: its inputs are not valid JSON") from None
        d["expected"] = bool(d["expected"])
        return cls(**d)


@dataclass(frozen=True)
class JobRecord(SliceRecord):
    COLUMNS: ClassVar[tuple[str, ...]] = JOB_COLUMNS
    receipt: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None


def _drop_torn_tail(path: Path) -> None:
    """A writer killed mid-line leaves a partial last line: cut it, so the log stays one JSON object a line."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(path, "r+b") as fh:
        fh.seek(max(0, size - 65536))
        tail = fh.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        fh.truncate(size - len(tail) + cut + 1 if cut >= 0 else (0 if size <= 65536 else size))


# --------------------------------------------------------------------------- campaign files, read safely

MIB = 1024 * 1024
TOO_LONG = 80  # characters of a value an error line echoes


def cut(value: object, limit: int = TOO_LONG) -> str:
    """``repr(value)``, cut to ``limit`` characters with "…" (an error line stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


class UnsafeFile(CheckFailed):
    """A campaign file that is not a regular file of a sane size in its own folder: it was not read."""


def read_campaign_file(path: Path, *, limit: int) -> bytes:
    """The bytes of a file trace-tui wrote into a campaign: only a regular file (a link only to one in the
    same folder), at most ``limit`` bytes (trace_tui.common.safe_read: a FIFO would block the reader
    forever, /dev/zero would grow it without bound). Raises FileNotFoundError when absent and UnsafeFile,
    one line naming the file, otherwise."""
    path = Path(path)
    try:
        data = Folder(path.parent, name=str(path.parent)).read(path.name, limit)
    except NotRead as exc:
        raise UnsafeFile(f"{path}: {exc.reason}",
                         hint="trace-tui writes a regular file there: remove it and run the command that writes "
                              "it again") from None
    if data is None:
        raise FileNotFoundError(path)
    return data


def read_campaign_json(path: Path, *, limit: int) -> object:
    """A campaign's JSON file (read_campaign_file's rules), parsed; UnsafeFile naming it when it is not JSON."""
    data = read_campaign_file(path, limit=limit)
    try:
        return json.loads(data)
    except RecursionError:
        raise UnsafeFile(f"{path}: nested too deeply to be a file trace-tui wrote") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise UnsafeFile(f"{path}: not valid JSON ({exc})") from None


def validation_problem(exc: ValidationError) -> str:
    """A pydantic ValidationError as one short phrase naming the first field and its value."""
    errors = exc.errors()
    if not errors:
        return str(exc).splitlines()[0]
    first = errors[0]
    field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
                    for i, p in enumerate(first.get("loc", ()))) or "the top level"
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if first.get("type") == "missing":
        return f"{field} is missing{more}"
    return f"{field} = {cut(first.get('input'))}: {msg}{more}"


# The files next to the database that its readers open after it (SQLite the -wal and -shm, `status` the
# runner's lock): a FIFO there would block them forever, so each must be a regular file or absent.
STATE_FILES = ("state.sqlite", "state.sqlite-wal", "state.sqlite-shm", ".lock")


def check_state_files(path: Path) -> None:
    """UsageError naming the first of STATE_FILES in PATH that exists but is not a regular file."""
    for name in STATE_FILES:
        where = Path(path) / name
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"{where}: unreadable ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise UsageError(f"{where}: {file_kind(mode)}, not a file; the campaign's state was not read",
                             hint=f"trace-tui writes a regular file there: remove it (`rm {where}`) and run the "
                                  "recipe on this campaign again")


REBUILD_HINT = "run the recipe on this campaign again: the state is rebuilt from its receipts"


def has_receipts(path: Path) -> bool:
    """Receipts say work was finished in campaign PATH: its state can be rebuilt from them."""
    return any((path / "receipts").rglob("*.json"))


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open a campaign's state without writing anything (status, verify).

    With a write-ahead log present (a runner is working, or was killed) SQLite's read-only
    mode reads it through the existing -wal/-shm files. Without one the database file is
    complete by itself and is opened immutable, so that looking creates no -wal/-shm files.
    """
    db = Path(path) / "state.sqlite"
    if not os.path.lexists(db):
        if has_receipts(Path(path)):  # a campaign whose state is gone, not some other directory
            raise UsageError(f"{db}: missing, though the campaign's receipts are there", hint=REBUILD_HINT)
        raise UsageError(f"{path} is not a campaign (no state.sqlite)",
                         hint="give the directory a `trace-tui --recipe` run printed")
    check_state_files(Path(path))
    wal = db.with_name(db.name + "-wal").exists()
    uri = f"file:{db}?mode=ro" if wal else f"file:{db}?immutable=1"
    try:
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=5)
            conn.execute("SELECT count(*) FROM jobs").fetchone()
        except sqlite3.OperationalError:
            # e.g. a read-only copy of a campaign whose -shm is missing: read the file as it is
            conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
            conn.execute("SELECT count(*) FROM jobs").fetchone()
        check_integrity(conn, db)
        return conn
    except sqlite3.DatabaseError as exc:  # empty, truncated or not a database at all
        raise unreadable_state(db, exc) from None


def unreadable_state(db: Path, exc: BaseException | str) -> UsageError:
    """The one line for a state database that cannot be read (not a database, a damaged page), with the
    hint a missing one has: readers (status, verify) and the runner (a resume) say the same."""
    return UsageError(f"{db}: not a readable campaign database ({exc})",
                      hint=f"{REBUILD_HINT} (move a broken file aside first: `mv {db} {db}.broken`)")


def check_integrity(conn: sqlite3.Connection, db: Path) -> None:
    """UsageError (unreadable_state) unless every page of the database reads back. A damaged page is found
    here, when the database is opened, not by whichever query first reaches it (a DatabaseError mid-run or
    mid-report). quick_check reads each page once: milliseconds for a campaign's state of a few MB."""
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise unreadable_state(db, exc) from None
    if problems != ["ok"]:
        first = " ".join(str(problems[0]).replace("*** in database main ***", "").split())[:200] if problems \
            else "no answer"
        raise unreadable_state(db, f"damaged: {first}")




def read_slices(conn: sqlite3.Connection) -> list[SliceRecord]:
    try:
        rows = conn.execute(f"SELECT {', '.join(SLICE_COLUMNS)} FROM slices").fetchall()
    except sqlite3.OperationalError:  # a campaign from before sub-slices were tracked
        return []
    try:
        return [SliceRecord.from_row(r) for r in rows]
    except BrokenRow as exc:
        raise _broken_state(conn, exc) from None


class BrokenRow(ValueError):
    """A state row that does not parse (the database was edited or damaged)."""


def _broken_state(conn: sqlite3.Connection, exc: BrokenRow) -> UsageError:
    db = conn.execute("PRAGMA database_list").fetchone()[2] or "state.sqlite"
    return UsageError(f"{db}: {exc}", hint=f"move it aside (`mv {db} {db}.broken`) and run the recipe again: "
                                           "the state is rebuilt from the receipts")


def read_jobs(conn: sqlite3.Connection) -> list[JobRecord]:
    rows = conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs").fetchall()
    try:
        return [JobRecord.from_row(r) for r in rows]
    except BrokenRow as exc:
        raise _broken_state(conn, exc) from None


def read_steps(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT step, position, title, kind, per_slice, state, message, started_at, finished_at "
                       "FROM steps ORDER BY position")
    cols = [c[0] for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def recorded_runtime(path: Path) -> str | None:
    """The runtime ("docker" or "local") the campaign's last run used; None for a new or unreadable one.

    A resume without --runtime takes it: a campaign started on the local runtime resumes there,
    not in images this machine may not have.
    """
    if not (Path(path) / "state.sqlite").is_file():
        return None
    try:
        conn = connect_readonly(path)
        try:
            runtime = read_meta(conn).get("runtime")
        finally:
            conn.close()
    except (UsageError, sqlite3.Error):
        return None
    return known_runtime(runtime)




def read_snapshot(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list["JobRecord"], list["SliceRecord"]]:
    """(meta, steps, expected jobs, expected slices of whole-step jobs), read once without writing."""
    conn = connect_readonly(path)
    try:
        return (read_meta(conn), read_steps(conn), [j for j in read_jobs(conn) if j.expected],
                [x for x in read_slices(conn) if x.expected])
    finally:
        conn.close()

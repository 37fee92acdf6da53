"""A worker that exercises the stage contract and the runtimes (tests, benchmarks, `trace-tui` self-checks).

    python -m trace_tui.stages.selftest MODE [--delay S] [--rows N] [--events N] [--mib N] [--fail-at N]

Modes:
  matrix        `rows` for every slice of a whole-step job, under OUTPUT_DIR/slices/MODEL/SEED/BENCHMARK
  rows          write one row per slice row (per-row seeds), resumable at the first missing row,
                then score.json; the score is the share of rows whose value is below 0.5; given a
                batch job (a keep_loaded step), every slice of it in turn; either way after one "model loaded" log line
  fail          print a few log lines on stderr and exit 3
  oom           allocate memory until the container's limit kills it
  network       report the network interfaces and whether a TCP connection can be opened
  store-write   try to write into the store (read-only in containers)
  whoami        report uid/gid and what the campaign directory looks like
  events        print N progress events as fast as possible (throughput benchmark)
  sleep         sleep --delay seconds holding a scratch directory, printing progress (stop tests)
  noisy         mix plain text, malformed JSON and events on stdout, then succeed

SELFTEST_FAIL_AT=N in the environment makes `rows` exit at row N (as a crash would),
without changing the step's pinned inputs; SELFTEST_STOP_AT=N makes `matrix` stop each
slice at row N and exit 0.

Standard library only: it runs inside any image that has python3 and the trace_tui package.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.stages import protocol
from trace_tui.stages.entry import parse_options
from trace_tui.stages.jobs import WorkerContext, run_step
from trace_tui.workers.recompute_selftest import read_rows, score_rows


metric = protocol.metric


def row_seed(seed: int, model: str, benchmark: str, row: int) -> int:
    """Each row's seed depends on the slice and the row alone: not on order, batching or resume."""
    digest = hashlib.sha256(f"{seed}:{model}:{benchmark}:{row}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def make_row(seed: int, model: str, benchmark: str, row: int) -> dict:
    rs = row_seed(seed, model, benchmark, row)
    value = random.Random(rs).random()
    return {"row": row, "seed": rs, "value": round(value, 12), "correct": value < 0.5}


def write_slice(out: Path, campaign: Path, model: str, seed: int, bench: str, total: int,
                opts: SelftestOptions, fail_at: int | None) -> float | None:
    """Rows of one slice into out/rows.jsonl, resuming at the first missing row; then score.json."""
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "rows.jsonl"
    rows, good = read_rows(rows_path)
    if rows_path.exists() and rows_path.stat().st_size != good:
        with open(rows_path, "r+b") as fh:  # drop a torn last line left by a kill
            fh.truncate(good)
            fh.flush()
            os.fsync(fh.fileno())
    start = len(rows)
    where = {"model": model, "seed": seed, "benchmark": bench}
    if start:
        protocol.log(f"{model}/{seed}/{bench}: resuming at row {start} of {total}")
    protocol.progress(phase="generate", done=start, total=total, **where)
    with open(rows_path, "ab") as fh:
        for i in range(start, total):
            if fail_at is not None and i == fail_at:
                print(f"selftest: failing at row {i} as asked", file=sys.stderr)
                return None
            if opts.delay:
                time.sleep(opts.delay)
            row = make_row(seed, model, bench, i)
            fh.write((json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n").encode())
            fh.flush()
            os.fsync(fh.fileno())
            rows.append(row)
            protocol.progress(phase="generate", done=i + 1, total=total, **where)
    score = score_rows(rows)
    atomic_write_json(out / "score.json", {"score": score, "rows": len(rows), **where})
    protocol.artifact(rows_path, campaign)
    protocol.artifact(out / "score.json", campaign)
    metric("score", score, **where)
    return score


def _fail_at(opts: SelftestOptions) -> int | None:
    if opts.fail_at is not None:
        return opts.fail_at
    return int(os.environ["SELFTEST_FAIL_AT"]) if os.environ.get("SELFTEST_FAIL_AT") else None


def mode_rows(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    if "batch" in job:  # a keep_loaded step: one worker, its slices in turn, one status line per slice
        protocol.log("selftest: model loaded")  # once per worker: what a real worker's model load costs
        for sub in job["batch"]:
            sl = sub["slice"]
            total = opts.rows if opts.rows is not None else int(sub.get("total") or 10)
            where = {"model": str(sl["model"]), "seed": int(sl["seed"]), "benchmark": str(sl["benchmark"])}
            if write_slice(campaign / sub["output_dir"], campaign, where["model"], where["seed"], where["benchmark"],
                           total, opts, _fail_at(opts)) is None:
                return 4  # as a crash would: the slices after this one stay to do
            protocol.status("completed", f"{total} rows", **where)
        protocol.status("completed", f"{len(job['batch'])} slices")
        return 0
    protocol.log("selftest: model loaded")  # one job, one worker, one load
    sl = job.get("slice") or {"model": "none", "seed": 0, "benchmark": "none"}
    total = opts.rows if opts.rows is not None else int(job.get("total") or 10)
    score = write_slice(campaign / job["output_dir"], campaign, str(sl["model"]), int(sl["seed"]),
                        str(sl["benchmark"]), total, opts, _fail_at(opts))
    if score is None:
        return 4
    protocol.status("completed", f"{total} rows")
    return 0


def mode_matrix(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    """A whole-step job over the slice matrix (as the release evaluator works): OUTPUT_DIR/slices/M/S/B."""
    out = campaign / job["output_dir"]
    fail_at = _fail_at(opts)
    for sl in job.get("slices") or []:
        total = opts.rows if opts.rows is not None else int(sl.get("total") or 10)
        # SELFTEST_STOP_AT=N: write N rows of each slice and still exit 0, as a worker that stops early
        # without noticing would (the engine must not call such a slice complete).
        total = min(total, int(os.environ.get("SELFTEST_STOP_AT") or total))
        if write_slice(out / "slices" / sl["model"] / str(sl["seed"]) / sl["benchmark"], campaign, sl["model"],
                       int(sl["seed"]), sl["benchmark"], total, opts, fail_at) is None:
            return 4
    protocol.status("completed", f"{len(job.get('slices') or [])} slices")
    return 0


def mode_report(job: dict, campaign: Path, name: str, report: dict) -> int:
    out = campaign / job["output_dir"]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / f"{name}.json", report)
    protocol.artifact(out / f"{name}.json", campaign)
    protocol.log(json.dumps(report, sort_keys=True))
    protocol.status("completed")
    return 0


def mode_network(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    # The process's own network namespace (/proc/self/net), not /sys/class/net: that is the namespace of
    # whoever mounted /sys, which a runtime that binds the host's /sys (Charliecloud) shows instead.
    try:
        lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
        ifaces = sorted(line.split(":", 1)[0].strip() for line in lines if ":" in line)
    except OSError:
        ifaces = []
    result: dict = {"interfaces": ifaces}
    try:
        with socket.create_connection((opts.host, opts.port), timeout=3):
            result["connect"] = "ok"
    except OSError as exc:
        result["connect"] = f"error: {exc.__class__.__name__}: {exc.strerror or exc}"
        result["errno"] = exc.errno
    return mode_report(job, campaign, "network", result)


def mode_store_write(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    store = Path(os.environ.get("TRACE_TUI_STORE", "/store"))
    result: dict = {"store": str(store)}
    try:
        (store / "selftest-write").write_text("x")
        result["write"] = "ok"
    except OSError as exc:
        result["write"] = "error"
        result["errno"] = exc.errno
        result["strerror"] = exc.strerror
    return mode_report(job, campaign, "store-write", result)


def mode_whoami(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    job_path = Path(os.environ.get("TRACE_TUI_JOB", "/job/job.json"))
    try:
        job_path.with_name("selftest-write").write_text("x")
        job_write = "ok"
    except OSError as exc:
        job_write = f"error {exc.errno}"
    try:
        caps = next((ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("CapEff:")), "")
    except OSError:
        caps = ""
    nnp = next((ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("NoNewPrivs:")), "")
    return mode_report(job, campaign, "whoami", {"uid": os.getuid(), "gid": os.getgid(), "cap_eff": caps,
                                                  "no_new_privs": nnp, "job_write": job_write,
                                                  "gpus_env": os.environ.get("CUDA_VISIBLE_DEVICES"),
                                                  "root_write": _try_write(Path("/selftest-root-write")),
                                                  "tmp_write": _try_write(Path("/tmp/selftest-tmp-write")),
                                                  "pids_max": _cgroup("pids.max", "pids/pids.max"),
                                                  "memory_max": _cgroup("memory.max",
                                                                        "memory/memory.limit_in_bytes"),
                                                  "cwd": os.getcwd(), "sys_path": sys.path})


def _try_write(path: Path) -> str:
    try:
        path.write_text("x")
        path.unlink()
        return "ok"
    except OSError as exc:
        return f"error {exc.errno}"


def _cgroup(v2: str, v1: str) -> str | None:
    """A limit of this container's cgroup (v2 file, else the v1 controller's)."""
    for name in (v2, v1):
        try:
            return Path("/sys/fs/cgroup", name).read_text().strip()
        except OSError:
            continue
    return None


def mode_oom(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    hold = []
    for i in range(opts.mib):
        hold.append(bytearray(1 << 20))  # pages touched: bytearray zero-fills
        if i % 64 == 0:
            protocol.progress(phase="allocate", done=i, total=opts.mib)
    protocol.status("completed", f"allocated {opts.mib} MiB without being killed")
    return 0


def mode_events(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    n = opts.events
    progress = protocol.progress  # the stages' own path, so the benchmark times what stages pay
    for i in range(n):
        progress(phase="bench", done=i + 1, total=n)
    protocol.status("completed")
    return 0


def mode_sleep(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    """Sleep holding a scratch directory in the output directory, as a worker holds its temporary files:
    a stop (SIGTERM) must interrupt it so that the directory goes, and it says it was interrupted."""
    import tempfile

    out = campaign / job["output_dir"]
    out.mkdir(parents=True, exist_ok=True)
    steps = max(1, int(opts.delay * 10))
    try:
        with tempfile.TemporaryDirectory(prefix="scratch-", dir=out):
            for i in range(steps):
                time.sleep(0.1)
                protocol.progress(phase="sleep", done=i + 1, total=steps)
    except KeyboardInterrupt:
        protocol.status("failed", "interrupted", 130)
        return 130
    protocol.status("completed")
    return 0


def mode_noisy(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    print("plain text from a library")
    print('{"type": "progress", "done": "many"}')  # invalid field
    print('{"not json')
    print("[1, 2, 3]")
    print('{"type": "unknown-kind"}')
    protocol.progress(phase="noisy", done=1, total=1)
    protocol.status("completed")
    return 0


def mode_fail(job: dict, campaign: Path, opts: SelftestOptions) -> int:
    protocol.log("selftest: about to fail")
    print("selftest: something went wrong (as asked)", file=sys.stderr)
    return 3


MODES = {"rows": mode_rows, "fail": mode_fail, "oom": mode_oom, "network": mode_network,
         "store-write": mode_store_write, "whoami": mode_whoami, "events": mode_events, "sleep": mode_sleep,
         "noisy": mode_noisy,
         "matrix": mode_matrix}


@dataclass(frozen=True)
class SelftestOptions:
    """The command line: MODE [--delay S] [--rows N] [--fail-at N] [--mib N] [--events N] [--host H] [--port P]."""

    mode: str = field(metadata={"positional": True, "choices": tuple(sorted(MODES))})
    delay: float = 0.0
    rows: int | None = None
    fail_at: int | None = None
    mib: int = 4096
    events: int = 100_000
    host: str = "172.17.0.1"
    port: int = 2375


def run_mode(job: dict[str, Any], context: WorkerContext, opts: SelftestOptions) -> int:
    try:
        return MODES[opts.mode](job, context.campaign, opts)
    finally:
        protocol.flush()  # a mode that ends without a status line (a failure) still shows its last count


def main(argv: list[str] | None = None) -> int:
    opts = parse_options(SelftestOptions, argv, prog="trace_tui.stages.selftest")
    return run_step(lambda job, context: run_mode(job, context, opts), quiet=False)


if __name__ == "__main__":
    raise SystemExit(main())

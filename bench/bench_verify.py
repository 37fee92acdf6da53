"""`trace-tui verify` wall time on the release copy, against the release's own validator and `sha256sum`.

All are run as subprocesses in the same run, median of several runs each, so the
ratios say how much the whole verification (interpreter start, imports, hashes,
parsing, 1,000+ recomputed aggregates) costs against the upstream validator on the
same files (goal: not slower) and beyond hashing the bytes. Goal: the whole verify
under 0.3 s wall, interpreter start included.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 7
GOAL_S = 0.3
# The baseline `verify --release-dir` must not be slower than: the release's own validator,
# rlvr/evaluation/scripts/validate_release_inputs.py at the release commit, run unchanged as its
# command line in a fresh interpreter, in its own rlvr/ tree (unpacked from the pinned evaluator
# archive by bench/upstream.py) with the release copy's files laid over it. It runs all its steps:
# the trace_eval suite, provenance, results and receipts, the post-run patches, the dataset
# equivalence receipt, the TRACE validation verifier (trace_validation/verify.py, which it loads
# itself) and the source map, which also hashes the validator's own tree.
GOAL_RATIO = 1.0
# As installed: bytecode cached. (A PYTHONDONTWRITEBYTECODE environment would time the
# compiler on every run instead of verify; the warm-up run writes the .pyc files.)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _release_dir() -> Path:
    repo = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("TRACE_RELEASE_DIR", repo.parent / "shared" / "trace-release")).resolve()


def _measure(cmd: list[str], runs: int = RUNS) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds user+sys) of running ``cmd``.

    CPU time is reported beside wall time because on a shared, loaded machine
    wall time also measures the neighbours; CPU time is what verify itself costs.
    """
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120, env=_ENV)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])}… exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
    return statistics.median(walls), statistics.median(cpus)


def run() -> list[str]:
    release = _release_dir()
    files = sorted(str(p) for p in release.rglob("*") if p.is_file())
    exe = shutil.which("trace-tui", path=str(Path(sys.executable).parent)) or shutil.which("trace-tui")
    verify = [exe, "verify", "--release-dir", str(release)] if exe else \
        [sys.executable, "-m", "trace_tui", "verify", "--release-dir", str(release)]
    _measure(verify, 1)  # warm the page cache and .pyc files
    sha, sha_cpu = _measure(["sha256sum", *files])
    python, python_cpu = _measure([sys.executable, "-c", "pass"])
    from bench.upstream import VALIDATOR, release_tree

    upstream = [sys.executable, str(release_tree(release) / VALIDATOR)]
    report = json.loads(subprocess.run(upstream, capture_output=True, text=True, check=True, env=_ENV).stdout)
    steps = [name for name in report if name not in ("status", "suite_id")]
    base, base_cpu = _measure(upstream)
    wall, cpu = _measure(verify)
    verdict = "ok" if wall < GOAL_S else "OVER GOAL"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [
        f"release copy: {len(files)} files, {sum(Path(f).stat().st_size for f in files) / 1024:.0f} KiB; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs",
        f"sha256sum over the same files: {sha * 1000:.1f} ms wall, {sha_cpu * 1000:.1f} ms CPU (median of {RUNS})",
        f"python -c pass (interpreter start): {python * 1000:.1f} ms wall, {python_cpu * 1000:.1f} ms CPU",
        f"trace-tui verify --release-dir: {wall * 1000:.1f} ms wall, {cpu * 1000:.1f} ms CPU (median of {RUNS}) "
        f"— goal < {GOAL_S * 1000:.0f} ms wall: {verdict}",
        f"ratio verify / sha256sum: {wall / sha:.1f}x wall; verify beyond interpreter start: "
        f"{(wall - python) * 1000:.1f} ms wall, {(cpu - python_cpu) * 1000:.1f} ms CPU",
        f"upstream validator ({VALIDATOR} at the release commit, unchanged, fresh interpreter): "
        f"{base * 1000:.1f} ms wall, {base_cpu * 1000:.1f} ms CPU; status {report.get('status')}",
        f"   its {len(steps)} steps on this copy, each passed (it stops on the first that fails): "
        + ", ".join(steps),
        f"RATIO verify / upstream validator: {wall / base:.2f}x wall, {cpu / base_cpu:.2f}x CPU "
        f"(goal <= {GOAL_RATIO:.1f}x: {'ok' if wall / base <= GOAL_RATIO else 'MISSED'})",
    ]


if __name__ == "__main__":  # pragma: no cover
    print("\n".join(run()))

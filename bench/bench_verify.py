"""`trace-tui verify` wall time on the release copy, against `sha256sum` over the same files.

Both are run as subprocesses in the same run, median of several runs each, so the
ratio says how much the whole verification (interpreter start, imports, hashes,
parsing, 1,000+ recomputed aggregates) costs beyond hashing the bytes. Goal:
the whole verify under 0.3 s wall, interpreter start included.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 7
GOAL_S = 0.3


def _release_dir() -> Path:
    repo = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("TRACE_RELEASE_DIR", repo.parent / "shared" / "trace-release")).resolve()


def _median_wall(cmd: list[str], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])}… exited {proc.returncode}: {proc.stderr.decode()[-300:]}")
    return statistics.median(times)


def run() -> list[str]:
    release = _release_dir()
    files = sorted(str(p) for p in release.rglob("*") if p.is_file())
    exe = shutil.which("trace-tui", path=str(Path(sys.executable).parent)) or shutil.which("trace-tui")
    verify = [exe, "verify", "--release-dir", str(release)] if exe else \
        [sys.executable, "-m", "trace_tui", "verify", "--release-dir", str(release)]
    _median_wall(verify, 1)  # warm the page cache and .pyc files
    sha = _median_wall(["sha256sum", *files])
    python = _median_wall([sys.executable, "-c", "pass"])
    wall = _median_wall(verify)
    verdict = "ok" if wall < GOAL_S else "OVER GOAL"
    return [
        f"release copy: {len(files)} files, {sum(Path(f).stat().st_size for f in files) / 1024:.0f} KiB",
        f"sha256sum over the same files: {sha * 1000:.1f} ms (median of {RUNS})",
        f"python -c pass (interpreter start): {python * 1000:.1f} ms",
        f"trace-tui verify --release-dir: {wall * 1000:.1f} ms (median of {RUNS}) — goal < {GOAL_S * 1000:.0f} ms: {verdict}",
        f"ratio verify / sha256sum: {wall / sha:.1f}x; verify beyond interpreter start: {(wall - python) * 1000:.1f} ms",
    ]


if __name__ == "__main__":  # pragma: no cover
    print("\n".join(run()))

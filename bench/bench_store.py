"""`store verify --deep` throughput against `sha256sum` on the same files, in the same run.

About 1 GB of model-like files (a few large shards and small JSON files) go into a temporary
store; both sides read them warm from the page cache, best of three runs each.
Goal: verify --deep at least 2x sha256sum (large blocks, one thread per core).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

GOAL = 2.0
SHARD = 128 << 20
SHARDS = 8


def _make_files(root: Path) -> None:
    block = os.urandom(16 << 20)
    for i in range(SHARDS):
        with open(root / f"model-{i + 1:05d}-of-{SHARDS:05d}.safetensors", "wb") as fh:
            for j in range(SHARD // len(block)):
                fh.write(bytes([i, j]) + block[2:])
    for name in ("config.json", "tokenizer.json", "generation_config.json"):
        (root / name).write_bytes(os.urandom(64 << 10))


def _best(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run() -> list[str]:
    from trace_tui.store import Store

    if shutil.which("sha256sum") is None:
        return ["sha256sum not found: no baseline, nothing measured"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        src = tmp / "src"
        src.mkdir()
        _make_files(src)
        store = Store(tmp / "store")
        name = "local:model/bench"
        store.import_local(name, src)
        shutil.rmtree(src)
        files = sorted(str(p) for p in store.root_of(name).rglob("*") if p.is_file())
        total = sum(os.path.getsize(f) for f in files)

        def baseline() -> None:
            subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL)

        def ours() -> None:
            (check,) = store.verify([name], deep=True)
            assert check.ok, check.problems

        baseline()  # warm the page cache for both sides
        t_base = _best(baseline)
        t_ours = _best(ours)
        ratio = t_base / t_ours
        mb = total / 1e6
        verdict = "ok" if ratio >= GOAL else "BELOW GOAL"
        return [
            f"files: {len(files)}, {mb:.0f} MB; cores: {os.cpu_count()}",
            f"sha256sum:              {t_base:6.2f} s  {mb / t_base:7.0f} MB/s",
            f"store verify --deep:    {t_ours:6.2f} s  {mb / t_ours:7.0f} MB/s",
            f"ratio: {ratio:.2f}x sha256sum (goal >= {GOAL:.0f}x) {verdict}",
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

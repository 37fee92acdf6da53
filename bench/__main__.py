"""`make bench`: every benchmark module under bench/ prints its numbers and ratios.

A benchmark module defines ``run() -> list[str]`` (lines to print). Goals are
ratios against baselines measured in the same run, never absolute timings in tests.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    only = set(sys.argv[1:])
    failed = 0
    for name in names:
        if only and name not in only:
            continue
        print(f"== {name}")
        try:
            for line in importlib.import_module(f"bench.{name}").run():
                print(f"   {line}")
        except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others
            failed += 1
            print(f"   FAILED: {type(exc).__name__}: {exc}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

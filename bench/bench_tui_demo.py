"""The demo recipe through the terminal UI against the same recipe headless, in one run.

Headless: `trace-tui --recipe demo --yes --runtime local` in a fresh home (a subprocess).
TUI: the real app (default backends, local runtime, `--yes`: every step confirmed) driven
headless by Textual's Pilot in another fresh home, timed from start to the run's end.
Goal: the TUI's wall time within 1.2x of headless (the UI must not slow the run down).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


TESTS = Path(__file__).resolve().parents[1] / "tests"  # fake_nvml: the machine both runs see (no GPU)


def headless(home: Path) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "trace_tui", "--recipe", "demo", "--yes", "--runtime", "local",
                          "--home", str(home)], capture_output=True, text=True, timeout=1800,
                         env=env)
    took = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(f"headless demo exit {out.returncode}: {out.stderr.strip()[-300:]}")
    return took


async def tui(home: Path) -> float:
    from trace_tui.tui.app import TraceTuiApp
    from trace_tui.tui.backends import default_backends
    from trace_tui.tui.screens.run import RunScreen

    from trace_tui.service.requests import RunOptions, RunRequest

    request = RunRequest(recipe="demo", options=RunOptions(home=str(home), runtime="local"), yes=True)
    app = TraceTuiApp(default_backends(request), recipe="demo", yes=True)
    t0 = time.monotonic()
    async with app.run_test(size=(120, 40)) as pilot:
        while True:
            runs = [s for s in app.screen_stack if isinstance(s, RunScreen)]
            if runs and runs[0].outcome not in (None, "running"):
                break
            if app.screen.__class__.__name__ == "PreviewScreen" and getattr(app.screen, "resolved", None):
                await pilot.press("enter")
            if time.monotonic() - t0 > 1800:
                raise RuntimeError("the TUI demo did not finish in 30 minutes")
            await pilot.pause(0.1)
        took = time.monotonic() - t0
        if runs[0].outcome != "completed":
            raise RuntimeError(f"the TUI demo ended {runs[0].outcome}")
    return took


def run() -> list[str]:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        os.environ.setdefault("TRACE_TUI_FAKE_NVML", "none")
        sys.path.insert(0, str(TESTS))
        base = headless(Path(a))
        ui = asyncio.run(tui(Path(b)))
    ratio = ui / base
    return [f"demo headless (--runtime local): {base:.1f} s", f"demo in the TUI (Pilot, --yes, local): {ui:.1f} s",
            f"ratio {ratio:.2f}x [goal <= 1.2x: {'ok' if ratio <= 1.2 else 'MISSED'}]"]


if __name__ == "__main__":
    for line in run():
        print(line)

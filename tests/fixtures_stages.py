"""Session fixture: one finished `demo` campaign (local runtime), shared by every test that needs one.

``demo_campaign`` runs ``trace-tui --recipe demo --yes --runtime local --campaign DIR`` once per
session with its own TRACE_TUI_HOME and returns {"campaign", "home", "env", "run"
(CompletedProcess), "seconds"}. Treat the campaign as read-only (copy it to tamper with it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


def trace_tui_cli(*args: str, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="session")
def demo_campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, TRACE_TUI_HOME=str(root / "home"))
    campaign = root / "campaign"
    t0 = time.monotonic()
    done = trace_tui_cli("--recipe", "demo", "--yes", "--runtime", "local", "--campaign", str(campaign), env=env)
    return {"campaign": campaign, "home": root / "home", "env": env, "run": done, "seconds": time.monotonic() - t0}

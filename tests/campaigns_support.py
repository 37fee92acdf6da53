"""Real campaigns in each state the Campaigns screen shows, made by the real engine (no tests here).

Each campaign is a run of a selftest recipe (tests/tui_support.py) with the Runner, Campaign and
LocalRuntime: complete (run to its end), partial (cancelled once its first step completed, so the
same rows every time), failed (a step that fails), running (a complete campaign whose lock a
process holds, as a runner does for its whole run), and a directory that is not a campaign.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tui_support import local_runner_factory, selftest_resolved

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.campaign_list import CHANGING_FILES
from trace_tui.engine.events import StepState

# A fixed "last change" per campaign (seconds since the epoch), so snapshots do not depend on the clock.
FIXED_TIMES = {"tuidone": 1_796_000_000.0, "tuipartial": 1_796_003_600.0, "tuifailed": 1_796_007_200.0,
               "tuirunning": 1_796_010_800.0}


def run_to(runner_factory, resolved: Any, path: Path, *, stop_after_first_step: bool = False) -> None:
    runner = runner_factory(resolved, path)

    def on_event(event: Any) -> None:
        # The runner checks for a cancel before each step: cancelling here stops it before the second.
        if stop_after_first_step and isinstance(event, StepState) and event.state == "completed":
            runner.cancel()

    runner.run(on_event)


def fix_times(path: Path, when: float) -> None:
    for name in CHANGING_FILES:
        p = path / name
        if p.exists():
            os.utime(p, (when, when))


class Campaigns:
    def __init__(self, root: Path, paths: dict[str, Path], held: Campaign) -> None:
        self.root, self.paths, self.held = root, paths, held

    def close(self) -> None:
        self.held.close()


def build_campaigns(root: Path, home: Path) -> Campaigns:
    """complete, partial, failed and running campaigns, and one directory that is not a campaign, under root."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    factory = local_runner_factory(home)
    paths: dict[str, Path] = {}
    for name, kwargs, stop in (("tuidone", {}, False), ("tuipartial", {}, True),
                               ("tuifailed", {"fail_step": True}, False), ("tuirunning", {}, False)):
        resolved = selftest_resolved(name=name, rows=3, **kwargs)
        paths[name] = root / resolved.run_tag
        run_to(factory, resolved, paths[name], stop_after_first_step=stop)
    (root / "not-a-campaign").mkdir()
    paths["junk"] = root / "not-a-campaign"
    held = Campaign(paths["tuirunning"])  # holds the run lock, as a runner does while it runs
    for name, when in FIXED_TIMES.items():
        fix_times(paths[name], when)
    return Campaigns(root, paths, held)

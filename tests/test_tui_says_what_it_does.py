"""The terminal UI says what it does: each place where it said one thing and did another, as a Pilot test
at 80x24 and 120x40.

Real parts: the recipes, the hardware report and checks, the engine (Runner, Campaign, LocalRuntime over
the selftest worker), verify. Fakes, at the narrowest edge (tests/tui_support.py): NVML
(tests/fake_nvml.py machines) and, for the hardware probe, an unreachable Docker client.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_flows import hardware_ready, text_of, wait_for
from test_tui_whole import screen_text
from tui_support import make_backends

from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.run import RunScreen
from trace_tui.tui.screens.steps import StepsScreen

SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES)
async def test_eval_preview_is_the_preview_and_makes_no_campaign(tmp_path: Path, size) -> None:
    """eval-preview "starts nothing, writes nothing": from the UI it made a campaign and a "completed" run
    of 0/787,320 rows, the preview itself only under `f`. It is now the preview of `full`, said so, and
    enter walks no steps and creates nothing."""
    backends = make_backends(tmp_path)
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        screen = app.screen
        await pilot.pause()
        body = text_of(app, "#preview-text")
        assert "eval-preview is this preview of full" in body and "starts nothing" in body
        assert "Run tag     full-" in body
        assert "same as: trace-tui preview --recipe full " in text_of(app, "#preview-command")
        assert "Walk the steps" not in screen_text(app)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is screen
        assert not any(isinstance(s, (StepsScreen, RunScreen)) for s in app.screen_stack)
        assert not (tmp_path / "campaigns").exists()

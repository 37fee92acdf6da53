"""The Campaigns screen: every campaign under the home, its state as `trace-tui status` reads it; watch, resume, verify.

Real parts: campaigns made by the real engine (tests/campaigns_support.py), the real status reader
(trace_tui.engine.status), the real run screen and verify. Fake: NVML (tests/fake_nvml.py), at the edge.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from campaigns_support import build_campaigns
from test_tui_flows import SIZE, hardware_ready, text_of, wait_for
from test_tui_whole import screen_text
from tui_support import make_backends, selftest_resolved

from trace_tui.engine.campaign_list import list_campaigns, summary_state
from trace_tui.engine.status import campaign_status
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.dialogs.detail import DetailScreen
from trace_tui.tui.screens.campaigns import CampaignsScreen
from trace_tui.tui.screens.run import RunScreen
from trace_tui.tui.screens.verify import VerifyScreen
from trace_tui.tui.widgets.table import LiteralTable


@pytest.fixture
def campaigns(tmp_path: Path):
    made = build_campaigns(tmp_path / "campaigns", tmp_path / "home")
    yield made
    made.close()


def backends_for(tmp_path: Path):
    names = ("tuidone", "tuipartial", "tuifailed", "tuirunning")
    extra = {n: selftest_resolved(name=n, rows=3, fail_step=n == "tuifailed") for n in names}
    return make_backends(tmp_path, extra_recipes=extra, campaigns_root=tmp_path / "campaigns")


async def open_campaigns(pilot, app) -> CampaignsScreen:
    await hardware_ready(pilot, app)
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen) and app.screen.summaries is not None,
                   what="the campaigns list")
    return app.screen


def test_states_and_rows_come_from_campaign_status(campaigns) -> None:
    rows = {s.path.name: s for s in list_campaigns(campaigns.root)}
    by_name = {n: rows[p.name] for n, p in campaigns.paths.items()}
    assert {n: s.state for n, s in by_name.items()} == {
        "tuidone": "complete", "tuipartial": "partial", "tuifailed": "failed", "tuirunning": "running",
        "junk": "unreadable"}
    for name in ("tuidone", "tuipartial", "tuifailed", "tuirunning"):
        st = campaign_status(campaigns.paths[name])
        s = by_name[name]
        assert (s.recipe, s.run_tag, s.rows_done, s.rows_total) == (st["recipe"], st["run_tag"], st["rows_done"],
                                                                    st["rows_total"])
    assert by_name["tuipartial"].rows_done < by_name["tuipartial"].rows_total or \
        campaign_status(campaigns.paths["tuipartial"])["complete"] is False
    assert "broken" in by_name["tuifailed"].message and "selftest" in by_name["tuifailed"].message
    assert "not a campaign" in by_name["junk"].message
    # attention first: running, failed, unreadable, partial, complete
    assert [s.state for s in list_campaigns(campaigns.root)] == ["running", "failed", "unreadable", "partial",
                                                                 "complete"]


def test_summary_state_rules() -> None:
    assert summary_state({"running": True, "steps": [{"step": "a", "state": "failed", "failures": ["x"]}]})[0] \
        == "running"
    assert summary_state({"steps": [{"step": "a", "state": "failed", "failures": []}]}) == ("failed",
                                                                                          "step a failed")
    assert summary_state({"steps": [], "last_run_state": "failed"})[0] == "failed"
    assert summary_state({"steps": [], "complete": True}) == ("complete", "")
    assert summary_state({"steps": [], "complete": False}) == ("partial", "")


async def test_list_shows_each_campaign_whole(tmp_path: Path, campaigns) -> None:
    app = TraceTuiApp(backends_for(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_campaigns(pilot, app)
        text = screen_text(app)
        for s in screen.summaries:
            line = next((ln for ln in text.splitlines() if s.run_tag in ln), "")
            assert s.state in line and s.recipe in line, (s.run_tag, text)
            if s.rows_total:
                assert f"{s.rows_done}/{s.rows_total}" in line
        assert "2026-11-29" in text or "2026-11-30" in text  # the fixed last-change times, in UTC
        # the footer offers only what the selected campaign allows: the running one is watched, not resumed
        table = screen.query_one(LiteralTable)
        assert table.selected_key() == str(campaigns.paths["tuirunning"])
        footer = screen_text(app).splitlines()[-1]
        assert "Watch" in footer and "Resume" not in footer


async def test_enter_watches_r_resumes_v_verifies(tmp_path: Path, campaigns) -> None:
    app = TraceTuiApp(backends_for(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_campaigns(pilot, app)
        table = screen.query_one(LiteralTable)
        partial = str(campaigns.paths["tuipartial"])
        table.move_cursor(row=table.get_row_index(partial))
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run screen")
        run = app.screen
        assert run.campaign_dir == campaigns.paths["tuipartial"] and not run.running
        assert "interrupted" in text_of(app, "#run-status")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen), what="back to the list")
        await pilot.press("r")  # resume straight from the list
        # a short run may be over already, with the verify screen on top of it
        await wait_for(pilot, lambda: any(isinstance(s, RunScreen) for s in app.screen_stack), what="the resumed run")
        run = next(s for s in app.screen_stack if isinstance(s, RunScreen))
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60, what="the resumed run to end")
        assert run.outcome == "completed"
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="verify after the run")
        app.pop_screen()
        app.pop_screen()
        await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen), what="back to the list")
        await wait_for(pilot, lambda: next(s for s in app.screen.summaries if str(s.path) == partial).state
                       == "complete", what="the list to show it complete")
        table.move_cursor(row=table.get_row_index(str(campaigns.paths["tuidone"])))
        await pilot.pause()
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="verify")
        assert app.screen.kind == "campaign" and app.screen.path == campaigns.paths["tuidone"]


async def test_filter_sort_and_details_on_the_list(tmp_path: Path, campaigns) -> None:
    app = TraceTuiApp(backends_for(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_campaigns(pilot, app)
        table = screen.query_one(LiteralTable)
        assert table.row_count == 5
        await pilot.press("slash", *"fail")
        await pilot.pause(0.2)
        assert table.row_count == 1 and table.row_text(0)[0] == "failed"
        await pilot.press("enter", "i")  # back to the table, then the row in full
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), what="the details")
        assert "selftest: something went wrong (as asked)" in app.screen.text
        assert f"trace-tui status --campaign {campaigns.paths['tuifailed']}" in app.screen.text
        await pilot.press("escape")
        await pilot.press("slash", "escape")  # esc clears the filter
        await pilot.pause(0.2)
        assert table.row_count == 5 and not table.filter_open
        await pilot.press("s", "s")  # by recipe, with failures (and the unreadable) first, then the partial
        await pilot.pause(0.2)
        assert [tuple(table.row_text(i)[:2]) for i in range(5)] == [
            ("unreadable", "?"), ("failed", "tuifailed"), ("partial", "tuipartial"), ("complete", "tuidone"),
            ("running", "tuirunning")]
        assert "recipe ↓" in screen_text(app)
        await pilot.press("s", "s", "s", "s")  # past the last column: the order as read (attention first)
        await pilot.pause(0.2)
        assert [table.row_text(i)[0] for i in range(5)] == ["running", "failed", "unreadable", "partial", "complete"]

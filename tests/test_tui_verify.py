"""The verify screen over the real verify package: the release copy, a tampered copy, and a campaign."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_tui_flows import SIZE, hardware_ready, text_of, wait_for
from tui_support import make_backends, selftest_resolved

from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.screens.verify import VerifyScreen
from trace_tui.tui.views import verify_view
from trace_tui.tui.widgets.checklist import ResultTable


def tampered_release(src: Path, dst: Path) -> Path:
    """A temp copy of the release whose stored overall mean of one model is off by 0.5."""
    shutil.copytree(src, dst)
    results = dst / "rlvr/evaluation/trace_eval/results.json"
    data = json.loads(results.read_text())
    data["scores"]["overall_summaries"][0]["mean"] += 0.5
    results.write_text(json.dumps(data, indent=2))
    return dst


def test_release_view_has_tables_and_aggregates(trace_release_dir: Path) -> None:
    from trace_tui.verify.release import verify_release

    view = verify_view(verify_release(trace_release_dir), "release")
    assert view.ok and view.counts["passed"] > 0 and view.counts.get("failed", 0) == 0
    titles = [t.title for t in view.tables]
    assert titles[0].startswith("Stored aggregates") and any(t.startswith("Overall") for t in titles)
    assert any(t == "TRACE validation" for t in titles)
    assert not any(t.differs for t in view.tables)


def test_tampered_release_fails_and_highlights_the_difference(tmp_path: Path, trace_release_dir: Path) -> None:
    from trace_tui.verify.release import verify_release

    release = tampered_release(trace_release_dir, tmp_path / "release")
    view = verify_view(verify_release(release), "release")
    assert not view.ok and view.counts["failed"] >= 1
    assert view.checks[0].status == "failed"  # failures first
    aggregates = view.tables[0]
    bad = [aggregates.rows[r] for r, _ in aggregates.differs]
    assert bad and all(row[1] == "failed" for row in bad)
    assert any("overall" in row[0] for row in bad)


async def test_verify_screen_on_tampered_release(tmp_path: Path, trace_release_dir: Path) -> None:
    release = tampered_release(trace_release_dir, tmp_path / "release")
    app = TraceTuiApp(make_backends(tmp_path, release_dir=release))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("v")
        screen = app.screen
        assert isinstance(screen, VerifyScreen)
        await wait_for(pilot, lambda: screen.view is not None)
        assert text_of(app, "#verify-summary").startswith("FAILED")
        first = screen.query_one("#verify-checklist").get_row_at(0)
        assert str(first[0]) == "failed"
        tables = list(screen.query(ResultTable))
        assert tables and tables[0].row_count == len(screen.view.tables[0].rows)


async def test_verify_screen_typed_path_and_campaign_toggle(tmp_path: Path, trace_release_dir: Path) -> None:
    """Reachable on its own: type a directory; ctrl+t switches between release and campaign."""
    resolved = selftest_resolved(name="tuiverify", host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuiverify": resolved})
    campaign = tmp_path / "campaigns" / resolved.run_tag
    import asyncio

    await asyncio.to_thread(backends.runner_factory(resolved, campaign).run, lambda e: None)
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.show_verify("release", None)
        await pilot.pause()
        screen = app.screen
        await pilot.press("ctrl+t")
        assert screen.kind == "campaign"
        for ch in str(campaign):
            await pilot.press(ch if ch != "/" else "slash")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view is not None, what="campaign verification")
        summary = text_of(app, "#verify-summary")
        assert "campaign" in summary and "passed" in summary, summary
        assert screen.view.checks


def test_campaign_comparisons_view_highlights_outside() -> None:
    from trace_tui.verify.campaign import CampaignVerification, Check, Comparison

    result = CampaignVerification(
        campaign="/c", recipe="validation",
        checks=[Check(id="complete", status="passed", subject="generate", message="every job complete")],
        comparisons=[
            Comparison(step="score", model="trace-qwen2.5-vl-3b", seed=42, benchmark="trace-validation", score=41.2,
                       published=41.05, difference=0.15, tolerance=2.16, rule="binomial 95%", verdict="within"),
            Comparison(step="score", model="qwen2.5-vl-3b-base", seed=42, benchmark="trace-validation", score=30.0,
                       published=24.45, difference=5.55, tolerance=1.88, rule="binomial 95%", verdict="outside"),
        ])
    view = verify_view(result, "campaign c")
    assert view.ok and "2 scores compared, 1 outside" in view.summary
    table = view.comparisons[0]
    assert table.rows[1][7] == "outside" and (1, 7) in table.differs and (0, 7) not in table.differs
    assert table.rows[0][3:6] == ("41.20", "41.05", "+0.15")

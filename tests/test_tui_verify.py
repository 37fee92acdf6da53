"""The verify screen over the real verify package: the release copy, a tampered copy, and a campaign."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_tui_flows import SIZE, hardware_ready, text_of, wait_for
from test_tui_whole import screen_text
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


# -- what the verify screen shows at 80x24 and 120x40 -----------------------------------------

async def open_release_verify(pilot, app):
    await hardware_ready(pilot, app)
    await pilot.press("v")
    screen = app.screen
    assert isinstance(screen, VerifyScreen)
    await wait_for(pilot, lambda: screen.view is not None, what="the release verification")
    await pilot.pause()
    return screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_number_keys_switch_tabs_from_a_table(tmp_path: Path, trace_release_dir: Path, size) -> None:
    """1/2/3 did nothing once a table on the Tables tab had the focus: the focus left in the hidden tab
    brought that tab back. Each key now shows its tab and gives the keys to its first table."""
    from trace_tui.tui.widgets.checklist import Checklist

    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=size) as pilot:
        screen = await open_release_verify(pilot, app)
        tabs = screen.query_one("#verify-tabs")
        await pilot.press("2")
        await pilot.pause()
        assert tabs.active == "tab-tables" and isinstance(screen.focused, ResultTable)
        for key, pane in (("1", "tab-checklist"), ("2", "tab-tables"), ("3", "tab-scores"), ("1", "tab-checklist")):
            await pilot.press(key)
            await pilot.pause()
            assert tabs.active == pane, (key, tabs.active)
        assert isinstance(screen.focused, Checklist)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_checklist_and_tables_fit_the_terminal(tmp_path: Path, trace_release_dir: Path, size) -> None:
    """At 80x24 the detail got ~11 columns (a row 9 lines) and `w` folded a hash over 7 lines; the Tables
    tab cut the aggregates' detail even at 120 columns. Rows stay short, hashes fold into 4 lines at most, and
    no table of the Tables tab is wider than the screen."""
    from trace_tui.tui.widgets.checklist import Checklist

    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=size) as pilot:
        screen = await open_release_verify(pilot, app)
        checklist = screen.query_one(Checklist)
        await pilot.pause()
        widths = [c.get_render_width(checklist) for c in checklist.ordered_columns]
        assert widths[4] >= 20, widths  # the detail
        heights = [r.height for r in checklist.rows.values()]
        assert heights[0] <= 4 and sorted(heights)[len(heights) // 2] <= 4, heights  # the first: 9 lines at 80
        await pilot.press("w")
        await pilot.pause(0.3)
        assert any(len(str(cell)) == 64 for cell in checklist.source[0][0])  # full hashes
        hash_lines = [len(str(checklist.get_row_at(i)[2]).splitlines()) for i in range(checklist.row_count)]
        assert max(hash_lines) <= (4 if size[0] == 80 else 3), hash_lines  # 7 at 80 columns
        assert sum(c.get_render_width(checklist) for c in checklist.ordered_columns) <= size[0]
        await pilot.press("2")
        await pilot.pause(0.3)
        aggregates = screen.query(ResultTable).first()
        assert aggregates.virtual_size.width <= aggregates.size.width, (aggregates.virtual_size, aggregates.size)
        shown = "\n".join(str(line) for line in screen_text(app).splitlines())
        assert "recomputation from 576" in shown and "(tolerance" in shown


async def test_first_verification_of_a_directory_is_not_again_and_toggle_clears_tables(
        tmp_path: Path, trace_release_dir: Path) -> None:
    """"verified again" was said for the first verification of a second directory (the count was per
    screen), and after ctrl+t the release's tables stayed under the campaign's line."""
    copy = tmp_path / "copy"
    shutil.copytree(trace_release_dir, copy)
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_release_verify(pilot, app)
        assert "again" not in text_of(app, "#verify-summary")
        await pilot.press("f5")
        await wait_for(pilot, lambda: "again" in text_of(app, "#verify-summary"), what="verified again")
        screen.path = copy
        await pilot.press("f5")
        await wait_for(pilot, lambda: str(copy) in text_of(app, "#verify-summary"), what="the copy verified")
        assert "again" not in text_of(app, "#verify-summary")
        assert list(screen.query(ResultTable))
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert screen.kind == "campaign"
        assert not list(screen.query(ResultTable))
        assert [str(w.render()) for w in screen.query_one("#verify-tables").children] == ["no tables"]


async def test_an_attestation_file_typed_in_the_path_box_is_checked_signature_first(tmp_path: Path) -> None:
    """A verification summary written by `verify --campaign --vsa` (signed with the home's key), typed into the
    path box: its signature and what it says are the checklist; the same file changed after signing fails,
    naming why. The real CLI writes it, the real checker (securesystemslib, in-toto-attestation) reads it."""
    import asyncio
    import base64
    import dataclasses
    import os
    import subprocess
    import sys

    from trace_tui.service.attest import check_attestation_file

    resolved = selftest_resolved(name="tuiattest", host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuiattest": resolved})
    campaign = tmp_path / "campaigns" / resolved.run_tag
    await asyncio.to_thread(backends.runner_factory(resolved, campaign).run, lambda e: None)
    home = tmp_path / "home"
    env = {**os.environ, "TRACE_TUI_HOME": str(home)}
    for args in (("keys", "init"), ("verify", "--campaign", str(campaign), "--vsa", str(tmp_path / "vsa.json"))):
        done = subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    backends = dataclasses.replace(backends, verify_attestation=lambda p: check_attestation_file(
        p, home=home, trust=[], campaign=None, allow_unsigned=False))
    forged = tmp_path / "forged.json"
    envelope = json.loads((tmp_path / "vsa.json").read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["predicate"]["verificationResult"] = "FAILED" if payload["predicate"]["verificationResult"] == "PASSED" \
        else "PASSED"
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    forged.write_text(json.dumps(envelope))
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.show_verify("campaign", None)
        await pilot.pause()
        screen = app.screen
        for path, verdict in ((tmp_path / "vsa.json", "VERIFIED"), (forged, "Cannot verify")):
            box = screen.query_one("#verify-path")
            box.value = str(path)
            box.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: str(path) in text_of(app, "#verify-summary"), what=f"{path.name} checked")
            summary = text_of(app, "#verify-summary")
            assert summary.startswith(verdict), summary
            if verdict == "VERIFIED":
                rows = {c.item: c for c in screen.view.checks}
                assert rows["signature"].status == "passed" and "verified against key" in rows["signature"].detail
                assert any("verification PASSED" in c.detail for c in screen.view.checks if c.item == "says")
        assert "does not verify: the signed statement was changed after signing" in text_of(app, "#verify-summary")

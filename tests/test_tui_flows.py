"""Pilot tests of the terminal UI's flows, over the real recipes, hardware checks, engine and verify.

Fakes: NVML (tests/fake_nvml.py machines) and, for the hardware probe only, an
unreachable Docker client — see tests/tui_support.py. The run flow uses the
real engine (Runner, Campaign, LocalRuntime) over the selftest stage worker.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from tui_support import make_backends, selftest_resolved

from trace_tui.engine.events import Progress
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.screens.hardware import HardwareScreen
from trace_tui.tui.screens.help import HelpScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.recipes import RecipesScreen
from trace_tui.tui.screens.run import RunScreen
from trace_tui.tui.screens.verify import VerifyScreen
from trace_tui.tui.widgets.progress_grid import ProgressGrid

SIZE = (120, 40)


async def wait_for(pilot, predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            stack = [type(s).__name__ for s in pilot.app.screen_stack]
            raise AssertionError(f"timed out waiting for {what} (screens: {stack})")
        await pilot.pause(0.05)


async def hardware_ready(pilot, app) -> HardwareScreen:
    screen = app.screen
    assert isinstance(screen, HardwareScreen)
    await wait_for(pilot, lambda: screen.view is not None, what="the hardware probe")
    await pilot.pause()
    return screen


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


async def start_run(pilot, app, recipe: str, *, decisions: str = "yy") -> RunScreen:
    await hardware_ready(pilot, app)
    app.open_recipe(recipe)
    await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                   what="the preview")
    await pilot.press("enter")
    if not app.confirm_all:
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted,
                       what="the steps screen")
        steps = app.screen
        for n, key in enumerate(decisions):
            await wait_for(pilot, lambda n=n: f"step {n + 1}/" in text_of(app, "#steps-title"), what=f"step {n + 1}")
            await pilot.press(key)
            await wait_for(pilot, lambda n=n: len(steps.decisions) > n, what=f"decision {n + 1}")
    # A short run may already be over, with the verify screen on top of it.
    await wait_for(pilot, lambda: any(isinstance(s, RunScreen) for s in app.screen_stack), what="the run screen")
    return next(s for s in app.screen_stack if isinstance(s, RunScreen))


async def test_hardware_without_gpu_says_so_and_offers_cpu_recipes(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, machine="none"))
    async with app.run_test(size=SIZE) as pilot:
        screen = await hardware_ready(pilot, app)
        message = text_of(app, "#hw-gpu-message")
        assert "No GPU" in message and "no NVIDIA driver" in message
        for name in ("verify", "eval-preview", "demo"):
            assert name in message
        rows = {r.name: r for r in screen.view.recipes}
        assert rows["validation"].verdict == "fail" and rows["validation"].reasons  # says why
        assert rows["eval-preview"].verdict != "fail"
        await pilot.press("r")
        assert isinstance(app.screen, RecipesScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, HardwareScreen)


async def test_hardware_8xh100_lists_gpus(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, machine="8xh100"))
    async with app.run_test(size=SIZE) as pilot:
        screen = await hardware_ready(pilot, app)
        assert len(screen.view.gpus) == 8
        assert screen.view.gpus[0].name == "NVIDIA H100 80GB HBM3" and screen.view.gpus[0].compute_capability == "9.0"
        assert "driver 570.124.06" in text_of(app, "#hw-gpu-message")
        assert screen.view.cuda == "12.8"


async def test_recipe_preview_steps_run_verify(tmp_path: Path) -> None:
    """hardware → recipe → preview → steps (confirm each) → run (real engine) → verify (the campaign)."""
    resolved = selftest_resolved()
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuitest": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("enter")  # the first recipe row: tuitest
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        preview = text_of(app, "#preview-text")
        assert "TUI test recipe" in preview and resolved.run_tag in preview
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted)
        assert "step 1/2: generate" in text_of(app, "#steps-title")
        assert "runs in: host" in text_of(app, "#step-text")
        await pilot.press("y")
        assert "step 2/2: report" in text_of(app, "#steps-title")
        await pilot.press("y")
        await wait_for(pilot, lambda: any(isinstance(s, RunScreen) for s in app.screen_stack))
        run = next(s for s in app.screen_stack if isinstance(s, RunScreen))
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run to finish")
        assert run.outcome == "completed", run.query_one("#run-status").render()
        model = run.model
        assert {s.state for s in model.steps.values()} == {"completed"}
        assert model.totals() == (24, 24)
        assert all(c.done == c.total == 6 for c in model.slices.values())
        assert (tmp_path / "campaigns" / resolved.run_tag / "state.sqlite").is_file()
        # The last screen of every recipe: verify, for this campaign.
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the verify screen")
        verify = app.screen
        assert verify.kind == "campaign" and verify.path == tmp_path / "campaigns" / resolved.run_tag
        await wait_for(pilot, lambda: "Verifying" not in text_of(app, "#verify-summary"), what="verification")
        await pilot.press("escape")
        assert app.screen is run
        assert app.is_running


async def test_skipped_step_does_not_run(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiskip")
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiskip": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiskip", decisions="ys")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))
        assert run.outcome == "completed"
        assert run.model.steps["report"].state == "skipped"
        assert run.model.steps["generate"].state == "completed"


async def test_yes_confirms_every_step(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiyes", host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiyes": resolved}), yes=True)
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiyes")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))
        assert run.outcome == "completed"


async def test_cancel_with_confirmation_then_resume(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuicancel", rows=30, delay=0.05, host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuicancel": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuicancel", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0, what="first rows")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # keep running
        assert app.screen is run and run.running
        await pilot.press("c")
        await pilot.press("y")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the cancel")
        assert run.outcome == "cancelled"
        assert "resumable" in text_of(app, "#run-status")
        done_at_cancel, total = run.model.totals()
        assert 0 < done_at_cancel < total
        await pilot.press("r")
        assert run.running
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60, what="the resumed run")
        assert run.outcome == "completed"
        assert run.model.totals() == (total, total)


async def test_quit_while_running_asks_and_stops_the_run(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiquit", rows=200, delay=0.05, host_step=False)
    campaign = tmp_path / "campaigns" / resolved.run_tag
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiquit": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiquit", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert run.running and app.is_running
        await pilot.press("q")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")
    assert app.return_value == 130
    # The runner stopped and released the campaign: it can be reopened (resumed) now.
    from trace_tui.engine.campaign import Campaign

    Campaign(campaign).close()


async def test_reattach_offers_resume(tmp_path: Path) -> None:
    """`trace-tui --campaign DIR` on an interrupted campaign shows its state and resumes on `r`."""
    resolved = selftest_resolved(name="tuireattach", rows=20, delay=0.05, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuireattach": resolved})
    campaign = tmp_path / "campaigns" / resolved.run_tag
    runner = backends.runner_factory(resolved, campaign)
    seen: list = []

    def on_event(event) -> None:
        seen.append(event)
        if isinstance(event, Progress) and event.done >= 3:
            runner.cancel()

    await asyncio.to_thread(runner.run, on_event)
    app = TraceTuiApp(backends, campaign=campaign)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the reattached run screen")
        run = app.screen
        assert not run.running and "interrupted" in text_of(app, "#run-status")
        done, total = run.model.totals()
        assert 0 < done < total and total == 80
        await pilot.press("r")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60)
        assert run.outcome == "completed" and run.model.totals() == (80, 80)


async def test_filter_progress_grid(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuifilter", host_step=False, benchmarks={"alpha": 3, "beta": 3, "gamma": 3})
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuifilter": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuifilter", decisions="y")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the verify screen")
        await pilot.press("escape")  # back to the finished run
        assert app.screen is run
        grid = run.query_one(ProgressGrid)
        table = grid.query_one("#grid-table")
        assert table.row_count == 3
        table.focus()
        await pilot.press("right")  # from the benchmark column onto seed 42: that slice's numbers
        await pilot.pause(0.1)
        assert "alpha seed 42: 3/3" in str(grid.query_one("#grid-summary").render())
        await pilot.press("slash")
        await pilot.press("b", "e")
        await pilot.pause(0.2)
        assert table.row_count == 1 and grid.filter_text == "be"
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert table.row_count == 3


async def test_help_is_generated_from_bindings(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#help-table")
        rows = [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
        actions = {r[1] for r in rows}
        for binding in HardwareScreen.BINDINGS + TraceTuiApp.BINDINGS:
            if binding.show:
                assert binding.description in actions
        await pilot.press("escape")
        assert isinstance(app.screen, HardwareScreen)


async def test_command_palette_opens_screens(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.press(*"Recipes")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RecipesScreen), what="the recipes screen")


async def test_verify_release_screen(tmp_path: Path, trace_release_dir: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("v")
        assert isinstance(app.screen, VerifyScreen)
        screen = app.screen
        await wait_for(pilot, lambda: screen.view is not None, what="verification")
        summary = text_of(app, "#verify-summary")
        assert summary.startswith("VERIFIED") and "passed" in summary and "absent" in summary
        assert screen.view.counts.get("failed", 0) == 0
        statuses = {c.status for c in screen.view.checks}
        assert statuses == {"passed", "absent"}


async def test_event_flood_stays_responsive_and_keeps_final_state(tmp_path: Path) -> None:
    """10,000 events/s from a thread: ≤ ~10 redraws/s, the UI answers keys, and the last state is shown."""
    resolved = selftest_resolved(name="tuiflood", host_step=False, benchmarks={f"b{i}": 1000 for i in range(8)})
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiflood": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        from trace_tui.tui.screens.run import RunScreen as RS

        run = RS(resolved, tmp_path / "flood", start=False)
        await app.push_screen(run)
        await pilot.pause(0.2)
        slices = list(resolved.slices)
        n = 20_000
        stop = threading.Event()

        def flood() -> None:
            t0 = time.monotonic()
            for i in range(n):
                s = slices[i % len(slices)]
                run.pump.push(Progress(step="generate", model=s.model, seed=s.seed, benchmark=s.benchmark,
                                       phase="generate", done=min(1000, i // len(slices) + 1), total=1000))
                if i % 100 == 99:  # pace to 10,000 events per second
                    ahead = (i + 1) / 10_000 - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
            for s in slices:  # the final state of every slice
                run.pump.push(Progress(step="generate", model=s.model, seed=s.seed, benchmark=s.benchmark,
                                       phase="generate", done=1000, total=1000))
            stop.set()

        redraws0 = run.redraw_count
        t0 = time.monotonic()
        thread = threading.Thread(target=flood)
        thread.start()
        lags = []  # how late the event loop wakes up: what a key press would wait for
        while not stop.is_set():
            k0 = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - k0 - 0.01)
        thread.join()
        elapsed = time.monotonic() - t0
        await pilot.pause(0.3)
        redraws = run.redraw_count - redraws0
        assert run.model.events_applied == n + len(slices)
        assert redraws <= 11 * elapsed + 3, (redraws, elapsed)
        assert max(lags) < 1.0, max(lags)  # generous for 2-core CI; bench/bench_tui.py reports the numbers
        assert run.pump.signals < 30 * elapsed  # one message per batch, not per event
        assert run.model.totals() == (16_000, 16_000)
        table = run.query_one("#grid-table")
        assert "1000/1000" in str(table.get_cell("b7", "seed-43"))
        await pilot.press("slash")  # and the keys still work
        assert run.query_one("#grid-filter").has_focus


async def test_reattach_follows_a_campaign_running_elsewhere(tmp_path: Path) -> None:
    """A campaign whose runner holds the lock: its live state is followed read-only; resume is refused."""
    resolved = selftest_resolved(name="tuilive", rows=40, delay=0.05, host_step=False, seeds=(42,))
    backends = make_backends(tmp_path, extra_recipes={"tuilive": resolved})
    campaign = tmp_path / "campaigns" / resolved.run_tag
    runner = backends.runner_factory(resolved, campaign)
    started = threading.Event()

    def on_event(event) -> None:
        if isinstance(event, Progress) and event.done >= 2:
            started.set()

    other = threading.Thread(target=runner.run, args=(on_event,))
    other.start()
    try:
        assert await asyncio.to_thread(started.wait, 30)
        app = TraceTuiApp(backends, campaign=campaign)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run screen")
            run = app.screen
            assert run.watching and "another process" in text_of(app, "#run-status")
            first = run.model.totals()[0]
            await wait_for(pilot, lambda: run.model.totals()[0] > first, what="live progress from the database")
            await pilot.press("r")
            assert not run.running  # refused: another process holds the campaign
            await asyncio.to_thread(other.join, 60)
            await wait_for(pilot, lambda: not run.watching, what="the other run to end")
            assert "has ended (completed)" in text_of(app, "#run-status")
            assert run.model.totals() == (80, 80)
    finally:
        runner.cancel()
        other.join(60)


@pytest.mark.slow
async def test_demo_from_hardware_to_verify(tmp_path: Path) -> None:
    """The whole path on this machine: no GPU → `d` (demo) → preview → confirm all → run (local runtime,
    tiny model, real stages) → the verify screen on the campaign it produced."""
    app = TraceTuiApp(make_backends(tmp_path, machine="none"))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the demo preview")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted)
        assert "step 1/" in text_of(app, "#steps-title")
        await pilot.press("a")  # confirm all
        await wait_for(pilot, lambda: any(isinstance(s, RunScreen) for s in app.screen_stack))
        run = next(s for s in app.screen_stack if isinstance(s, RunScreen))
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=600, what="the demo run")
        assert run.outcome == "completed", text_of(app, "#run-status")
        assert all(s.state == "completed" for s in run.model.steps.values())
        assert run.model.slices and all(c.complete for c in run.model.slices.values())
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the verify screen")
        verify = app.screen
        await wait_for(pilot, lambda: verify.view is not None, timeout=60, what="campaign verification")
        assert verify.view.ok, verify.view.summary
        assert text_of(app, "#verify-summary").startswith("VERIFIED")


async def test_failed_step_shows_its_log(tmp_path: Path) -> None:
    """A step that fails: the run says so, the failed step is selected, and its log file's tail is shown."""
    resolved = selftest_resolved(name="tuifail", fail_step=True)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuifail": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuifail", decisions="yyy")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run to fail")
        assert run.outcome == "failed" and app.exit_code == 1
        assert run.model.steps["broken"].state == "failed" and run.model.steps["report"].state == "pending"
        assert run.query_one("#run-steps").selected_step == "broken"
        await wait_for(pilot, lambda: run._file_tail is not None, what="the log file")
        path, lines = run._file_tail
        assert path.startswith("logs/broken/")
        assert "selftest: something went wrong (as asked)" in lines
        assert isinstance(app.screen, RunScreen)  # no verify screen after a failure

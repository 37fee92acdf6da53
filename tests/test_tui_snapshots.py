"""Snapshots of every screen at 80x24 and 120x40, on no GPU and on 8x H100.

The hardware is injected the way the hardware tests do it (tests/fake_nvml.py
machines through the real trace_tui.hardware probe); Docker and the free disk
are fixed for the snapshots (tests/tui_support.py), the clock is fixed (rates
and ETAs show "—"), and the release copy is reached through a fixed path, so
nothing on screen depends on the host, the time or a temp directory.
Regenerate with `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from campaigns_support import build_campaigns
from tui_support import FIXED_CLOCK, make_backends

from trace_tui.engine.events import Log, Progress, SliceState, StepState
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.progress import ProgressModel
from trace_tui.tui.screens.run import RunScreen, seed_model

pytestmark = pytest.mark.slow  # ~2 s per snapshot (a full app start each)

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
MACHINES = ("none", "8xh100")
SCREENS = ("hardware", "recipes", "preview", "steps", "run", "run-cancelled", "run-done", "verify", "verify-tables",
           "verify-scores", "help")
FIXED_RELEASE = Path("/tmp/trace-tui-snapshots/trace-release")
FIXED_CAMPAIGNS = Path("/tmp/trace-tui-snapshots/campaigns")


@pytest.fixture(scope="module")
def fixed_release(trace_release_dir: Path) -> Path:
    """The release copy under a fixed path (a symlink), so the path on the verify screen never changes."""
    FIXED_RELEASE.parent.mkdir(parents=True, exist_ok=True)
    if FIXED_RELEASE.is_symlink() and os.readlink(FIXED_RELEASE) != str(trace_release_dir):
        FIXED_RELEASE.unlink()
    if not FIXED_RELEASE.exists():
        FIXED_RELEASE.symlink_to(trace_release_dir)
    return FIXED_RELEASE


def campaign_model(resolved) -> ProgressModel:
    """A campaign part-way through, as the engine's events describe it (deterministic)."""
    model = ProgressModel(clock=FIXED_CLOCK)
    seed_model(model, resolved)
    first = resolved.recipe.steps[0].id
    gen = next((s.id for s in resolved.recipe.steps if s.per_slice), first)
    for step in resolved.recipe.steps:
        if step.id == gen:
            break
        model.apply(StepState(step=step.id, state="completed"))
    model.apply(StepState(step=gen, state="running"))
    for i, s in enumerate(resolved.slices[:40]):
        total = next(b.rows for b in resolved.benchmarks if b.key == s.benchmark)
        if i % 3 == 0:
            model.apply(SliceState(step=gen, model=s.model, seed=s.seed, benchmark=s.benchmark, state="completed",
                                   done=total, total=total))
        else:
            model.apply(Progress(step=gen, model=s.model, seed=s.seed, benchmark=s.benchmark, phase="generate",
                                 done=(i * 37) % max(total, 1), total=total))
    for line in ("starting worker trace_tui.stages.generate", "loaded model (bf16) in 41.2 s",
                 "generating 500 rows, seed per row"):
        model.apply(Log(step=gen, message=line))
    return model


def finished_model(resolved, outcome: str) -> ProgressModel:
    """The same campaign cancelled part-way (rates gone), or done with every slice scored."""
    model = campaign_model(resolved)
    gen = next((s.id for s in resolved.recipe.steps if s.per_slice), resolved.recipe.steps[0].id)
    if outcome == "cancelled":
        model.apply(StepState(step=gen, state="cancelled"))
    else:
        for i, s in enumerate(resolved.slices):
            total = next(b.rows for b in resolved.benchmarks if b.key == s.benchmark)
            model.apply(SliceState(step=gen, model=s.model, seed=s.seed, benchmark=s.benchmark, state="completed",
                                   done=total, total=total, score=40.0 + (i * 7) % 50 + 0.25))
        for step in resolved.recipe.steps:
            model.apply(StepState(step=step.id, state="completed"))
    model.stop_rates()
    return model


NOTES = {"run": "interrupted campaign · r: resume · v: verify",
         "run-cancelled": "cancelled · containers stopped · campaign is resumable · r: resume",
         "run-done": "completed · v: verify the campaign"}


async def goto(pilot, screen: str, release: Path) -> None:
    app = pilot.app
    await pilot.wait_for_scheduled_animations()
    for _ in range(400):  # the hardware probe runs in a worker
        if getattr(app.screen, "view", None) is not None:
            break
        await pilot.pause(0.05)
    if screen == "recipes":
        await pilot.press("r")
    elif screen in ("preview", "steps"):
        app.open_recipe("full")
        for _ in range(400):
            if getattr(app.screen, "resolved", None) is not None:
                break
            await pilot.pause(0.05)
        if screen == "steps":
            await pilot.press("enter")
    elif screen.startswith("run"):
        resolved = app.backends.resolve_recipe(app.backends.load_recipe("full"))
        model = campaign_model(resolved) if screen == "run" else finished_model(resolved, screen[len("run-"):])
        run = RunScreen(resolved, Path("/campaigns") / resolved.run_tag, start=False, model=model,
                        note=NOTES[screen], clock=FIXED_CLOCK, runtime="docker")
        await app.push_screen(run)
        if screen == "run":  # in progress: what a running campaign's screen shows (no runner needed for a picture)
            run.outcome = "running"
            run._status(f"running · campaign {run.campaign_label}")
            run.refresh_bindings()
    elif screen.startswith("verify") or screen == "help":
        app.show_verify("release", release)
        for _ in range(400):
            if getattr(app.screen, "view", None) is not None:
                break
            await pilot.pause(0.05)
        if screen == "help":
            await pilot.press("question_mark")
        elif screen == "verify-tables":
            await pilot.press("2")
        elif screen == "verify-scores":
            await pilot.press("3")
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("screen", SCREENS)
def test_screen_snapshot(snap_compare, tmp_path: Path, fixed_release: Path, screen: str, machine: str, size: str):
    app = TraceTuiApp(make_backends(tmp_path, machine=machine, snapshot=True, release_dir=fixed_release))

    async def run_before(pilot) -> None:
        await goto(pilot, screen, fixed_release)

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


def test_no_color_snapshot(snap_compare, tmp_path: Path, fixed_release: Path, monkeypatch) -> None:
    """NO_COLOR: Textual renders without colour; the screen stays readable (marks, not colours, carry state)."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = TraceTuiApp(make_backends(tmp_path, machine="none", snapshot=True, release_dir=fixed_release))
    assert app.no_color

    async def run_before(pilot) -> None:
        await goto(pilot, "hardware", fixed_release)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@pytest.fixture(scope="module")
def fixed_campaigns(tmp_path_factory):
    """Real campaigns in every state, under a fixed path with fixed last-change times (tests/campaigns_support.py)."""
    made = build_campaigns(FIXED_CAMPAIGNS, tmp_path_factory.mktemp("home"))
    yield made
    made.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_campaigns_snapshot(snap_compare, tmp_path: Path, fixed_release: Path, fixed_campaigns, size: str) -> None:
    app = TraceTuiApp(make_backends(tmp_path, machine="none", snapshot=True, release_dir=fixed_release,
                                    campaigns_root=FIXED_CAMPAIGNS))

    async def run_before(pilot) -> None:
        await goto(pilot, "hardware", fixed_release)
        await pilot.press("c")
        for _ in range(400):
            if getattr(app.screen, "summaries", None) is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)

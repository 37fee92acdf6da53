"""One rule for the TUI and headless runs: a stage runs only from an image the image lock names; and a step
skipped in the TUI leaves a campaign that verifies.

Real parts: the Docker engine (a tiny image given trace-tui's own tag, as an old or foreign build leaves one),
the `trace-tui` CLI as a subprocess, the app's real backends (`default_backends`) under the Pilot, the engine
with the local runtime, and `verify --campaign`. Fake: NVML (tests/fake_nvml.py), where a Pilot test needs
a machine, at the narrowest edge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from images_fixtures import docker_client, make_tiny_image  # noqa: F401 - a fixture
from test_tui_flows import SIZE, start_run, wait_for
from tui_support import make_backends, selftest_resolved

from trace_tui import __version__
from trace_tui.cli import build_parser
from trace_tui.commands.launch import run_request
from trace_tui.runtime.base import LABEL_STEP
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.backends import default_backends
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.refused import RefusedScreen

REPO = Path(__file__).resolve().parents[1]

DOCKER_RECIPE = """name: lockrule
title: lock rule
purpose: a step in a container
canonical: false
image_flavor: cpu
selection: {suite: demo, seeds: all, benchmarks: all}
local_models:
  - {id: tiny-a, label: A, store_entry: "local:model/tiny-a"}
demo_tasks:
  - {key: t1, rows: 2}
steps:
  - {id: gen, title: rows, stage: infer, image: infer, per_slice: true, run: [trace_tui.stages.selftest, rows]}
"""


@pytest.fixture()
def unlocked_image(docker_client):  # noqa: F811 - the fixture
    """trace-tui's own tag for the infer image on an image no lock names (removed afterwards)."""
    tag = f"trace-tui/infer:{__version__}-cpu"
    import docker.errors

    try:
        docker_client.images.get(tag)
        made = None  # already there (a build without its lock): the very case; leave it as it was
    except docker.errors.ImageNotFound:
        made = make_tiny_image(docker_client, "unlocked")
        made.tag("trace-tui/infer", f"{__version__}-cpu")
    yield tag
    if made is not None:
        for name in (tag, made.id):
            try:
                docker_client.images.remove(name, force=True)
            except docker.errors.APIError:
                pass


def containers_of(client, tag: str) -> list:
    return [c for c in client.containers.list(all=True, filters={"label": LABEL_STEP})
            if tag in (c.image.tags or [])]


def test_headless_refuses_an_image_the_lock_does_not_name(tmp_path: Path, unlocked_image: str,
                                                          docker_client) -> None:  # noqa: F811
    recipe = tmp_path / "r.yaml"
    recipe.write_text(DOCKER_RECIPE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_TUI_IMAGE_")}
    env.update(TRACE_TUI_IMAGES_LOCK=str(tmp_path / "no-lock.json"), TRACE_TUI_HOME=str(tmp_path / "home"))
    out = subprocess.run([sys.executable, "-m", "trace_tui", "--recipe", str(recipe), "--yes", "--runtime", "docker",
                          "--campaign", str(tmp_path / "c")], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=120)
    assert out.returncode == 3, out.stderr
    assert "not in the image lock" in out.stderr and "make appliance" in out.stderr, out.stderr
    assert "--runtime local" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "c").exists()  # refused before the campaign is made
    assert containers_of(docker_client, unlocked_image) == []


async def test_the_tui_refuses_the_same_run(tmp_path: Path, unlocked_image: str, monkeypatch,
                                            docker_client) -> None:  # noqa: F811
    """The app's real backends (Docker, the hardware probe, the runner) with NVML faked as no GPU."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(DOCKER_RECIPE)
    for key in [k for k in os.environ if k.startswith("TRACE_TUI_IMAGE_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(tmp_path / "no-lock.json"))
    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "none")
    args = build_parser().parse_args(["--home", str(tmp_path / "home"), "--runtime", "docker"])
    app = TraceTuiApp(default_backends(run_request(args)))
    async with app.run_test(size=SIZE) as pilot:
        app.open_recipe(str(recipe))
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted, what="steps")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RefusedScreen), timeout=60, what="the refusal")
        shown = " ".join(app.screen.problems)
        assert "not in the image lock" in shown and "make appliance" in shown, shown
        assert app.exit_code == 3
    assert containers_of(docker_client, unlocked_image) == []
    assert not any((tmp_path / "home").rglob("state.sqlite"))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_skipped_step_leaves_a_campaign_that_verifies(tmp_path: Path, size: tuple[int, int]) -> None:
    """Skip the second step in Steps: the run completes and `verify --campaign` passes (it used to report the
    recorded configuration hash as "a field was edited")."""
    from trace_tui.verify.campaign import verify_campaign

    resolved = selftest_resolved(name="tuiskipv")
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiskipv": resolved}))
    async with app.run_test(size=size) as pilot:
        run = await start_run(pilot, app, "tuiskipv", decisions="ys")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run")
        assert run.outcome == "completed"
        assert run.model.steps["report"].state == "skipped"
    result = verify_campaign(tmp_path / "campaigns" / resolved.run_tag)
    failed = [c for c in result.checks if c.status == "failed"]
    assert result.ok(), failed
    out = subprocess.run([sys.executable, "-m", "trace_tui", "verify", "--campaign",
                          str(tmp_path / "campaigns" / resolved.run_tag)], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_step_skipped_in_steps_is_listed_as_skipped_by_status(tmp_path: Path, size: tuple[int, int]) -> None:
    """Skip the second step in Steps: `trace-tui status` lists it, as skipped, in its place between the
    steps that ran (it was missing: the campaign listed only the steps that ran)."""
    resolved = selftest_resolved(name="tuiskips")
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiskips": resolved}))
    async with app.run_test(size=size) as pilot:
        run = await start_run(pilot, app, "tuiskips", decisions="ys")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run")
        assert run.outcome == "completed" and run.model.steps["report"].state == "skipped"
    campaign = tmp_path / "campaigns" / resolved.run_tag
    out = subprocess.run([sys.executable, "-m", "trace_tui", "status", "--campaign", str(campaign), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    steps = {s["step"]: s for s in json.loads(out.stdout)["steps"]}
    assert [s.id for s in resolved.recipe.steps] == list(steps)
    assert steps["report"]["state"] == "skipped" and "skipped" in steps["report"]["message"]
    assert all(s["state"] == "completed" for name, s in steps.items() if name != "report")
    assert json.loads(out.stdout)["complete"] is True
    text = subprocess.run([sys.executable, "-m", "trace_tui", "status", "--campaign", str(campaign)],
                          capture_output=True, text=True, cwd=REPO, timeout=120).stdout
    assert any(line.split()[:2] == ["report", "skipped"] for line in text.splitlines()), text

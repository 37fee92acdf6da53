"""What the UI offers and shows is what a run does: a first start offers the local runtime for the demo, a
runtime chosen in one recipe's Options stays that recipe's, the run screen names the runtime the campaign
runs on, and the "same as" command keeps `--campaign`.

Real parts: the app's own backends (`default_backends`: recipes, hardware checks, the campaign's recorded
runtime), the real argument parser, the CLI for making a campaign on the local runtime, the Pilot at 80x24 and
120x40. Fake: NVML (tests/fake_nvml.py, "none": this machine's behaviour without a driver), at its edge; the
image lock is a path where none exists (a first start).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_tui_flows import hardware_ready, text_of, wait_for
from test_tui_whole import parses, screen_text

from trace_tui.cli import build_parser
from trace_tui.commands.launch import run_request, slurm_options
from trace_tui.tui.app import TraceTuiApp, build_app
from trace_tui.tui.dialogs.options import OptionsScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.run import RunScreen

REPO = Path(__file__).resolve().parents[1]
SIZES = [(80, 24), (120, 40)]

HOST_RECIPE = """name: hostonly
title: host only
purpose: rows on the host
canonical: false
selection: {suite: demo, seeds: all, benchmarks: all}
local_models:
  - {id: tiny-a, label: A, store_entry: "local:model/tiny-a"}
demo_tasks:
  - {key: t1, rows: 2}
steps:
  - {id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]}
"""


@pytest.fixture(autouse=True)
def first_start(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "none")
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(tmp_path / "no-lock" / "images.lock.json"))
    for key in [k for k in os.environ if k.startswith("TRACE_TUI_IMAGE_")]:
        monkeypatch.delenv(key)


def app_for(*argv: str) -> TraceTuiApp:
    args = build_parser().parse_args(list(argv))
    return build_app(run_request(args), slurm_options(args))


async def preview_of(pilot, app, name: str) -> PreviewScreen:
    app.open_recipe(name)
    await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None
                   and app.screen.recipe_name == name, what=f"the preview of {name}")
    await pilot.pause()
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_a_first_start_offers_the_local_runtime_for_the_demo(tmp_path: Path, size) -> None:
    app = app_for("--home", str(tmp_path / "home"), "--runtime", "docker")
    async with app.run_test(size=size) as pilot:
        screen = await hardware_ready(pilot, app)
        demo = next(r for r in screen.view.recipes if r.name == "demo")
        assert demo.verdict == "fail"
        assert any("make appliance" in r and "--runtime local" in r for r in demo.reasons), demo.reasons
        preview = await preview_of(pilot, app, "demo")
        assert any("--runtime local" in c.reason for c in preview.checks if c.verdict == "fail")
        preview.query_one("#preview-body").scroll_end(animate=False)  # the steps' checks, at the end
        await pilot.pause(0.2)
        assert "--runtime local" in " ".join(screen_text(app).split())


@pytest.mark.parametrize("size", SIZES)
async def test_a_runtime_chosen_in_one_recipes_options_stays_that_recipes(tmp_path: Path, size) -> None:
    app = app_for("--home", str(tmp_path / "home"))
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        auto = app.backends.runtime_label()
        await preview_of(pilot, app, "demo")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OptionsScreen), what="the options")
        other = "local" if auto == "docker" else "docker"
        next(b for b in app.screen.query_one("#options-runtime").query("RadioButton")
             if str(b.label) == other).value = True
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview again")
        assert app.backends.runtime_label() == other
        assert f"--runtime {other}" in text_of(app, "#preview-command")
        await pilot.press("escape")
        await preview_of(pilot, app, "preflight")
        assert app.choices.runtime is None and app.backends.runtime_label() == auto
        assert "--runtime" not in text_of(app, "#preview-command")
        await pilot.press("escape")
        await preview_of(pilot, app, "demo")  # its own choice is the command line's again: nothing carried over
        assert app.backends.runtime_label() == auto


@pytest.mark.parametrize("size", SIZES)
async def test_the_run_screen_names_the_runtime_the_campaign_runs_on(tmp_path: Path, size) -> None:
    """A campaign that ran on the local runtime, opened after Docker was chosen in a recipe's Options: it
    resumes on the local runtime (as headless does without --runtime), and its run screen says so."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(HOST_RECIPE)
    campaign = tmp_path / "c"
    made = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path / "home"), "--recipe",
                           str(recipe), "--yes", "--runtime", "local", "--campaign", str(campaign)],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "TRACE_TUI_FAKE_NVML"})
    assert made.returncode == 0, made.stderr
    app = app_for("--home", str(tmp_path / "home"))
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        await preview_of(pilot, app, "demo")
        app.set_choices(app.choices.replace(runtime="docker"))  # what Options' Apply does
        assert app.backends.runtime_label() == "docker"
        app.reattach(campaign)
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the campaign's run screen")
        await pilot.pause(0.2)
        assert app.screen.runtime == "local"
        assert "runtime local" in " ".join(screen_text(app).split())


@pytest.mark.parametrize("size", SIZES)
async def test_the_same_as_line_keeps_the_campaign(tmp_path: Path, size) -> None:
    where = tmp_path / "my campaign"
    app = app_for("--home", str(tmp_path / "home"), "--recipe", "demo", "--campaign", str(where))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        line = " ".join(text_of(app, "#preview-command").split())
        command = app.choices.command()
        assert f"--campaign {shlex.quote(str(where))}" in command and command in line, line
        parses(command)
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.campaign == str(where) and args.recipe == "demo"
        await pilot.press("escape")
        other = await preview_of(pilot, app, "preflight")
        # the line says where that recipe's run goes: the folder while it is new (or that recipe's), else its own
        goes_there = app.backends.campaign_dir_for(other.resolved) == where.resolve()
        assert ("--campaign" in text_of(app, "#preview-command")) == goes_there

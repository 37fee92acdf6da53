"""The UI drives what the command line does: run options with their equivalent command, the runtime and
images on the run screen, and moving between screens while a run goes on.

Real parts: the recipes, the real `trace-tui` argument parser (every command shown must parse), the
CLI itself for a Slurm submission (run as a subprocess, as a user's shell would), the engine with the
local runtime. Fakes: NVML (tests/fake_nvml.py) and, for the image status, the Docker client the hardware
probe reads (tests/tui_support.py), at the narrowest edge.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_tui_flows import SIZE, hardware_ready, start_run, text_of, wait_for
from test_tui_whole import parses, screen_text
from textual.css.query import NoMatches
from tui_support import make_backends, selftest_resolved

from trace_tui.cli import build_parser
from trace_tui.commands.launch import run_request, slurm_options
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.backends import default_backends
from trace_tui.tui.choices import RunChoices, choices_from_request
from trace_tui.tui.dialogs.detail import DetailScreen
from trace_tui.tui.dialogs.options import OptionsScreen
from trace_tui.tui.screens.campaigns import CampaignsScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.run import RunScreen
from trace_tui.tui.views import run_env_text

EVERYTHING = RunChoices(recipe="full", models=("qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"), seeds=(42, 44),
                        runtime="local", offline=True, scheduler="slurm", partition="gpu a100", account="lab",
                        gpus_per_node=4, time="2-00:00:00", max_parallel=3)


@pytest.mark.parametrize("choices", [RunChoices(recipe="demo"), RunChoices(recipe="demo", runtime="docker"),
                                     EVERYTHING, EVERYTHING.replace(scheduler="none")])
def test_the_command_line_parses_to_the_same_choices(choices: RunChoices) -> None:
    parses(choices.command())
    args = build_parser().parse_args(shlex.split(choices.command())[1:])
    expected = choices if choices.scheduler == "slurm" else choices.replace(
        **dict.fromkeys(("partition", "account", "gpus_per_node", "time", "max_parallel")))
    assert choices_from_request(run_request(args), slurm_options(args)) == expected
    assert args.recipe == choices.recipe and args.command is None


@pytest.mark.parametrize("bad", [{"runtime": "kubernetes"}, {"scheduler": "pbs"}])
def test_choices_refuse_what_the_command_line_would(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad.values()))):
        RunChoices(recipe="demo", **bad)
    assert RunChoices(models=["a"]).models == ("a",)  # kept as a tuple: the record stays hashable


def test_choices_reach_the_backends_runtime_and_offline(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--home", str(tmp_path), "--runtime", "docker"])
    backends = default_backends(run_request(args))
    assert backends.runtime_label() == "docker"
    backends.choose(RunChoices(recipe="demo", runtime="local", offline=True))
    assert backends.runtime_label() == "local"


def test_run_env_names_runtime_and_image_drift() -> None:
    drift = "trace-tui/infer:1 sha256:aaaaaaaaaaaa as locked (the tag now points to sha256:bbbbbbbbbbbb)"
    text = run_env_text("docker", [("infer", drift), ("train", "not built: no lock")], ["infer", "infer"])
    assert text == f"runtime docker · image infer: {drift}"
    assert "no container images" in run_env_text("local", [("infer", drift)], ["infer"])
    same = run_env_text("docker", [("infer", "not built: no lock"), ("score", "not built: no lock")],
                        ["infer", "score"])
    assert same == "runtime docker · images infer, score: not built: no lock"  # said once, not cut


async def open_preview(pilot, app, name: str) -> PreviewScreen:
    await hardware_ready(pilot, app)
    app.open_recipe(name)
    await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                   what="the preview")
    return app.screen


async def test_options_update_the_command_live_and_narrow_the_run(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        preview = await open_preview(pilot, app, "full")
        assert text_of(app, "#preview-command").startswith("same as: trace-tui --recipe full ")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OptionsScreen), what="the options")
        options = app.screen
        seen = [text_of(app, "#options-command")]
        await pilot.press("space")  # the first model off
        seen.append(text_of(app, "#options-command"))
        await pilot.press("tab", "space")  # the first seed off
        seen.append(text_of(app, "#options-command"))
        options.query_one("#options-offline").value = True
        await pilot.pause()
        seen.append(text_of(app, "#options-command"))
        buttons = options.query_one("#options-runtime").query("RadioButton")
        next(b for b in buttons if str(b.label) == "local").value = True
        await pilot.pause()
        seen.append(text_of(app, "#options-command"))
        assert len(set(seen)) == len(seen), seen  # each change shows at once
        command = options.choices.command()
        assert f"same as: {command}" in " ".join(seen[-1].split())
        parses(command)
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.runtime == "local" and args.offline and args.seeds == [43, 44]
        assert args.models == preview.all_models[1:]
        await pilot.press("y")
        assert app.clipboard == command
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview with the new options")
        assert app.choices.command() == command
        assert command in " ".join(text_of(app, "#preview-command").split())
        assert [m.id for m in preview.resolved.models] == preview.all_models[1:]
        assert list(preview.resolved.seeds) == [43, 44]


async def test_the_slurm_choice_submits_through_the_cluster_module(tmp_path: Path, monkeypatch) -> None:
    """Slurm chosen on the Options screen is the one choice of where runs go (the w form shows the same),
    and a run goes through the command line's own submission (trace_tui.engine.cluster), followed on the
    cluster screen. With no `sbatch` on PATH (the real check; the submission against a real cluster is
    tests/test_cluster_slurm.py), its one-line refusal is shown whole and nothing is submitted."""
    from trace_tui.tui.cluster_backend import cluster_backend
    from trace_tui.tui.screens.cluster import ClusterScreen

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    backends = make_backends(tmp_path)
    backends.cluster = cluster_backend()
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        await open_preview(pilot, app, "demo")
        app.set_choices(app.choices.replace(scheduler="slurm", partition="debug", max_parallel=2))
        assert app.scheduler.slurm and (app.scheduler.partition, app.scheduler.max_parallel) == ("debug", 2)
        args = build_parser().parse_args(app.choices.argv())
        assert (args.scheduler, args.partition, args.max_parallel) == ("slurm", "debug", 2)
        app.start_run(app.screen.resolved)
        await wait_for(pilot, lambda: isinstance(app.screen, ClusterScreen), timeout=60, what="the cluster screen")
        def status_line() -> str:
            try:
                return text_of(app, "#cluster-status")
            except NoMatches:  # the cluster screen not composed yet
                return ""

        await wait_for(pilot, lambda: "sbatch" in status_line(), timeout=120, what="the submission's refusal")
        text = text_of(app, "#cluster-status")
        assert "not on PATH" in text and "Traceback" not in text, text
        assert not (app.screen.campaign_dir / "slurm" / "submissions.json").exists()


async def test_the_run_screen_shows_runtime_and_images(tmp_path: Path) -> None:
    from trace_tui.recipe import catalog as recipes

    backends = make_backends(tmp_path)
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        drift = "trace-tui/infer:1 sha256:aaaa as locked (the tag now points to sha256:bbbb)"
        app.hardware_view = app.hardware_view.__class__(images=(("infer", drift),))
        resolved = recipes.resolve_recipe(recipes.load_recipe("validation"))
        used = [s.image for s in resolved.recipe.steps if s.image]
        assert "infer" in used
        run = RunScreen(resolved, tmp_path / "c", start=False, runtime="docker")
        await app.push_screen(run)
        await pilot.pause(0.2)
        env = " ".join(text_of(app, "#run-env").split())
        assert env.startswith("runtime docker · image infer: trace-tui/infer:1 sha256:aaaa as locked "
                              "(the tag now points to sha256:bbbb)")
        assert "runtime docker" in text_of(app, "#run-title")


async def test_moving_away_from_a_running_run_and_back(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiaway", rows=400, delay=0.03, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuiaway": resolved})
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiaway", decisions="y")
        await wait_for(pilot, lambda: run.running and run.model.totals()[0] > 0, what="rows")
        await pilot.press("escape")  # away, while it runs
        await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen) and app.screen.summaries is not None,
                       what="the campaigns list")
        listed = next(s for s in app.screen.summaries if s.path == run.campaign_dir)
        assert listed.state == "running"
        before = run.model.totals()[0]
        await wait_for(pilot, lambda: run.model.totals()[0] > before, what="the run to go on meanwhile")
        table = app.screen.query_one("#campaigns-table")
        table.move_cursor(row=table.get_row_index(str(run.campaign_dir)))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is run, what="back to the same run screen")
        assert sum(isinstance(s, RunScreen) for s in app.screen_stack) == 1
        done = run.model.totals()[0]
        assert run.running and done > before
        await pilot.pause(0.3)
        assert f"{done}/" in screen_text(app) or run.redraw_count > 0
        run.cancel_runner()
        await wait_for(pilot, lambda: not run.running, timeout=60, what="the cancel")
        assert run.outcome == "cancelled"


async def test_filter_and_sort_on_the_hardware_recipes_and_a_verify_table(tmp_path: Path,
                                                                         trace_release_dir: Path) -> None:
    """`/` and `s` work on tables other than the checklist: the hardware screen's recipes, verify's tables."""
    app = TraceTuiApp(make_backends(tmp_path, machine="none", release_dir=trace_release_dir))
    async with app.run_test(size=SIZE) as pilot:
        screen = await hardware_ready(pilot, app)
        table = screen.query_one("#hw-recipes")
        every = table.row_count
        assert every > 3 and table.has_focus
        await pilot.press("slash", *"demo")
        await pilot.pause(0.2)
        assert table.row_count == 1 and table.row_text(0)[0] == "demo"
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert table.row_count == every and table.has_focus
        await pilot.press("s")  # by recipe name, those this machine cannot run first
        await pilot.pause(0.2)
        states = [table.row_text(i)[1] for i in range(every)]
        cannot = [s for s in states if s == "cannot run"]
        assert cannot and states[:len(cannot)] == cannot
        names = [table.row_text(i)[0] for i in range(len(cannot))]
        assert names == sorted(names)
        assert "recipe ↓" in screen_text(app)
        table.move_cursor(row=0)
        await pilot.pause()
        await pilot.press("i")  # details still find the right row after sorting
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), what="details")
        assert app.screen.fields[0] == ("recipe", names[0])
        await pilot.press("escape")
        app.show_verify("release", trace_release_dir)
        await wait_for(pilot, lambda: getattr(app.screen, "view", None) is not None, timeout=60, what="verify")
        await pilot.press("2")
        await pilot.pause(0.2)
        first = app.screen.query("#verify-tables LiteralTable").first()
        first.focus()
        await pilot.pause()
        rows = first.row_count
        wanted = re.match(r"[A-Za-z0-9]+", first.row_text(0)[0]).group(0)  # keys pilot can type
        await pilot.press("slash", *wanted)
        await pilot.pause(0.2)
        assert 1 <= first.row_count < rows or rows == 1
        assert all(wanted.lower() in " ".join(first.row_text(i)).lower() for i in range(first.row_count))

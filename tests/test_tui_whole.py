"""What the terminal UI shows is whole and true: each defect seen by a new user, as a Pilot test.

Real parts: the recipes, the hardware report and checks, the engine (Runner, Campaign,
LocalRuntime over the selftest worker), verify, and the real `trace-tui` argument parser.
Fakes, at the narrowest edge (tests/tui_support.py): NVML (tests/fake_nvml.py machines) and,
for the hardware probe of `make_backends`, an unreachable Docker client.
"""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_tui_flows import SIZE, hardware_ready, start_run, text_of, wait_for
from tui_support import make_backends, selftest_resolved

from trace_tui.cli import build_parser
from trace_tui.engine.events import Log, Progress, SliceState, StepState
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.dialogs.detail import DetailScreen
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.screens.help import HelpScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.refused import RefusedScreen
from trace_tui.tui.screens.run import RunScreen
from trace_tui.tui.screens.verify import VerifyScreen


def screen_text(app) -> str:
    """Every character on the terminal, as a user sees it (what `export_screenshot` records, as text)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False,
                      color_system=None, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


# -- 1. data is shown literally, never read as markup ---------------------------------------

async def test_bracketed_text_in_the_full_preview_is_shown(tmp_path: Path) -> None:
    """`full`'s preview lists `MathVision ... [Visual Math]` as the CLI prints it."""
    from trace_tui.preview import build_preview
    from trace_tui.recipe import catalog as recipes

    cli_text = build_preview(recipes.resolve_recipe(recipes.load_recipe("full")), None, home=tmp_path / "home",
                             campaign_dir=tmp_path / "c", runtime="local").render_text()
    bracketed = sorted(set(re.findall(r"\[[A-Za-z][^\]\n]*\]", cli_text)))
    assert "[Visual Math]" in bracketed
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(200, 50)) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("full")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        shown = text_of(app, "#preview-text")
        for text in bracketed:
            assert text in shown, text
        assert any("MathVision" in line and "[Visual Math]" in line for line in shown.splitlines())


async def test_bracketed_recipe_step_log_and_table_text_is_shown(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuibrackets", host_step=False, benchmarks={"b1": 2})
    recipe = resolved.recipe
    step = recipe.steps[0].model_copy(update={"description": "[confirm] then [per slice] rows"})
    recipe = recipe.model_copy(update={"title": "Brackets [TRACE]", "steps": [step]})
    resolved = resolved.model_copy(update={"recipe": recipe})
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuibrackets": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        assert "Brackets [TRACE]" in screen_text(app)  # the hardware screen's recipe table
        app.open_recipe("tuibrackets")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted)
        step_text = text_of(app, "#step-text")
        assert "[confirm] then [per slice] rows" in step_text
        await pilot.press("y")
        run = await start_run_screen(pilot, app)
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))
        app.pop_screen() if isinstance(app.screen, VerifyScreen) else None
        await pilot.pause(0.2)
        run.model.apply(Log(step="generate", message="[TRACE] a log line with [brackets]"))
        run.model.dirty = True
        run._file_tail = None
        run._update_log()
        await pilot.pause(0.3)
        lines = [str(line) for line in run.query_one("#run-log").lines]
        assert any("[TRACE] a log line with [brackets]" in line for line in lines), lines


async def start_run_screen(pilot, app) -> RunScreen:
    await wait_for(pilot, lambda: any(isinstance(s, RunScreen) for s in app.screen_stack), what="the run screen")
    return next(s for s in app.screen_stack if isinstance(s, RunScreen))


# -- 2. every command shown parses with the real parser ---------------------------------------

def shown_commands(texts: list[str]) -> list[str]:
    return [c for t in texts for c in re.findall(r"`(trace-tui[^`]*)`", t)]


def parses(command: str) -> None:
    argv = shlex.split(command)
    assert argv[0] == "trace-tui"
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse's exit 2
        raise AssertionError(f"shown command does not parse: {command!r} (exit {exc.code})") from None


async def test_every_command_in_help_and_palette_parses(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        palette = [f"{c.title} {c.help}" for c in app.get_system_commands(app.screen)]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        foot = text_of(app, "#help-foot")
        commands = shown_commands(palette + [foot])
        assert "trace-tui preview --recipe demo" in commands
        assert len(commands) >= 8 + 2 * len(app.safe_known_recipes())
        for command in commands:
            parses(command)


# -- 3. a refused run creates nothing, says every reason in full --------------------------------

async def test_refused_run_creates_nothing_and_says_every_reason(tmp_path: Path, monkeypatch) -> None:
    """`validation` on a machine without GPUs: the real backends (headless's exit-3 check) refuse it."""
    from trace_tui.hardware import hardware_report
    from trace_tui.runtime import make_runtime
    from trace_tui.service.requests import RunOptions, RunRequest
    from trace_tui.service.requirements import requirement_problems
    from trace_tui.tui.backends import default_backends

    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "none")
    home = tmp_path / "home"
    backends = default_backends(RunRequest(options=RunOptions(home=str(home), runtime="local")))
    resolved = backends.resolve_recipe(backends.load_recipe("validation"))
    expected = requirement_problems(resolved, make_runtime("local", flavour=resolved.recipe.image_flavor),
                                    home, hardware_report(home))
    assert expected and max(len(p) for p in expected) > 110
    app = TraceTuiApp(backends)
    async with app.run_test(size=(120, 40)) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("validation")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted)
        steps = app.screen
        failing = [s for s in steps.steps if s.verdict == "fail"]
        assert failing
        # Confirming a step whose verdict is fail asks first.
        steps.index = steps.steps.index(failing[0])
        steps.show()
        await pilot.press("y")
        assert isinstance(app.screen, ConfirmScreen)
        assert failing[0].id in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        assert app.screen is steps and failing[0].id not in steps.decisions
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RefusedScreen), what="the refusal")
        reasons = [str(w.render()) for w in app.screen.query(".refused-reason")]
        for problem in expected:
            assert any(problem in r for r in reasons), problem
        assert not any(isinstance(s, RunScreen) for s in app.screen_stack)
        assert app.exit_code == 3
    campaigns = home / "campaigns"
    assert not campaigns.exists() or not any(campaigns.iterdir())


# -- 4. stale and wrong state ---------------------------------------------------------------

async def test_no_rate_or_eta_after_cancel_and_complete_steps_say_already_complete(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuistale", rows=40, delay=0.05, host_step=True)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuistale": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuistale", decisions="yy")
        await wait_for(pilot, lambda: run.model.overall_rate() is not None, what="a rate")
        await pilot.press("c")
        await pilot.press("y")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the cancel")
        await pilot.pause(0.3)
        summary = str(run.query_one("#grid-summary").render())
        assert "/s" not in summary and "ETA —" in summary, summary
        assert all(c.rate() is None for c in run.model.slices.values())
        grid = screen_text(app)
        assert not re.search(r"\d\.\d/s", grid), grid
        # The resumed run: the finished first step is "already complete", not "skipped".
        app_campaign = run.campaign_dir
    app2 = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuistale": resolved}), campaign=app_campaign)
    async with app2.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app2.screen, RunScreen), what="the reattached run")
        run = app2.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60)
        await pilot.pause(0.2)
    # A finished campaign resumed again: every step is kept.
    app3 = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuistale": resolved}), campaign=app_campaign)
    async with app3.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app3.screen, RunScreen), what="the reattached run")
        run = app3.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60)
        while not isinstance(app3.screen, RunScreen):
            app3.pop_screen()
            await pilot.pause(0.1)
        await pilot.pause(0.2)
        shown = screen_text(app3)
        assert "already complete" in shown and "skipped" not in shown, shown


def test_already_complete_is_not_skipped() -> None:
    from trace_tui.tui.progress import ProgressModel

    model = ProgressModel()
    model.apply(StepState(step="prepare", state="skipped", message="already complete"))
    model.apply(StepState(step="report", state="skipped"))
    assert model.steps["prepare"].state == "completed"
    assert model.steps["report"].state == "skipped"


async def test_ctrl_t_switches_the_directory_with_the_kind(tmp_path: Path, trace_release_dir: Path) -> None:
    campaign = tmp_path / "some-campaign"
    campaign.mkdir()
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.show_verify("campaign", campaign)
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.is_mounted)
        verify = app.screen
        await wait_for(pilot, lambda: verify.checked == 1 or "Cannot" in text_of(app, "#verify-summary"))
        await pilot.press("ctrl+t")
        assert verify.kind == "release" and verify.path == trace_release_dir
        assert verify.query_one("#verify-path").value == str(trace_release_dir)
        await pilot.press("ctrl+t")
        assert verify.kind == "campaign" and verify.path == campaign


async def test_f5_says_it_checked_again(tmp_path: Path, trace_release_dir: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=SIZE) as pilot:
        screen = await hardware_ready(pilot, app)
        await pilot.press("f5")
        await wait_for(pilot, lambda: screen.probes == 2, what="the second probe")
        await pilot.pause()
        assert "checked again" in text_of(app, "#hw-gpu-message")
        app.action_show_verify()
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.view is not None,
                       timeout=60)
        first = text_of(app, "#verify-summary")
        assert "again" not in first
        await pilot.press("f5")
        await wait_for(pilot, lambda: app.screen.checked == 2, timeout=60)
        assert "verified again" in text_of(app, "#verify-summary")


async def test_quit_prompt_names_the_runtime_and_the_campaign(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiquit2", rows=200, delay=0.05, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuiquit2": resolved})
    backends.runtime_name = lambda: "local"
    app = TraceTuiApp(backends)
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiquit2", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        question = str(app.screen.query_one("#confirm-question").render())
        assert "Containers" not in question and "DIR" not in question
        assert str(run.campaign_dir) in question
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")


def test_image_tag_drift_is_shown() -> None:
    from trace_tui.hardware import ImageStatus
    from trace_tui.tui.views import hardware_view

    drift = ImageStatus(name="infer", status="present", tag="trace-tui/infer:1", locked_id="sha256:" + "a" * 64,
                        found_id="sha256:" + "a" * 64,
                        message="trace-tui/infer:1 sha256:aaaaaaaaaaaa as locked "
                                "(the tag now points to sha256:bbbbbbbbbbbb)")

    class Report:
        pass

    from tui_support import snapshot_report

    report = snapshot_report("none")
    report = report.model_copy(update={"docker": report.docker.model_copy(update={"images": [drift]})})
    view = hardware_view(report)
    assert any("the tag now points to sha256:bbbbbbbbbbbb" in status for _, status in view.images)


async def test_demo_scores_show_in_the_grid_and_verify_tables(tmp_path: Path) -> None:
    """A campaign whose slices have scores: the grid shows them and verify's Tables tab lists them."""
    from trace_tui.tui.views import campaign_scores_table

    events = [SliceState(step="score", model="tiny", seed=42, benchmark="mathvista", state="completed",
                         done=8, total=8, score=37.5)]
    table = campaign_scores_table(events)
    assert table is not None and table.rows == (("tiny", "42", "mathvista", "score", "37.50", "8/8"),)
    from trace_tui.tui.progress import SliceProgress
    from trace_tui.tui.widgets.progress_grid import cell_text

    cell = SliceProgress(model="tiny", benchmark="mathvista", seed=42, total=8, done=8, score=37.5)
    assert "37.50" in cell_text(cell).plain


# -- 5. cut text: every table has a detail view; the log wraps and goes full screen -----------

async def test_hardware_reasons_are_reachable_in_full(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, machine="none"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await hardware_ready(pilot, app)
        table = screen.query_one("#hw-recipes")
        names = [r.name for r in screen.view.recipes]
        row = next(r for r in screen.view.recipes if len(r.reasons) > 1)
        table.focus()
        table.move_cursor(row=names.index(row.name))
        await pilot.press("i")
        assert isinstance(app.screen, DetailScreen)
        shown = app.screen.text
        for reason in row.reasons:
            assert reason in shown
        assert "more" not in "".join(row.reasons)
        await pilot.press("escape")
        assert app.screen is screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_hardware_reasons_are_whole_in_the_table_itself(tmp_path: Path, size: tuple[int, int]) -> None:
    """The "why not" column wraps to the width the other columns leave: each row is as tall as its reasons'
    lines, no line is wider than the column, the table never scrolls sideways, and every reason is there
    word for word (on screen: the first line of each row, with the cursor on it)."""
    app = TraceTuiApp(make_backends(tmp_path, machine="none"))
    async with app.run_test(size=size) as pilot:
        screen = await hardware_ready(pilot, app)
        table = screen.query_one("#hw-recipes")
        await pilot.pause(0.2)
        assert table.virtual_size.width <= table.size.width, "the table scrolls sideways: a column is cut"
        why_not = table.ordered_columns[2]
        checked = 0
        for i, row in enumerate(screen.view.recipes):
            if row.verdict == "pass":
                continue
            key = table.coordinate_to_cell_key((i, 0)).row_key
            lines = table.get_row_at(i)[2].plain.split("\n")
            assert table.rows[key].height == len(lines)
            assert all(cell_len(line) <= why_not.width for line in lines)
            shown = "".join("".join(lines).split())  # a long path may fold mid-word
            for reason in row.reasons:
                assert "".join(reason.split()) in shown, (reason, lines)
            table.move_cursor(row=i)
            await pilot.pause(0.1)
            assert lines[0].strip() in screen_text(app)
            checked += 1
        assert checked >= 3


async def test_verify_checklist_detail_has_full_hashes(tmp_path: Path, trace_release_dir: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=(80, 24)) as pilot:
        await hardware_ready(pilot, app)
        app.action_show_verify()
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.view is not None,
                       timeout=60)
        verify = app.screen
        row = next(i for i, c in enumerate(verify.view.checks) if len(c.expected) == 64)
        checklist = verify.query_one("#verify-checklist")
        checklist.move_cursor(row=row)
        await pilot.press("i")
        assert isinstance(app.screen, DetailScreen)
        check = verify.view.checks[row]
        assert check.expected in app.screen.text and check.item in app.screen.text


async def test_log_pane_wraps_and_goes_full_screen(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuilog", rows=200, delay=0.05, host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuilog": resolved}))
    async with app.run_test(size=(80, 24)) as pilot:
        run = await start_run(pilot, app, "tuilog", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0)
        log = run.query_one("#run-log")
        assert log.wrap
        long = "a long line " + "x" * 150 + " END"
        log.write(long)
        await pilot.pause(0.2)
        assert "END" in screen_text(app)
        height = log.size.height
        await pilot.press("f")
        await pilot.pause(0.2)
        assert log.size.height > height + 8
        await pilot.press("f")
        await pilot.pause(0.2)
        assert log.size.height == height
        run.cancel_runner()
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))


# -- 6. headless counts ------------------------------------------------------------------------

def test_status_columns_align_with_long_names() -> None:
    from trace_tui.engine.status import render_status

    st = {"campaign": "/c", "recipe": "demo", "run_tag": "demo-1", "running": False, "complete": False,
          "jobs_completed": 1, "jobs": 3,
          "steps": [{"step": "release-eval-generate-long-name", "state": "completed", "completed": 1, "jobs": 1,
                     "rows_done": 1200, "rows_total": 1200, "message": ""},
                    {"step": "score", "state": "pending", "completed": 0, "jobs": 2, "rows_done": 0,
                     "rows_total": 16, "message": ""}],
          "slices": [{"step": "score", "model": "Qwen2.5-VL-7B-Instruct-TRACE-GRPO-long-id", "seed": 42,
                      "benchmark": "MathVision_MINI_with_a_long_key", "state": "completed", "phase": "score",
                      "done": 8, "total": 8, "score": 37.5, "rate": None, "eta_s": None},
                     {"step": "score", "model": "tiny", "seed": 7, "benchmark": "mmmu", "state": "pending",
                      "phase": None, "done": 0, "total": 8, "score": None, "rate": 1.5, "eta_s": 5.0}]}
    lines = render_status(st).splitlines()
    step_header = next(i for i, line in enumerate(lines) if line.startswith("step") and "rows" in line)
    head = lines[step_header]
    for line in lines[step_header + 1:step_header + 3]:
        assert line.index("/") < len(head)
        # right-aligned "rows": each row's value ends where the header's title ends
        assert line.rstrip().endswith(("1200/1200", "0/16"))
        assert len(line.rstrip()) == head.index("rows") + len("rows")
    slice_header = next(i for i, line in enumerate(lines) if "benchmark" in line)
    head = lines[slice_header]
    for line in lines[slice_header + 1:]:
        if line.startswith("failed"):
            continue
        for title in ("seed", "score", "ETA"):
            end = head.index(title) + len(title)
            assert line[end - 1] != " ", (title, line)
            assert end == len(line) or line[end] == " ", (title, line)


def test_progress_line_counts_rows_in_done_and_total_alike() -> None:
    """A prepare step's rows: either in both "done" and "total" of the `all N/M` line, or in neither."""
    from trace_tui.engine.events import RunState
    from trace_tui.engine.printer import HeadlessPrinter

    out = io.StringIO()
    t = [0.0]
    printer = HeadlessPrinter(out, interval=0.0, clock=lambda: t[0])
    printer(RunState(state="planned", message="plan", campaign="/c", jobs_total=3, jobs_done=0, rows_total=16))
    # As the runner emits them: each job says it runs, with its planned rows (none for prepare), then progresses.
    printer(SliceState(step="prepare", state="running", done=0, total=0))
    printer(SliceState(step="generate", model="tiny", seed=42, benchmark="b", state="running", done=0, total=8))
    for done in (10, 40):
        t[0] += 1
        printer(Progress(step="prepare", phase="prepare", done=done, total=40))
    for done in (4, 8):
        t[0] += 1
        printer(Progress(step="generate", model="tiny", seed=42, benchmark="b", phase="generate", done=done, total=8))
    last = [line for line in out.getvalue().splitlines() if "| all " in line][-1]
    done, total = map(int, re.search(r"all (\d+)/(\d+) rows", last).groups())
    assert (done, total) == (8, 16), last  # the runner's own summary counts the same way


# -- conventions: / filters the verify checklist; the footer shows what applies ----------------

async def test_verify_checklist_filter_and_failures_first(tmp_path: Path, trace_release_dir: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path, release_dir=trace_release_dir))
    async with app.run_test(size=(120, 40)) as pilot:
        await hardware_ready(pilot, app)
        app.action_show_verify()
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.view is not None,
                       timeout=60)
        verify = app.screen
        checklist = verify.query_one("#verify-checklist")
        total = checklist.row_count
        assert total == len(verify.view.checks) > 100
        order = {"failed": 0, "passed": 1, "absent": 2}
        statuses = [c.status for c in verify.view.checks]
        assert statuses == sorted(statuses, key=lambda s: order.get(s, 1))
        item = verify.view.checks[-1].item
        await pilot.press("slash")
        await pilot.press(*item.lower()[:12])
        await pilot.pause(0.2)
        assert 0 < checklist.row_count < total
        assert all(item.lower()[:12] in " ".join(checklist.row_text(i)).lower() for i in range(checklist.row_count))
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert checklist.row_count == total and isinstance(app.screen, VerifyScreen)


async def test_run_footer_shows_only_what_applies(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuifooter", rows=100, delay=0.05, host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuifooter": resolved}))
    async with app.run_test(size=(120, 40)) as pilot:
        run = await start_run(pilot, app, "tuifooter", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0)
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        assert "Cancel run" in footer and "Resume" not in footer and "Verify" not in footer, footer
        run.cancel_runner()
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        assert "Cancel run" not in footer and "Resume" in footer and "Verify" in footer, footer


async def test_run_screen_names_the_runtime_and_each_steps_image(tmp_path: Path) -> None:
    resolved = selftest_resolved(name="tuiruntime", rows=100, delay=0.05, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuiruntime": resolved})
    backends.runtime_name = lambda: "local"
    app = TraceTuiApp(backends)
    async with app.run_test(size=(120, 40)) as pilot:
        run = await start_run(pilot, app, "tuiruntime", decisions="y")
        assert "runtime local" in text_of(app, "#run-title")
        steps = run.query_one("#run-steps")
        steps.focus()
        await pilot.press("i")
        assert isinstance(app.screen, DetailScreen) and "image: host (no container)" in app.screen.text
        await pilot.press("escape")
        run.cancel_runner()
        await wait_for(pilot, lambda: run.outcome not in (None, "running"))


async def test_the_footer_is_whole_at_80_columns_on_every_screen(tmp_path: Path,
                                                                 trace_release_dir: Path) -> None:
    """Every hint the footer shows is whole at 80x24 — `q Quit` is the last one before the palette
    (the preview's footer was cut to a bare "q")."""
    resolved = selftest_resolved(name="tuifoot80", rows=4, delay=0.0, host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuifoot80": resolved}, release_dir=trace_release_dir))

    def footer() -> str:
        return screen_text(app).splitlines()[-1]

    async with app.run_test(size=(80, 24)) as pilot:
        await hardware_ready(pilot, app)
        seen = {"hardware": footer()}
        app.open_recipe("tuifoot80")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        await pilot.pause(0.2)
        seen["preview"] = footer()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted, what="steps")
        await pilot.pause(0.2)
        seen["steps"] = footer()
        await pilot.press("escape", "escape")
        app.show_verify("release", trace_release_dir)
        await wait_for(pilot, lambda: getattr(app.screen, "view", None) is not None, timeout=60, what="verify")
        await pilot.pause(0.2)
        seen["verify"] = footer()
        await pilot.press("escape")
        run = await start_run(pilot, app, "tuifoot80", decisions="y")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=120, what="the run's end")
        while app.screen is not run:
            app.pop_screen()
            await pilot.pause(0.1)
        await pilot.pause(0.2)
        seen["run (done)"] = footer()
        app.action_show_campaigns()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CampaignsScreen", what="the campaigns")
        await pilot.pause(0.3)
        await wait_for(pilot, lambda: footer().strip() != "", what="the campaigns footer")
        seen["campaigns"] = footer()
        for name, line in seen.items():
            assert re.search(r"\bq Quit\b", line), (name, line)

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
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.screens.preview import PreviewScreen
from trace_tui.tui.screens.run import RunScreen

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


def test_a_worker_stopped_while_it_loads_says_interrupted_without_a_traceback(tmp_path: Path) -> None:
    """Cancel showed a Python traceback (`raise KeyboardInterrupt`, the stop handler) in the run screen's log
    pane: a stop that came while the worker imported its libraries or read its job was outside its handling.
    A real worker process is stopped as the runtimes stop it (SIGTERM) while it waits on its job file."""
    import os
    import signal
    import subprocess
    import sys
    import time

    job = tmp_path / "job.json"
    os.mkfifo(job)  # the worker blocks reading it: the stop comes while the job loads
    code = ("import sys; from trace_tui.stages import jobs; "
            "sys.exit(jobs.run_worker(lambda job: None, sys.argv[1]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(job)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:  # a writer's non-blocking open succeeds once the worker has the job open for reading
        try:
            writer = os.open(job, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the worker never read its job"
            time.sleep(0.05)
    try:
        time.sleep(0.2)  # into the read, which waits for the job's bytes
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(writer)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert '"interrupted"' in out or "interrupted" in out, out


@pytest.mark.parametrize("size", SIZES)
async def test_cancel_under_the_local_runtime_speaks_of_processes(tmp_path: Path, size) -> None:
    """Cancel said "containers stopped" under the local runtime, where a step is a process on this host."""
    from test_tui_flows import start_run
    from tui_support import selftest_resolved

    from trace_tui.tui.dialogs.confirm import ConfirmScreen

    resolved = selftest_resolved(name="tuilocalcancel", rows=200, delay=0.05, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuilocalcancel": resolved})
    backends.runtime_name = lambda: "local"  # what the backends say when --runtime local is chosen
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        run = await start_run(pilot, app, "tuilocalcancel", decisions="y")
        assert run.runtime == "local"
        await wait_for(pilot, lambda: run.model.totals()[0] > 0, what="first rows")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        asked = screen_text(app)
        assert "processes" in asked and "containers" not in asked
        await pilot.press("y")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the cancel")
        status = text_of(app, "#run-status")
        assert run.outcome == "cancelled" and "processes stopped" in status and "container" not in status, status
        await pilot.pause(0.3)
        # the step list says the word the status line, `trace-tui status` and the log say ("stopped" before)
        assert "■ cancelled" in screen_text(app)


def test_headless_eta_is_each_steps_own() -> None:
    """The headless ETA applied generate's rate to extract's and score's rows (ETA 1m17s; done 19 s
    later): the rate and the time left are now the running step's, and steps not measured yet are named."""
    import io
    import re

    from trace_tui.engine.events import Progress, RunState, SliceState, StepState
    from trace_tui.engine.printer import HeadlessPrinter

    out = io.StringIO()
    t = [0.0]
    printer = HeadlessPrinter(out, interval=1.0, clock=lambda: t[0])
    printer(RunState(state="planned", message="3 jobs", campaign="/c", jobs_total=3, rows_total=96,
                     step_rows={"generate": [0, 32], "extract": [0, 32], "score": [0, 32]}))

    def step(name: str, seconds_per_row: float) -> str:
        printer(StepState(step=name, state="running"))
        printer(SliceState(step=name, model="m", seed=42, benchmark="b", state="running", total=32))
        for done in range(1, 33):
            t[0] += seconds_per_row
            printer(Progress(step=name, model="m", seed=42, benchmark="b", phase=name, done=done, total=32))
            if done == 16:
                mid = [ln for ln in out.getvalue().splitlines() if "| all" in ln][-1]
        printer(SliceState(step=name, model="m", seed=42, benchmark="b", state="completed", done=32, total=32))
        printer(StepState(step=name, state="completed"))
        return mid

    gen = step("generate", 2.0)  # 0.5 rows/s
    assert "0.5 rows/s, ETA generate 3" in gen and "then extract, score (not measured yet)" in gen, gen
    ext = step("extract", 0.1)  # 10 rows/s: generate's rate said minutes here
    assert re.search(r"\d+\.\d rows/s, ETA extract \ds, then score", ext) and "10.0 rows/s" in ext, ext
    score = step("score", 0.1)
    eta = re.search(r"ETA (\S+)$", score).group(1)
    assert eta in ("1s", "2s"), score  # 16 rows left at 10 rows/s: the whole run's time left


def test_the_runner_plans_each_steps_rows(tmp_path: Path) -> None:
    """The planned event carries each step's rows, which the printer's per-step ETA divides."""
    from tui_support import local_runner_factory, selftest_resolved

    from trace_tui.engine.events import RunState

    resolved = selftest_resolved(name="tuisteprows", rows=3, host_step=True)
    events: list = []
    local_runner_factory(tmp_path / "home")(resolved, tmp_path / "c").run(events.append)
    planned = next(e for e in events if isinstance(e, RunState) and e.state == "planned")
    assert planned.step_rows == {"generate": [0, planned.rows_total]} and planned.rows_total == 12


def prep_and_rows_recipe(name: str):
    """The selftest recipe with a first whole-step job that reports rows of its own (as the demo's prepare
    does: 2/2), which no plan counts."""
    from tui_support import selftest_resolved

    from trace_tui.recipe.schema import Step

    resolved = selftest_resolved(name=name, rows=3, host_step=False)
    prep = Step(id="prep", title="Prepare (selftest)", stage="host", run=["trace_tui.stages.selftest", "rows", "--rows", "2"])
    recipe = resolved.recipe.model_copy(update={"steps": [prep, *resolved.recipe.steps]})
    return resolved.model_copy(update={"recipe": recipe})


@pytest.mark.parametrize("size", SIZES)
async def test_the_campaigns_list_counts_the_rows_the_run_counts(tmp_path: Path, size) -> None:
    """The campaigns list said 99/99 rows of a demo campaign whose run said 96/96: it counted the preparation
    step's own rows, which the run's summary and progress lines leave out. One count everywhere."""
    import asyncio

    from trace_tui.engine.campaign_list import read_summary
    from trace_tui.tui.screens.campaigns import CampaignsScreen

    resolved = prep_and_rows_recipe("tuirowcount")
    backends = make_backends(tmp_path, extra_recipes={"tuirowcount": resolved})
    campaign = tmp_path / "campaigns" / resolved.run_tag
    result = await asyncio.to_thread(backends.runner_factory(resolved, campaign).run, lambda e: None)
    assert (result.rows_done, result.rows_total) == (12, 12) and result.exit_code == 0
    summary = read_summary(campaign)
    assert (summary.rows_done, summary.rows_total) == (12, 12)
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        app.action_show_campaigns()
        await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen) and app.screen.summaries, what="the list")
        await pilot.pause(0.2)
        assert "12/12" in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_a_run_outside_the_home_is_in_the_campaigns_list(tmp_path: Path, size) -> None:
    """esc from a run going on in a --campaign folder outside the home said "enter on it (or esc) comes back
    to it", but the list showed only the home's campaigns: the campaign was not there to press enter on."""
    from tui_support import selftest_resolved

    from trace_tui.tui.screens.campaigns import CampaignsScreen

    resolved = selftest_resolved(name="tuioutside", rows=400, delay=0.05, host_step=False)
    backends = make_backends(tmp_path, extra_recipes={"tuioutside": resolved})
    outside = tmp_path / "elsewhere" / "my-campaign"
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        run = RunScreen(resolved, outside, clock=backends.clock, runtime="local")
        app.push_screen(run)
        await wait_for(pilot, lambda: run.running and run.model.totals()[0] > 0, what="first rows")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, CampaignsScreen) and app.screen.summaries,
                       what="the campaigns list")
        listed = app.screen
        assert [s.path for s in listed.summaries] == [outside.resolve()]
        assert listed.summaries[0].state == "running"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is run, what="back to the run")
        run.cancel_runner()
        await wait_for(pilot, lambda: not run.running, what="the cancel")


@pytest.mark.slow
def test_the_step_logs_say_what_happens_on_a_fresh_cpu_run(monkeypatch, tmp_path: Path, tiny_qwen25vl_dir: Path,
                                                           trace_sample_dir: Path) -> None:
    """The run screen's log pane showed "resuming at row 0" for a slice generated for the first time, and
    "judge loaded ... 1 GPU(s) requested" on a machine without a GPU (the job was given none). The real
    generate and extract workers, the tiny random Qwen2.5-VL, on CPU."""
    from stages_support import run_worker, sample_generate_job
    from test_stages_extract import extract_job, write_generate_rows

    from trace_tui.stages import extract, generate

    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, [0, 3], batch_size=2)
    _, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    logs = [e["message"] for e in events if e["type"] == "log"]
    assert not any("resuming" in m for m in logs), logs
    assert any(m.endswith("2 rows to generate") for m in logs), logs
    write_generate_rows(tmp_path, "outputs/generate/j")
    args = ["--judge", str(tiny_qwen25vl_dir), "--judge-max-tokens", "4", "--backend", "transformers"]
    job = dict(extract_job(args), upstream_outputs={"generate": "outputs/generate/j"}, output_dir="outputs/extract/j",
               gpus=[])
    _, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run_job, job)
    loaded = [e["message"] for e in events if e["type"] == "log" and e["message"].startswith("judge loaded: ")]
    assert len(loaded) == 1 and "on CPU" in loaded[0] and "GPU" not in loaded[0].replace("on CPU", ""), loaded


def two_step_recipe(name: str, rows: int = 3, delay: float = 0.0):
    """The selftest recipe with two per-slice steps (generate, then score), as the demo's generate,
    extract and score: each step has its own grid; the score step's slices carry a score."""
    from tui_support import selftest_resolved

    resolved = selftest_resolved(name=name, rows=rows, delay=delay, host_step=False)
    gen = resolved.recipe.steps[0]
    score = gen.model_copy(update={"id": "score", "title": "Score rows (selftest)"})
    recipe = resolved.recipe.model_copy(update={"steps": [gen, score]})
    return resolved.model_copy(update={"recipe": recipe})


@pytest.mark.parametrize("size", SIZES)
async def test_the_run_screen_shows_any_steps_grid_and_log(tmp_path: Path, size) -> None:
    """The run screen showed only the last step's grid and could not show an earlier step's; the score in a
    cell had no column title; scrolling the grid sideways hid the benchmark names; an empty filter result
    said nothing; the log's "(last 5 lines)" read as lines missing. Choosing a step in the list shows its
    grid and its log; the seed columns say "rows, score"; the benchmark column stays; the summary says
    no benchmark matches; the log names the file (and says when its start is left out)."""
    from trace_tui.tui.screens.verify import VerifyScreen
    from trace_tui.tui.widgets.progress_grid import ProgressGrid
    from trace_tui.tui.widgets.step_list import StepList

    resolved = two_step_recipe("tuitwogrids")
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuitwogrids": resolved}))
    async with app.run_test(size=size) as pilot:
        from test_tui_flows import start_run

        run = await start_run(pilot, app, "tuitwogrids", decisions="yy")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run's end")
        if isinstance(app.screen, VerifyScreen):
            await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is run, what="the run screen")
        assert run.outcome == "completed" and run.model.grid_step == "score"
        grid = run.query_one(ProgressGrid)
        table = grid.query_one("#grid-table")
        assert table.fixed_columns == 1
        labels = [c.label.plain for c in table.ordered_columns]
        assert labels[1] == "seed 42: rows, score", labels
        steps = run.query_one(StepList)
        steps.focus()
        await pilot.pause()
        steps.move_cursor(row=0)  # generate
        await pilot.pause(0.3)
        assert run.model.grid_step == "generate"
        assert "generate: 12/12 rows" in text_of(app, "#grid-summary")
        log = run.query_one("#run-log")
        assert run._log_step == "generate"
        await wait_for(pilot, lambda: any("model loaded" in str(line.text) for line in log.lines), what="its log")
        steps.move_cursor(row=1)
        await pilot.pause(0.3)
        assert run.model.grid_step == "score"
        table.focus()
        await pilot.press("slash")
        for ch in "zzz":
            await pilot.press(ch)
        await pilot.pause(0.3)
        summary = text_of(app, "#grid-summary")
        assert "no benchmark matches (esc clears the filter)" in summary and summary.endswith("filter: zzz")


def test_a_step_log_says_when_its_start_is_left_out(tmp_path: Path) -> None:
    from trace_tui.tui.screens.run import LOG_TAIL_LINES, tail_step_log

    logs = tmp_path / "logs" / "generate"
    logs.mkdir(parents=True)
    (logs / "a.log").write_text("".join(f"line {i}\n" for i in range(5)))
    assert tail_step_log(tmp_path, "generate") == ("logs/generate/a.log", [f"line {i}" for i in range(5)], False)
    (logs / "a.log").write_text("".join(f"line {i}\n" for i in range(LOG_TAIL_LINES + 5)))
    path, lines, cut = tail_step_log(tmp_path, "generate")
    assert cut and len(lines) == LOG_TAIL_LINES and lines[-1] == f"line {LOG_TAIL_LINES + 4}"


@pytest.mark.parametrize("size", SIZES)
async def test_esc_from_a_finished_run_goes_back_to_the_preview(tmp_path: Path, size) -> None:
    """esc from a finished run returned to the Steps screen it was started from, where `a` ran it again."""
    from test_tui_flows import start_run
    from tui_support import selftest_resolved

    from trace_tui.tui.screens.verify import VerifyScreen

    resolved = selftest_resolved(name="tuiescdone", rows=2, host_step=False)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiescdone": resolved}))
    async with app.run_test(size=size) as pilot:
        run = await start_run(pilot, app, "tuiescdone", decisions="y")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), what="the run's end")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the verify screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is run, what="the run screen")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PreviewScreen), app.screen_stack
        assert not any(isinstance(s, StepsScreen) for s in app.screen_stack)


async def test_q_during_a_run_says_how_to_resume(tmp_path: Path) -> None:
    """After q while running the terminal showed nothing but exit 130: the app now names each run it
    stopped and the command that resumes it."""
    from test_tui_flows import start_run
    from tui_support import selftest_resolved

    from trace_tui.tui.app import resume_hint

    resolved = selftest_resolved(name="tuiquithint", rows=300, delay=0.05, host_step=False)
    campaign = tmp_path / "campaigns" / resolved.run_tag
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiquithint": resolved}))
    async with app.run_test(size=(80, 24)) as pilot:
        run = await start_run(pilot, app, "tuiquithint", decisions="y")
        await wait_for(pilot, lambda: run.model.totals()[0] > 0, what="first rows")
        await pilot.press("q")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to exit")
    assert app.return_value == 130
    hint = resume_hint(app.stopped_runs)
    assert f"trace-tui --campaign {campaign}" in hint and "tuiquithint" in hint and "resumable" in hint


@pytest.mark.parametrize("size", SIZES)
async def test_the_hardware_screen_says_each_thing_once_and_leaves_no_gap(tmp_path: Path, size) -> None:
    """At 120x40, 13 blank lines stood above a recipes table squeezed to 11 rows; at 80x24 the image-lock
    sentence filled the screen three times (once per image). The 8x H100 host without an image lock."""
    import re

    app = TraceTuiApp(make_backends(tmp_path, machine="8xh100", snapshot=True))
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        await pilot.pause(0.3)
        system = text_of(app, "#hw-system")
        assert system.count("no image lock at") == 1, system
        assert "images train, infer, score: not built" in " ".join(system.split())
        body = app.screen.query_one("#hw-body")
        title = app.screen.query_one("#hw-recipes-title")
        assert title.region.y == body.region.bottom, (body.region, title.region)  # no blank lines between
        assert body.virtual_size.height - body.size.height <= (0 if size[1] == 40 else 12)  # all of it at 120x40
        table = app.screen.query_one("#hw-recipes")
        assert table.size.height >= (14 if size[1] == 40 else 6), table.size


async def test_the_hardware_screen_sees_the_store_a_run_filled(tmp_path: Path) -> None:
    """"Store: ... (empty: nothing fetched yet)" stayed after the demo had filled the store: back on the
    hardware screen, the line says what is there now."""
    from trace_tui.tui.dialogs.confirm import ConfirmScreen

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await hardware_ready(pilot, app)
        assert "empty: nothing fetched yet" in text_of(app, "#hw-system")
        entry = tmp_path / "home" / "store" / "local" / "model"
        entry.mkdir(parents=True)  # what the demo's first step leaves
        app.push_screen(ConfirmScreen("a screen on top, as a run's", yes="yes", no="no"))
        await pilot.pause()
        app.pop_screen()
        await pilot.pause(0.2)
        assert app.screen is screen
        assert "empty" not in text_of(app, "#hw-system") and "store" in text_of(app, "#hw-system")


def test_steps_with_the_same_reason_share_its_line() -> None:
    """The recipes table said the image-lock sentence once per step of a recipe (three times for
    validation at 80x24): steps with the same reason share one line, every step still named."""
    from trace_tui.tui.views import RecipeRow, recipe_reason_cell

    lock = "image infer not built: no image lock at /h/appliance/images.lock.json (run `make appliance`)"
    row = RecipeRow(name="validation", title="V", verdict="fail",
                    reasons=(f"generate: {lock}", f"extract: {lock}", "score: image score not built", "plain"))
    cell = recipe_reason_cell(row)
    assert cell.count("no image lock") == 1
    assert cell.splitlines() == [f"generate, extract: {lock}", "score: image score not built", "plain"]


async def test_options_say_which_choice_is_on_without_colour(tmp_path: Path, monkeypatch) -> None:
    """With NO_COLOR the Options screen showed the same mark for a choice that is on and one that is off
    (only its colour differed): the on mark is drawn bold and underlined, which survives NO_COLOR."""
    from textual.filter import NoColor
    from textual.widgets import Checkbox, RadioButton

    from trace_tui.tui.dialogs.options import OptionsScreen

    monkeypatch.setenv("NO_COLOR", "1")
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("demo")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OptionsScreen), what="the options")
        await pilot.pause()

        def mark(button) -> tuple:
            segments = NoColor().apply(list(button.render_line(0)), None)
            return next((s.text, s.style) for s in segments if s.text.strip() in ("●", "X"))

        buttons = list(app.screen.query(RadioButton)) + list(app.screen.query(Checkbox))
        on = {mark(b) for b in buttons if b.value}
        off = {mark(b) for b in buttons if not b.value}
        assert on and off and not on & off, (on, off)


def test_more_failures_than_the_summary_shows_are_one_key_away() -> None:
    """The Slurm run's summary said "(+2 more)" with no way to see them: it now says where they are, and
    `i` on a shard's row lists every failure of that shard. The status dict is `status --json`'s shape."""
    from trace_tui.tui.progress import cluster_details, cluster_summary

    shard = {"id": "s0", "slurm_state": "FAILED", "exit_code": 1, "node": "n1", "reason": "", "campaign_state": "failed",
             "rows_done": 3, "rows_total": 9, "rate": None, "complete": False, "eta_s": None, "log": "slurm/logs/a.log",
             "failures": ["generate m/42/a: boom", "generate m/42/b: bang", "generate m/42/c: crash"]}
    status = {"shards": [shard], "finishing": [], "shards_completed": 0, "shards_total": 1, "shard_by": "model",
              "rows_done": 3, "rows_total": 9, "rate": None, "eta_s": None, "complete": False}
    summary = cluster_summary(status)
    assert "(+2 more: i on a shard lists its failures)" in summary
    details = cluster_details(status, 0)
    assert [v for k, v in details if k in ("failed", "")] == shard["failures"]


@pytest.mark.docker
@pytest.mark.parametrize("size", SIZES)
async def test_first_start_says_the_demo_runs_here_with_the_local_runtime(tmp_path: Path, size) -> None:
    """A first start (Docker answers, no image built yet) labelled the demo "cannot run" while the line above
    the table said "This machine can still run ... demo (d)", and its reason offered `--runtime local`. The
    label now says what is true, "can run (--runtime local)", and the reason still names the images and
    both ways on; the headless default is unchanged (under Docker the same check still fails, exit 3).
    The real Docker engine here, with no image lock in the home (what a first start has)."""
    import dataclasses

    import docker
    import fake_nvml

    from trace_tui import hardware
    from trace_tui.hardware import worst
    from trace_tui.recipe import catalog as recipes

    try:
        docker.from_env(timeout=10).ping()
    except docker.errors.DockerException as exc:  # pragma: no cover - CI starts dockerd
        pytest.skip(f"no Docker engine: {exc}")
    home = tmp_path / "home"
    home.mkdir()

    def first_start() -> hardware.HardwareReport:
        return hardware.hardware_report(home, nvml=fake_nvml.machine("none"), image_lock=home / "images.lock.json")

    report = first_start()
    assert report.docker.status == "ok" and {i.status for i in report.docker.images} == {"not_built"}
    backends = dataclasses.replace(make_backends(tmp_path, runtime="docker"), hardware_probe=first_start)
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        screen = await hardware_ready(pilot, app)
        await pilot.pause()
        assert "This machine can still run verify (v), eval-preview (e) and demo (d)" in " ".join(
            screen_text(app).split())
        demo = next(r for r in screen.view.recipes if r.name == "demo")
        assert demo.status == "can run (--runtime local)"
        assert "--runtime local" in " ".join(demo.reasons) and "make appliance" in " ".join(demo.reasons)
        assert "cannot run" not in demo.status
        screen.query_one("#hw-recipes").move_cursor(row=[r.name for r in screen.view.recipes].index("demo"))
        await pilot.pause()
        assert "demo: " in screen_text(app) and "can run (--runtime local)" in screen_text(app)
        from trace_tui.tui.views import recipe_details
        assert ("how", "runtime local under Options (o on its preview), or `trace-tui --recipe demo --runtime "
                       "local`") in recipe_details(demo)
        # a recipe that needs a GPU still cannot run, whatever the runtime
        assert next(r for r in screen.view.recipes if r.name == "smoke-3b").status == "cannot run"
    demo_checks = hardware.check_recipe(recipes.resolve_recipe(recipes.load_recipe("demo")), report)
    assert worst(demo_checks) == "fail"  # headless under Docker still refuses (its line offers --runtime local)
    local = hardware.check_recipe(recipes.resolve_recipe(recipes.load_recipe("demo")), report, runtime="local")
    assert worst(local) != "fail"


@pytest.mark.parametrize("size", SIZES)
async def test_under_the_local_runtime_preview_and_steps_speak_of_processes_not_images(tmp_path: Path,
                                                                                      size) -> None:
    """With `--runtime local` the preview listed each step as "image train: not built" and Steps said "runs
    in: train image": no image is used then. Both now say the step is a process with this host's Python."""
    import dataclasses

    backends = dataclasses.replace(make_backends(tmp_path, runtime="local"), runtime_name=lambda: "local")
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        await pilot.pause()
        body = text_of(app, "#preview-text")
        steps = body[body.index("\nSteps"):body.index("\nStore")]
        assert "image" not in steps.replace("no image", ""), steps
        assert "2. train-smoke (train) process with this host's Python (train stage, no image)" in steps
        assert "runtime local: each step runs as a process with this host's Python; no image is used" in body
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen), what="the steps")
        await pilot.press("y")  # prepare runs on the host; the next step has a stage
        await pilot.pause()
        shown = " ".join(text_of(app, "#step-text").split())
        assert "runs in: a process with this host's Python (train stage; --runtime local uses no image)" in shown
        assert "train image" not in shown


@pytest.mark.parametrize("size", SIZES)
async def test_a_check_that_says_more_lists_the_rest_in_the_preview(tmp_path: Path, size) -> None:
    """A step's check line ended in "(+1 more)" with no way to see it: the preview now lists each further
    finding under the line (Steps lists every finding of the step under "on this machine")."""
    from trace_tui import hardware
    from trace_tui.recipe import catalog as recipes

    backends = make_backends(tmp_path, runtime="docker")  # no GPU, Docker not reachable: two findings a step
    checks = hardware.check_recipe(recipes.resolve_recipe(recipes.load_recipe("full")), backends.hardware_probe(),
                                   runtime="docker")
    generate = next(c for c in checks if c.step == "generate")
    # the further findings: Docker's, and the disk's where this machine has less free than the step needs
    more = [note for note in generate.notes[1:] if not note.startswith("pass: ")]
    assert more and generate.reason.endswith(f"(+{len(more)} more)"), generate
    app = TraceTuiApp(backends)
    async with app.run_test(size=size) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                       what="the preview")
        await pilot.pause()
        body = " ".join(text_of(app, "#preview-text").split())
        for note in more:
            assert " ".join(note.split()) in body, note

"""What the terminal UI shows is true, whole and reachable: progress from the campaign's state, honest
rates, the CLI's own error lines, damage named, text never cut, keys that do what the help says.

Real parts: the recipes, the hardware report, the engine (Runner, Campaign, LocalRuntime over the
selftest worker), `trace-tui status` (trace_tui.engine.status), verify. Fakes, at the narrowest edge
(tests/tui_support.py): NVML and, for the hardware probe, an unreachable Docker client; where a test
needs a rate, a clock it moves itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_tui_flows import hardware_ready, start_run, text_of, wait_for
from test_tui_whole import screen_text
from tui_support import local_runner_factory, make_backends, selftest_resolved

from trace_tui.engine.events import Progress, SliceState, StepState
from trace_tui.engine.status import campaign_status
from trace_tui.tui.app import TraceTuiApp
from trace_tui.tui.progress import ProgressModel
from trace_tui.tui.screens.run import RunScreen, seed_model
from trace_tui.tui.widgets.progress_grid import ProgressGrid

SIZE = (120, 40)


class Clock:
    """A clock the test moves (rates and ETAs are measured against it)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run_campaign(tmp_path: Path, resolved: Any, *, stop_after_slices: int | None = None) -> Path:
    """The campaign the app's backends would run `resolved` into, run by the real engine (to its end, or
    cancelled once `stop_after_slices` slices have completed)."""
    path = tmp_path / "campaigns" / resolved.run_tag
    runner = local_runner_factory(tmp_path / "home")(resolved, path)
    completed = []

    def on_event(event: Any) -> None:
        if isinstance(event, SliceState) and event.state == "completed":
            completed.append(event)
            if stop_after_slices is not None and len(completed) >= stop_after_slices:
                runner.cancel()

    runner.run(on_event)
    return path


def grid_cells(run: RunScreen, step: str) -> dict[tuple[str, str, int | None], tuple[int, int]]:
    return {k: (c.done, c.total) for k, c in run.model.step_cells[step].items()}


def status_cells(path: Path, step: str) -> dict[tuple[str, str, int | None], tuple[int, int]]:
    return {(s["model"], s["benchmark"], s["seed"]): (s["done"], s["total"])
            for s in campaign_status(path)["slices"] if s["step"] == step}


# -- 1. the run screen starts from the campaign's state ------------------------------------------

async def test_resumed_run_shows_finished_slices_as_status_does(tmp_path: Path) -> None:
    """Running a recipe again whose campaign has finished slices: those slices show their rows, and the
    summary the same numbers `trace-tui status` prints (not 0/N and "generate: 8/16 rows")."""
    resolved = selftest_resolved(name="tuiresumed", rows=4, host_step=True)
    path = run_campaign(tmp_path, resolved, stop_after_slices=2)
    before = status_cells(path, "generate")
    assert sorted(before.values()).count((4, 4)) == 2  # two slices finished, two to do
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiresumed": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiresumed", decisions="yy")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60, what="the run's end")
        assert run.outcome == "completed"
        while app.screen is not run:
            app.pop_screen()
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        after = status_cells(path, "generate")
        assert grid_cells(run, "generate") == after
        done = sum(d for d, _ in after.values())
        total = sum(t for _, t in after.values())
        assert (done, total) == (16, 16)
        assert f"generate: {done}/{total} rows" in text_of(app, "#grid-summary")
        assert "0/4" not in screen_text(app)


async def test_run_again_on_a_complete_campaign_shows_it_complete(tmp_path: Path) -> None:
    """`r` (here: running the recipe again) on a campaign that turns out complete: the steps say "already
    complete" and the grid the campaign's rows, not `0/4` and `generate: 0/16 rows`."""
    resolved = selftest_resolved(name="tuiagain", rows=4, host_step=True)
    path = run_campaign(tmp_path, resolved)
    assert campaign_status(path)["complete"]
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuiagain": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        run = await start_run(pilot, app, "tuiagain", decisions="yy")
        await wait_for(pilot, lambda: run.outcome not in (None, "running"), timeout=60, what="the run's end")
        while app.screen is not run:
            app.pop_screen()
            await pilot.pause(0.1)
        await pilot.pause(0.3)
        assert grid_cells(run, "generate") == status_cells(path, "generate")
        assert "generate: 16/16 rows" in text_of(app, "#grid-summary")
        shown = screen_text(app)
        assert "already complete" in shown and "0/4" not in shown, shown


# -- 2. one step's rate is its rows over its elapsed time -----------------------------------------

async def test_step_rate_and_eta_count_slices_run_one_after_another_once(tmp_path: Path) -> None:
    """Four slices of 8 rows, one after another, 5 s each: after three the step has done 24 rows in 15 s
    (1.6/s, 5 s left), not the sum of three slices' own rates (~5/s and "ETA 1s")."""
    resolved = selftest_resolved(name="tuirate", rows=8, benchmarks={"b1": 8, "b2": 8, "b3": 8, "b4": 8},
                                 seeds=(42,), host_step=False)
    clock = Clock()
    model = ProgressModel(clock=clock)
    seed_model(model, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuirate": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        run = RunScreen(resolved, tmp_path / "c", start=False, model=model, clock=clock)
        await app.push_screen(run)
        model.apply(StepState(step="generate", state="running"))
        start = clock.t
        for i, bench in enumerate(("b1", "b2", "b3")):
            for done in range(0, 9):  # slice i: row k done at 5 i + 5 k / 8 s
                clock.t = start + 5.0 * i + 5.0 * done / 8
                model.apply(Progress(step="generate", model="tiny-a", seed=42, benchmark=bench, phase="generate",
                                     done=done, total=8))
        run.redraw()
        await pilot.pause(0.2)
        summary = text_of(app, "#grid-summary")
        rate = model.overall_rate()
        assert rate is not None and abs(rate - 24 / 15) < 0.1, rate
        assert "generate: 24/32 rows · 1.6/s · ETA 5s" in summary, summary
        row = run.query_one(ProgressGrid)._row_rate("tiny-a", "b1")
        assert row == ("1.6/s", "done")  # a single slice: its own rows over its own time


def test_a_slices_start_up_counts_in_its_steps_rate() -> None:
    """A score slice: its job starts (worker start-up), then all 8 rows are reported within 0.1 s. The step
    did 8 rows in 1 s (8/s), not 80/s over the 0.1 s between its first and last progress lines."""
    clock = Clock()
    model = ProgressModel(clock=clock)
    model.add_slice("m", "b1", 42, total=8, step="score")
    model.add_slice("m", "b2", 42, total=8, step="score")
    model.apply(StepState(step="score", state="running"))
    model.apply(SliceState(step="score", model="m", seed=42, benchmark="b1", state="running", done=0, total=8))
    clock.t += 0.9
    for done in (0, 8):
        model.apply(Progress(step="score", model="m", seed=42, benchmark="b1", phase="score", done=done, total=8))
        clock.t += 0.1
    assert model.overall_rate() == 8 / 1.0 and model.overall_eta() == 1.0
    assert model.step_cells["score"][("m", "b1", 42)].rate() == 8 / 1.0


# -- 3. a directory that is not a release: the CLI's one line, no checklist ----------------------

async def test_verify_a_directory_that_is_not_a_release_says_what_the_cli_says(tmp_path: Path) -> None:
    import pytest

    from trace_tui.errors import UsageError
    from trace_tui.tui.screens.verify import VerifyScreen
    from trace_tui.verify.release import release_dir_arg

    not_release = tmp_path / "not-a-release"
    not_release.mkdir()
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.is_mounted)
        verify = app.screen
        for typed in (str(not_release), str(tmp_path / "nonexistent")):
            with pytest.raises(UsageError) as cli:  # what `trace-tui verify --release-dir DIR` says (exit 2)
                release_dir_arg(typed)
            box = verify.query_one("#verify-path")
            box.value = ""
            box.focus()
            await pilot.press(*typed, "enter")
            await wait_for(pilot, lambda: "Cannot verify" in text_of(app, "#verify-summary"), what="the reason")
            summary = text_of(app, "#verify-summary")
            assert summary == f"Cannot verify: {cli.value.line()}", summary
            assert "absent" not in summary and "FAILED" not in summary
            assert verify.query_one("#verify-checklist").row_count == 0
            verify.query_one("#verify-summary").update("")
        assert "no such directory" in summary


# -- 4. the campaigns list shows damage, says why keys do nothing, tells copies apart -----------

def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def damaged_copies(root: Path, done: Path) -> dict[str, Path]:
    """Copies of a complete campaign: one as it is, one whose recipe.json is a list, one whose state.sqlite
    is cut short (what a full disk or a copy that stopped part-way leaves)."""
    import shutil

    made = {}
    for name in ("copy-of-done", "recipe-is-a-list", "state-cut-short"):
        made[name] = root / name
        shutil.copytree(done, made[name], ignore=shutil.ignore_patterns(".lock"))
    (made["recipe-is-a-list"] / "recipe.json").write_text("[1, 2]\n")
    for leftover in ("state.sqlite-wal", "state.sqlite-shm"):
        (made["state-cut-short"] / leftover).unlink(missing_ok=True)
    with open(made["state-cut-short"] / "state.sqlite", "r+b") as fh:
        fh.truncate(1000)
    return made


async def test_campaigns_list_shows_damage_and_why_keys_do_nothing(tmp_path: Path) -> None:
    from campaigns_support import build_campaigns
    from test_tui_campaigns import backends_for, open_campaigns

    from trace_tui.tui.dialogs.detail import DetailScreen
    from trace_tui.tui.widgets.table import LiteralTable

    made = build_campaigns(tmp_path / "campaigns", tmp_path / "home")
    try:
        copies = damaged_copies(made.root, made.paths["tuidone"])
        app = TraceTuiApp(backends_for(tmp_path))
        async with app.run_test(size=(140, 40)) as pilot:
            screen = await open_campaigns(pilot, app)
            table = screen.query_one(LiteralTable)
            rows = {Path(s.path).name: s for s in screen.summaries}
            # status calls it complete; w and r could not open it: the list says so, with the reason
            listed = rows["recipe-is-a-list"]
            assert listed.state == "unreadable" and "not a resolved recipe" in listed.message, listed
            assert rows["state-cut-short"].state == "unreadable"
            # copies of one campaign are told apart by their folder
            shown = screen_text(app)
            assert "copy-of-done" in shown and made.paths["tuidone"].name in shown
            assert rows["copy-of-done"].state == "complete"
            table.move_cursor(row=table.get_row_index(str(copies["recipe-is-a-list"])))
            await pilot.pause()
            await pilot.press("i")
            await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), what="the details")
            assert "not a resolved recipe" in app.screen.text
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)
            for name in ("recipe-is-a-list", "state-cut-short"):
                table.move_cursor(row=table.get_row_index(str(copies[name])))
                await pilot.pause()
                for key, action in (("r", "resume"), ("w", "watch"), ("v", "verify"), ("enter", "watch")):
                    app.clear_notifications()
                    await pilot.press(key)
                    await pilot.pause(0.1)
                    assert app.screen is screen, (name, key)
                    said = notices(app)
                    assert said == [f"cannot {action} {name}: it cannot be read · i shows why"], (name, key, said)
    finally:
        made.close()


# -- 5. `trace-tui --campaign DIR` on a campaign that cannot be opened: the whole reason stays -------

async def test_campaign_that_cannot_be_opened_says_the_whole_reason_until_esc(tmp_path: Path) -> None:
    import asyncio

    from trace_tui.cli import build_parser
    from trace_tui.commands.launch import run_request
    from trace_tui.service.campaigns import read_campaign
    from trace_tui.tui.app import build_app
    from trace_tui.tui.screens.hardware import HardwareScreen
    from trace_tui.tui.screens.refused import RefusedScreen

    resolved = selftest_resolved(name="tuicutshort", rows=2, host_step=False)
    path = run_campaign(tmp_path, resolved)
    for leftover in ("state.sqlite-wal", "state.sqlite-shm"):
        (path / leftover).unlink(missing_ok=True)
    with open(path / "state.sqlite", "r+b") as fh:
        fh.truncate(1000)
    try:
        read_campaign(path)
        raise AssertionError("the cut-short campaign opened")
    except Exception as exc:  # noqa: BLE001 - the reason the UI must show whole
        line = exc.line()
    assert "`mv " in line and line.endswith(".broken`))")
    args = build_parser().parse_args(["--campaign", str(path)])
    app = build_app(run_request(args), backends=make_backends(tmp_path, extra_recipes={"tuicutshort": resolved}))
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RefusedScreen), what="the reason")
        shown = [str(w.render()) for w in app.screen.query(".refused-reason")]
        assert shown == [f"• {line}"]
        assert str(path) in text_of(app, "#refused-title")
        await asyncio.sleep(6)  # longer than a toast lives
        await pilot.pause()
        assert isinstance(app.screen, RefusedScreen) and "state.sqlite.broken" in screen_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, HardwareScreen)


# -- 6. text is never cut so that it misleads ---------------------------------------------------

def demo_run_screen(app, *, kept: bool = True) -> RunScreen:
    """The demo recipe's run screen, each step "already complete" as a resumed campaign's runner says."""
    resolved = app.backends.resolve_recipe(app.backends.load_recipe("demo"))
    model = ProgressModel(clock=app.backends.clock)
    seed_model(model, resolved)
    for step in resolved.recipe.steps:
        model.apply(StepState(step=step.id, state="skipped" if kept else "completed",
                              message="already complete" if kept else ""))
    return RunScreen(resolved, Path("/campaigns") / resolved.run_tag, start=False, model=model, runtime="local")


async def test_run_screen_step_states_are_whole(tmp_path: Path) -> None:
    """`train-smoke ✓ already complete`, never `✓ already comple` (80x24 and 100x30)."""
    for size in ((80, 24), (100, 30)):
        app = TraceTuiApp(make_backends(tmp_path))
        async with app.run_test(size=size) as pilot:
            await hardware_ready(pilot, app)
            run = demo_run_screen(app)
            await app.push_screen(run)
            await pilot.pause(0.5)
            lines = screen_text(app).splitlines()
            for step in run.resolved.recipe.steps:
                line = next(ln for ln in lines if f" {step.id} " in ln)
                assert "✓ already complete" in line, (size, line)


async def test_run_screen_keeps_its_grid_on_a_small_terminal(tmp_path: Path) -> None:
    """At 60x15 the grid (its rows and the summary) stays on screen; the step list shows the marks."""
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(60, 15)) as pilot:
        await hardware_ready(pilot, app)
        run = demo_run_screen(app, kept=False)
        await app.push_screen(run)
        await pilot.pause(0.5)
        shown = screen_text(app)
        table = run.query_one("#grid-table")
        assert table.size.height >= 5, table.size
        for bench in ("counting", "arithmetic", "choice", "naming"):
            assert bench in shown, shown
        assert "0/32 rows" in shown and "✓ train-smoke" in shown, shown


async def test_a_long_grid_filter_is_named_in_the_summary(tmp_path: Path) -> None:
    """A 3000-character filter: the summary names it (its start and its length), never an empty `filter:`."""
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        run = demo_run_screen(app)
        await app.push_screen(run)
        await pilot.pause(0.3)
        await pilot.press("slash")
        run.query_one("#grid-filter").value = "x" * 3000
        await pilot.pause(0.3)
        assert text_of(app, "#grid-summary").endswith("filter: " + "x" * 24 + "… (3,000 characters)")
        line = next(ln for ln in screen_text(app).splitlines() if "filter:" in ln)
        assert "filter: " + "x" * 24 + "…" in line, line


async def test_verify_checklist_columns_are_whole_with_and_without_full_hashes(tmp_path: Path) -> None:
    """A campaign's checklist at 100x30: no column is pushed off the screen (empty expected/actual columns
    took the width and cut detail to `comp`), and each cell is whole (wrapped), with `w` too."""
    from rich.cells import cell_len

    from trace_tui.tui.screens.verify import VerifyScreen

    resolved = selftest_resolved(name="tuichecks", rows=2, host_step=True)
    path = run_campaign(tmp_path, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuichecks": resolved}))
    async with app.run_test(size=(100, 30)) as pilot:
        await hardware_ready(pilot, app)
        app.show_verify("campaign", path)
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.view is not None,
                       timeout=60, what="the verification")
        verify = app.screen
        table = verify.query_one("#verify-checklist")
        for wide in (False, True):
            if wide:
                await pilot.press("w")
            await pilot.pause(0.5)
            assert verify.wide == wide, verify.focused
            assert table.virtual_size.width <= table.size.width, (wide, table.virtual_size, table.size)
            for i, check in enumerate(verify.view.checks):
                cells = [table.get_row_at(i)[c] for c in range(5)]
                texts = [getattr(c, "plain", str(c)) for c in cells]
                widths = [col.get_render_width(table) - 2 * table.cell_padding for col in table.ordered_columns]
                for text, width in zip(texts, widths):
                    assert all(cell_len(line) <= width for line in text.split("\n")), (wide, text, width)
                assert "".join(texts[4].split()) == "".join(check.detail.split()), (texts[4], check.detail)
                if wide and check.expected:
                    assert "".join(texts[2].split()) == check.expected


async def test_campaigns_list_at_60_columns_cuts_no_time(tmp_path: Path) -> None:
    """At 60x15 the last change wraps (`2026-...` over `16:48 UTC`), never `2026-12-02 1`."""
    from rich.cells import cell_len
    from test_tui_campaigns import open_campaigns

    from trace_tui.tui.screens.campaigns import when
    from trace_tui.tui.widgets.table import LiteralTable

    resolved = selftest_resolved(name="tuinarrow", rows=2, host_step=False)
    run_campaign(tmp_path, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuinarrow": resolved}))
    async with app.run_test(size=(60, 15)) as pilot:
        screen = await open_campaigns(pilot, app)
        await pilot.pause(0.5)
        table = screen.query_one(LiteralTable)
        assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)
        texts = [getattr(c, "plain", str(c)) for c in table.get_row_at(0)]
        assert " ".join(texts[4].split()) == when(screen.summaries[0].last_change), texts  # whole, wrapped
        widths = [col.get_render_width(table) - 2 * table.cell_padding for col in table.ordered_columns]
        for text, width in zip(texts, widths):
            assert all(cell_len(line) <= width for line in text.split("\n")), (text, width)


async def test_options_runtime_choices_are_whole_at_60x15(tmp_path: Path) -> None:
    from rich.cells import cell_len

    from trace_tui.tui.dialogs.options import OptionsScreen
    from trace_tui.tui.screens.preview import PreviewScreen

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(60, 15)) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("demo")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OptionsScreen))
        await pilot.pause(0.3)
        for set_id in ("#options-runtime", "#options-scheduler"):
            for button in app.screen.query_one(set_id).query("RadioButton"):
                label = str(button.label)
                # the button's glyph (`▐●▌ `) and its whole label fit in the width it has
                assert button.content_size.width >= cell_len(label) + 4, (label, button.content_size)
        assert "runtime …" not in screen_text(app)


# -- 7. keys: the footer, the help and the README agree with what the keys do -----------------------

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_keys(screen_name: str) -> list[str]:
    """The keys the README's "The terminal UI" table names for a screen (its last column)."""
    import re

    section = README.read_text().split("## The terminal UI", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {screen_name} |"))
    keys = row.rstrip(" |").rsplit(" | ", 1)[1]
    return [k for k in re.findall(r"`([^`]+)`", keys) if not k.startswith("trace-tui")]


async def test_run_screen_keys_in_readme_help_and_footer_agree(tmp_path: Path) -> None:
    """Each key the README names for the Run screen is a key of that screen in ? (help), and the log key
    (`f`) does what they say: the log goes full-screen and back; no key (`l`) is listed that shows nothing."""
    from trace_tui.tui.screens.help import HelpScreen, binding_rows

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        run = demo_run_screen(app)
        await app.push_screen(run)
        await pilot.pause(0.3)
        helped = {key: description for key, description, _ in binding_rows(run)}
        for key in readme_keys("Run"):
            shown = {"esc": "esc", "enter": "⏎"}.get(key, key)
            if key == "enter":
                continue  # on the campaigns list (where esc while it runs leads)
            assert shown in helped, (key, helped)
        assert "l" not in helped and helped["f"] == "Full log"
        footer = screen_text(app).splitlines()[-1]
        assert "f Full log" in footer
        log = run.query_one("#run-log")
        height = log.size.height
        await pilot.press("f")
        await pilot.pause(0.2)
        assert log.size.height > height + 8 and log.has_focus
        await pilot.press("f")
        await pilot.pause(0.2)
        assert log.size.height == height
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)


async def test_enter_on_the_where_list_uses_it(tmp_path: Path) -> None:
    """"Use it (enter)": enter on the list of places (this machine / Slurm) takes the highlighted one and
    closes the dialog, as the button says (it only toggled the radio button)."""
    from trace_tui.tui.screens.preview import PreviewScreen
    from trace_tui.tui.screens.scheduler import SchedulerScreen

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("demo")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        preview = app.screen
        assert not app.scheduler.slurm
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, SchedulerScreen))
        footer = screen_text(app).splitlines()[-1]
        assert "Use it" in footer and "Walk the steps" not in footer, footer  # the dialog's keys
        assert app.screen.focused is app.screen.query_one("#scheduler-kind")
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: app.screen is preview, what="the dialog to close")
        assert app.scheduler.slurm


async def test_options_dialog_footer_shows_its_own_keys(tmp_path: Path) -> None:
    from trace_tui.tui.dialogs.options import OptionsScreen
    from trace_tui.tui.screens.preview import PreviewScreen

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("demo")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, OptionsScreen))
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        assert "Apply" in footer and "Cancel" in footer and "Walk the steps" not in footer, footer


async def test_screenshot_is_saved_where_there_is_no_downloads_folder(tmp_path: Path, monkeypatch) -> None:
    """The palette's "Screenshot" without ~/Downloads: saved into the current directory, and it says where."""
    import os

    home = tmp_path / "user"
    home.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.chdir(here)
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"Screenshot")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("screenshot" in n.lower() for n in notices(app)), what="the notice")
        said = notices(app)
        assert not any("Failed" in n for n in said), said
        saved = list(here.glob("*.svg"))
        assert len(saved) == 1 and str(saved[0]) in " ".join(said), (said, os.listdir(here))


async def test_hardware_footer_names_e_and_d_and_stays_whole(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await hardware_ready(pilot, app)
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        for hint in ("e Eval preview", "d Demo", "? Help", "q Quit"):
            assert hint in footer, footer
        # the keys that gave the footer's room are named on the screen
        assert "r: all recipes" in screen_text(app) and "f5: check again" in screen_text(app)


# -- 8. help, f5, the verify screen's path box, sort marks, step descriptions ------------------------

async def test_help_lists_the_table_keys_and_no_internal_names(tmp_path: Path) -> None:
    from test_tui_campaigns import open_campaigns

    from trace_tui.tui.screens.help import HelpScreen, binding_rows
    from trace_tui.tui.screens.verify import VerifyScreen

    resolved = selftest_resolved(name="tuihelp", rows=2, host_step=False)
    run_campaign(tmp_path, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuihelp": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await open_campaigns(pilot, app)
        app.show_verify("release", None)  # an empty path: the box has the focus, not the checklist
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.is_mounted)
        await pilot.pause(0.2)
        for screen in (app.screen_stack[-2], app.screen):
            rows = binding_rows(screen)
            keys = {key for key, _, _ in rows}
            wheres = {where for _, _, where in rows}
            assert {"⏎", "i", "s"} <= keys, (type(screen).__name__, keys)
            assert "/" in keys
            assert not any(k.startswith("super+") for k in keys), keys
            assert wheres <= {"everywhere", "this screen", "the table", "tables"}, wheres
        campaigns_keys = {key for key, _, _ in binding_rows(app.screen_stack[-2])}
        assert {"w", "r", "v"} <= campaigns_keys
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        shown = screen_text(app)
        assert "super+c" not in shown and "LiteralTable" not in shown


async def test_f5_once_says_checked_again_without_a_count(tmp_path: Path) -> None:
    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        screen = await hardware_ready(pilot, app)
        await pilot.press("f5")
        await wait_for(pilot, lambda: screen.probes == 2, what="the second probe")
        await pilot.pause()
        message = text_of(app, "#hw-gpu-message")
        assert message.endswith("checked again") and "2 checks" not in message, message
        await pilot.press("f5")
        await wait_for(pilot, lambda: screen.probes == 3, what="the third probe")
        await pilot.pause()
        assert text_of(app, "#hw-gpu-message").endswith("checked again (2 times)")


async def test_verify_path_box_keeps_the_keys_and_its_footer_names_help_and_quit(tmp_path: Path) -> None:
    """With the path box focused, ? and q are typed into it: the footer names f1 Help and ^q Quit (it named
    neither); after enter the box keeps the focus, so a later `/` is typed into the path, not the filter."""
    from trace_tui.tui.screens.verify import VerifyScreen

    resolved = selftest_resolved(name="tuipathbox", rows=2, host_step=False)
    path = run_campaign(tmp_path, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuipathbox": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.show_verify("campaign", None)
        await wait_for(pilot, lambda: isinstance(app.screen, VerifyScreen) and app.screen.is_mounted)
        verify = app.screen
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        assert "f1 Help" in footer and "^q Quit" in footer, footer
        box = verify.query_one("#verify-path")
        await pilot.press(*str(path), "enter")
        await wait_for(pilot, lambda: verify.view is not None, timeout=60, what="the verification")
        await pilot.pause(0.2)
        assert box.has_focus
        await pilot.press("slash")
        await pilot.pause(0.1)
        assert box.value == f"{path}/" and verify.query_one("#verify-filter").has_class("hidden")
        await pilot.press("tab")
        await pilot.pause(0.2)
        footer = screen_text(app).splitlines()[-1]
        assert "? Help" in footer and "q Quit" in footer, footer


async def test_sorting_the_campaigns_marks_the_sorted_column(tmp_path: Path) -> None:
    """Each `s` marks the column it sorts by (`recipe ↓`: the mark was cut off where the title is the
    column's widest text, and the header kept its old drawing)."""
    from test_tui_campaigns import open_campaigns

    resolved = selftest_resolved(name="tuisort", rows=2, host_step=False)
    run_campaign(tmp_path, resolved)
    app = TraceTuiApp(make_backends(tmp_path, extra_recipes={"tuisort": resolved}))
    async with app.run_test(size=SIZE) as pilot:
        await open_campaigns(pilot, app)
        for title in ("state", "recipe", "folder", "rows", "last change"):
            await pilot.press("s")
            await pilot.pause(0.3)
            header = screen_text(app).splitlines()[1]
            assert f"{title} ↓" in header and header.count("↓") == 1, (title, header)
        await pilot.press("s")
        await pilot.pause(0.3)
        assert "↓" not in screen_text(app).splitlines()[1]


async def test_every_demo_step_says_what_it_does(tmp_path: Path) -> None:
    from trace_tui.tui.dialogs.steps import StepsScreen
    from trace_tui.tui.screens.preview import PreviewScreen

    app = TraceTuiApp(make_backends(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("demo")
        await wait_for(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, StepsScreen) and app.screen.is_mounted)
        steps = app.screen
        for i, step in enumerate(steps.steps):
            steps.index = i
            steps.show()
            await pilot.pause(0.05)
            assert "(no description)" not in text_of(app, "#step-text"), step.id

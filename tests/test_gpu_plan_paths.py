"""One GPU plan on every path: headless and the TUI build the same runner plan, status shows it, the
release launcher's GPU_GROUPS are its groups, and `full --benchmarks` is refused up front everywhere.

Fakes: NVML only (tests/fake_nvml.py machines, through TRACE_TUI_FAKE_NVML as the command line reads
it); the recipes, the plan, the runner, the TUI's real backends and the Docker engine are real.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hardware_nvml import report_for

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.engine.status import campaign_status, render_status
from trace_tui.evaluator import launcher
from trace_tui.gpu_plan import run_plan
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.runtime.local import LocalRuntime
from trace_tui.service.requests import RunOptions, RunRequest, Selection
from trace_tui.service.requirements import run_gpu_plan
from trace_tui.stages.release_eval import job_gpu_groups

TESTS = Path(__file__).resolve().parent
SEVEN_B = ["qwen2.5-vl-7b-base", "trace-qwen2.5-vl-7b"]


def _first_job_spec(runner: Runner, step_id: str) -> dict:
    step = next(s for s in runner.recipe.steps if s.id == step_id)
    job = next(j for j in runner.plan().jobs if j.step.id == step_id)
    return runner.launches.job_spec(job, runner.groups_for(step)[0])


def test_the_tui_runner_gets_the_plan_a_headless_run_gets(tmp_path, monkeypatch):
    """The TUI's real runner factory on 8x RTX 4090: the 7B generation job gets four tp-2 groups and the
    judge two tp-4 groups, exactly as headless (not GPU 0 alone)."""
    from trace_tui.tui.backends import default_backends

    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "8xrtx4090")
    monkeypatch.syspath_prepend(str(TESTS))
    backends = default_backends(RunRequest(selection=Selection(models=tuple(SEVEN_B)),
                                           options=RunOptions(home=str(tmp_path / "home"), runtime="local")))
    resolved = backends.resolve_recipe(backends.load_recipe("full"))
    owned = backends.runner_factory(resolved, tmp_path / "tui-campaign")
    try:
        tui = _first_job_spec(owned.runner, "generate"), _first_job_spec(owned.runner, "score")
    finally:
        owned.campaign.close()
    with Campaign(tmp_path / "headless-campaign") as c:
        headless = Runner(resolved, c, LocalRuntime(), plan=run_gpu_plan(resolved, backends.hardware_probe()))
        want = _first_job_spec(headless, "generate"), _first_job_spec(headless, "score")
    assert tui[0]["host_gpus"] == list(range(8)) and tui[0]["gpu_groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert tui[1]["gpu_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]] and tui[1]["tensor_parallel"] == 4
    for a, b in zip(tui, want):
        assert (a["host_gpus"], a["gpu_groups"], a["tensor_parallel"]) == \
            (b["host_gpus"], b["gpu_groups"], b["tensor_parallel"])


def test_the_release_launcher_gets_the_plans_groups_not_one_gpu_per_endpoint(tmp_path):
    """7B on 24 GiB cards: preview shows GPU_GROUPS "0,1 2,3 4,5 6,7"; the worker hands the launcher that."""
    from trace_tui.preview import build_preview

    resolved = resolve_recipe("full", models=SEVEN_B)
    report = report_for("8xrtx4090")
    preview = build_preview(resolved, report, home=tmp_path / "home")
    with Campaign(tmp_path / "c") as c:
        runner = Runner(resolved, c, LocalRuntime(), plan=run_plan(resolved, report))
        gen, score = _first_job_spec(runner, "generate"), _first_job_spec(runner, "score")
    assert preview.gpu_groups == "0,1 2,3 4,5 6,7"
    assert launcher.launcher_env("generate", job_gpu_groups(gen))["GPU_GROUPS"] == preview.gpu_groups
    # the score phase serves the judge: its own groups, as preview shows them for that step
    judge = next(s for s in preview.step_gpus if s.step == "score")
    assert launcher.launcher_env("score", job_gpu_groups(score))["GPU_GROUPS"] == judge.gpu_groups_env() \
        == "0,1,2,3 4,5,6,7"


def test_status_shows_the_plan_the_run_gave_its_steps(tmp_path):
    """The runner records the run's plan in the campaign; `status` (JSON and text) shows that same plan."""
    from tui_support import selftest_resolved

    resolved = selftest_resolved(name="planstatus", rows=2, seeds=(42,))
    plan = run_plan(resolved, report_for("8xh100"))
    with Campaign(tmp_path / "c") as c:
        result = Runner(resolved, c, LocalRuntime(), plan=plan).run(lambda e: None)
    assert result.exit_code == 0
    st = campaign_status(tmp_path / "c")
    assert st["gpu_plan"] == [s.model_dump() for s in plan.steps]
    text = render_status(st)
    assert "GPU plan (as given to this campaign's last run)" in text
    for line in plan.lines():
        assert f"  {line}" in text


def _cli(*args: str, home: Path, machine: str = "8xh100") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACE_TUI_HOME": str(home), "XDG_DATA_HOME": str(home.parent / "xdg"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "TRACE_TUI_FAKE_NVML": machine}
    env.pop("TRACE_TUI_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_full_with_benchmarks_is_refused_up_front_by_preview_and_headless(tmp_path):
    """Exit 2 and one line before anything starts (it used to pass preview and fail in the container)."""
    for args in (("preview", "--recipe", "full", "--benchmarks", "mmstar"),
                 ("--recipe", "full", "--benchmarks", "mmstar", "--yes")):
        out = _cli(*args, home=tmp_path / "h")
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "takes no benchmark filter" in out.stderr and "Traceback" not in out.stderr
        assert "run it without --benchmarks" in out.stderr
    assert not (tmp_path / "h" / "campaigns").exists()
    # eval-preview previews full: refused alike
    assert _cli("preview", "--recipe", "eval-preview", "--benchmarks", "mmstar", home=tmp_path / "h").returncode == 2


async def test_full_with_benchmarks_is_refused_in_the_tui(tmp_path, monkeypatch):
    """The TUI's preview of `full` under --benchmarks says why it cannot run, and offers no steps."""
    from test_tui_flows import SIZE, hardware_ready, text_of, wait_for

    from trace_tui.tui.app import TraceTuiApp
    from trace_tui.tui.backends import default_backends
    from trace_tui.tui.screens.preview import PreviewScreen

    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "8xh100")
    monkeypatch.syspath_prepend(str(TESTS))
    app = TraceTuiApp(default_backends(RunRequest(selection=Selection(benchmarks=("mmstar",)),
                                                  options=RunOptions(home=str(tmp_path / "home"), runtime="local"))))
    async with app.run_test(size=SIZE) as pilot:
        await hardware_ready(pilot, app)
        app.open_recipe("full")
        def refused() -> bool:
            if not isinstance(app.screen, PreviewScreen) or not app.screen.query("#preview-text"):
                return False
            return "Cannot preview" in text_of(app, "#preview-text")

        await wait_for(pilot, refused, what="the refusal")
        text = text_of(app, "#preview-text")
        assert "takes no benchmark filter" in text and app.screen.resolved is None
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, PreviewScreen)  # nothing to walk, nothing started
    assert not (tmp_path / "home" / "campaigns").exists()


@pytest.mark.parametrize("recipe", ["full"])
def test_the_resolver_is_where_the_refusal_lives(recipe):
    from trace_tui.errors import UsageError

    with pytest.raises(UsageError, match="takes no benchmark filter"):
        resolve_recipe(recipe, benchmarks=["mmstar", "erqa"])
    assert len(resolve_recipe(recipe).benchmarks) == 24


def test_a_step_the_plan_refuses_never_starts(tmp_path):
    """The TUI lets a user go on past a failed check; the runner still refuses a step the plan refused
    (the judge on two 24 GiB cards) before any container starts, naming the step and why (exit 3)."""
    from trace_tui.errors import RequirementsError

    resolved = resolve_recipe("validation", models=SEVEN_B)
    with Campaign(tmp_path / "c") as c:
        runner = Runner(resolved, c, LocalRuntime(), plan=run_plan(resolved, report_for("2xrtx3090")))
        with pytest.raises(RequirementsError) as err:
            runner.run(lambda e: None)
    assert "extract: needs 1 GPU with >= 80 GiB per judge endpoint (Qwen3-32B)" in err.value.line()
    assert not list((tmp_path / "c").glob("jobs/*/*/job.json"))

"""The engine with the local runtime (real subprocesses of the selftest worker): plan, resume,
invalidation, failure messages, cancel, status and campaign verification. No Docker here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_engine_support import (
    REPO,
    content_of,
    make_recipe,
    rederived,
    resolved_for,
    selftest_step,
    stop_a_worker_holding_scratch,
)

from trace_tui.campaign_files.state import JobRecord
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.events import (
    Log,
    Progress,
    RunState,
    SliceState,
    coalesce_progress,
    parse_stage_line,
    progress_key,
)
from trace_tui.engine.planner import PlannedJob, decide, diff_inputs
from trace_tui.engine.printer import HeadlessPrinter
from trace_tui.engine.runner import Runner, RunResult
from trace_tui.engine.status import campaign_status
from trace_tui.runtime.local import LocalRuntime
from trace_tui.verify.campaign import compare, load_published, verify_campaign

TRACE_TUI = [sys.executable, "-m", "trace_tui"]


def run_campaign(tmp: Path, resolved, name: str = "c", **kw) -> tuple[RunResult, list]:
    events: list = []
    with Campaign(tmp / name) as c:
        result = Runner(resolved, c, LocalRuntime(), store=tmp / "store", **kw).run(events.append)
    return result, events


def two_step_recipe(*gen_args: str):
    return make_recipe([selftest_step("gen", "rows", *gen_args, image=None),
                        selftest_step("agg", "whoami", per_slice=False, image=None)])


# ---------------------------------------------------------------- pure parts


def test_decide_skip_resume_invalidate_run() -> None:
    job = lambda: PlannedJob(step=None, position=0, slice="m/1/b", model="m", seed=1, benchmark="b",
                             inputs={"model": {"revision": "new"}}, input_hash="h2", total=10)

    def rec(**kw) -> JobRecord:
        base = dict(step="gen", slice="m/1/b", model="m", seed=1, benchmark="b", input_hash="h2",
                    inputs={"model": {"revision": "old"}}, state="pending", phase="", done=0, total=10, score=None,
                    rate=None, message="", receipt=None, attempts=0, expected=True, started_at=None,
                    finished_at=None, updated_at=None)
        base.update(kw)
        return JobRecord(**base)

    assert decide(job(), None).action == "run"
    assert decide(job(), rec(state="completed", receipt="r.json", done=10)).action == "skip"
    resumed = decide(job(), rec(state="running", done=4))
    assert (resumed.action, resumed.done) == ("resume", 4)
    inv = decide(job(), rec(input_hash="h1", state="completed", receipt="r.json"))
    assert inv.action == "invalidate" and "model.revision: old -> new" in inv.reason
    assert diff_inputs({"a": {"b": 1}, "c": 2}, {"a": {"b": 2}, "c": 2}) == ["a.b: 1 -> 2"]


def test_malformed_lines_are_log_text() -> None:
    for line in ("plain", '{"not json', "[1]", '{"type": "progress", "done": "x"}', '{"type": "nope"}'):
        ev = parse_stage_line(line, step="s")
        assert isinstance(ev, Log) and ev.message == line and ev.step == "s"
    ev = parse_stage_line('{"type":"metric","name":"score","value":1.5}', step="s")
    assert ev.type == "metric" and ev.value == 1.5
    ev = parse_stage_line('{"type":"progress","phase":"p","done":1,"total":2,"step":"other"}\n', step="s")
    assert ev.step == "s"  # the runner says which step spoke, not the stage


def test_a_burst_of_progress_is_coalesced_to_its_first_and_last_line() -> None:
    """Lines read together: a progress line followed by the same progress at a later count is
    dropped, except the first of its key; other events, other slices and odd shapes are kept."""
    def p(done: int, bench: str = "b", phase: str = "gen") -> str:
        return ('{"benchmark":"%s","done":%d,"model":"m","phase":"%s","seed":1,"total":9,"type":"progress"}\n'
                % (bench, done, phase))

    seen: set[str] = set()
    burst = [p(0), p(1), p(2), p(3)]
    assert coalesce_progress(burst, seen) == [p(0), p(3)]
    assert coalesce_progress([p(4), p(5)], seen) == [p(5)]  # the key was announced in an earlier read
    status = '{"type":"status","state":"completed"}\n'
    mixed = [p(6), status, p(7), p(8, bench="c"), p(1, phase="score"), p(2, phase="score"), "plain text\n", p(9)]
    assert coalesce_progress(mixed, seen) == [p(6), status, p(7), p(8, bench="c"), p(1, phase="score"),
                                              p(2, phase="score"), "plain text\n", p(9)]
    odd = ['{"type":"progress","phase":"p","done":"x","total":2}\n', '{"type":"progress","phase":"p","done":"x","total":2}\n',
           '{"type": "progress", "phase": "p", "done": 1, "total": 2}\n',
           '{"type": "progress", "phase": "p", "done": 2, "total": 2}\n',
           '{"type":"progress","phase":"p","done":1.5,"total":2}\n', '{"type":"progress","phase":"p","done":2.5,"total":2}\n']
    assert coalesce_progress(odd, set()) == odd  # never a line whose count is not a plain integer
    assert progress_key(p(12)) == progress_key(p(345)) != progress_key(p(12, bench="c"))


def test_a_progress_burst_through_a_real_worker_keeps_the_last_count(tmp_path: Path) -> None:
    """200 progress lines a worker writes in one burst reach the state with their last count,
    the slice announced once, with the first count of the burst."""
    resolved = resolved_for(make_recipe([selftest_step("s", "events", "--events", "200", per_slice=False,
                                                       image=None)]))
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0, result.message
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[0].done == 1 and progress[-1].done == 200 and len(progress) <= 200
    assert [e.done for e in progress] == sorted(e.done for e in progress)
    with Campaign(tmp_path / "c") as c:
        (job,) = c.jobs().values()
        assert (job.done, job.total, job.state) == (200, 200, "completed")


def test_printer_throttles_progress_and_prints_slice_lines() -> None:
    now = [0.0]
    out = io.StringIO()
    p = HeadlessPrinter(out, interval=5.0, clock=lambda: now[0])
    p(RunState(state="planned", rows_total=100, rows_done=0, jobs_total=1, message="1 job"))
    p(SliceState(step="gen", model="m", seed=1, benchmark="b", state="running", total=100))
    for i in range(1, 51):
        now[0] = i * 0.2  # 50 events over 10 s -> at most 2 progress lines
        p(Progress(step="gen", model="m", seed=1, benchmark="b", phase="generate", done=i, total=100))
    p(SliceState(step="gen", model="m", seed=1, benchmark="b", state="completed", done=100, total=100, score=50.0))
    lines = out.getvalue().splitlines()
    progress = [ln for ln in lines if "rows/s" in ln]
    assert 1 <= len(progress) <= 2
    assert "ETA" in progress[-1] and "all 50/100 rows" in progress[-1] and "5.0 rows/s" in progress[-1]
    assert any("running" in ln for ln in lines) and "score 50.00" in lines[-1]
    js = io.StringIO()
    HeadlessPrinter(js, fmt="json")(Progress(step="gen", phase="p", done=1, total=2))
    assert json.loads(js.getvalue())["type"] == "progress"


# ---------------------------------------------------------------- runs with the local runtime


def test_run_then_rerun_skips_everything(tmp_path: Path) -> None:
    resolved = resolved_for(two_step_recipe(), seeds=[42, 43], benchmarks={"t1": 6, "t2": 3})
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0 and result.jobs_done == 5 and result.rows_done == 18
    completed = [e for e in events if isinstance(e, SliceState) and e.state == "completed"]
    assert len(completed) == 5 and all(e.score is not None for e in completed if e.step == "gen")
    again, events2 = run_campaign(tmp_path, resolved)
    assert again.exit_code == 0
    assert not [e for e in events2 if isinstance(e, SliceState) and e.state in ("running", "resumed")]
    assert [e.state for e in events2 if e.type == "step_state"] == ["skipped", "skipped"]
    st = campaign_status(tmp_path / "c")
    assert st["complete"] and st["rows_done"] == 18 and st["jobs_completed"] == 5
    assert verify_campaign(tmp_path / "c").ok()


def test_failed_step_says_which_why_and_how_to_resume_then_resumes_at_first_missing_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = resolved_for(two_step_recipe(), benchmarks={"t1": 8})
    monkeypatch.setenv("SELFTEST_FAIL_AT", "3")
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 1
    line = result.failed[0]
    assert "step gen slice tiny-a/42/t1 failed: exit code 4" in line
    assert "failing at row 3" in line and "run the same command again to resume" in line
    assert campaign_status(tmp_path / "c")["slices"][0]["done"] == 3
    assert not verify_campaign(tmp_path / "c").ok()
    monkeypatch.delenv("SELFTEST_FAIL_AT")
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0
    resumed = [e for e in events if isinstance(e, SliceState) and e.state == "resumed"]
    assert resumed and resumed[0].done == 3 and "resuming at row 3" in resumed[0].message
    clean, _ = run_campaign(tmp_path, resolved, name="clean")
    assert clean.exit_code == 0
    assert content_of(tmp_path / "c") == content_of(tmp_path / "clean")


def test_a_worker_that_dies_mid_phase_still_reports_its_last_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts held back by the worker's progress coalescing (an interval no run reaches) are
    written when it exits, so the job records the rows it really did."""
    monkeypatch.setenv("TRACE_TUI_PROGRESS_INTERVAL_S", "3600")
    monkeypatch.setenv("SELFTEST_FAIL_AT", "7")
    result, events = run_campaign(tmp_path, resolved_for(two_step_recipe(), benchmarks={"t1": 20}))
    assert result.exit_code == 1
    assert [e.done for e in events if isinstance(e, Progress)] == [0, 7]
    assert campaign_status(tmp_path / "c")["slices"][0]["done"] == 7


def test_changed_pinned_input_invalidates_only_affected_slices(tmp_path: Path) -> None:
    first = resolved_for(two_step_recipe(), benchmarks={"t1": 4, "t2": 4})
    assert run_campaign(tmp_path, first)[0].exit_code == 0
    changed = resolved_for(two_step_recipe(), benchmarks={"t1": 4, "t2": 6})  # t2's dataset entry changed
    result, events = run_campaign(tmp_path, changed, redo=True)
    assert result.exit_code == 0
    inv = [e for e in events if isinstance(e, SliceState) and e.state == "invalidated"]
    assert {(e.step, e.benchmark) for e in inv} == {("gen", "t2"), ("agg", None)}
    assert "benchmark.rows: 4 -> 6" in next(e.message for e in inv if e.step == "gen")
    ran = {(e.step, e.benchmark) for e in events if isinstance(e, SliceState) and e.state == "running"}
    assert ran == {("gen", "t2"), ("agg", None)}  # t1 was not recomputed
    st = campaign_status(tmp_path / "c")
    assert st["complete"] and st["rows_total"] == 10
    assert verify_campaign(tmp_path / "c").ok()


def test_malformed_worker_output_never_crashes_the_runner(tmp_path: Path) -> None:
    resolved = resolved_for(make_recipe([selftest_step("noisy", "noisy", per_slice=False, image=None)]))
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0
    texts = [e.message for e in events if isinstance(e, Log) and e.level == "output"]
    assert "plain text from a library" in texts and '{"not json' in texts
    log = (tmp_path / "c/logs/noisy/_step.log").read_text()
    assert "plain text from a library" in log


def test_cancel_from_another_thread_saves_state_and_returns_130(tmp_path: Path) -> None:
    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", "--delay", "0.05", image=None)]),
                            benchmarks={"t1": 400})
    events: list = []
    with Campaign(tmp_path / "c") as c:
        runner = Runner(resolved, c, LocalRuntime(), store=tmp_path / "store")

        def watch(ev) -> None:
            events.append(ev)
            if isinstance(ev, Progress) and ev.done == 5:
                threading.Thread(target=runner.cancel).start()

        result = runner.run(watch)
    assert result.exit_code == 130 and "resume" in result.message
    st = campaign_status(tmp_path / "c")
    assert not st["complete"] and st["slices"][0]["state"] == "cancelled" and 5 <= st["slices"][0]["done"] < 400


def test_a_stopped_host_worker_cleans_up_before_it_exits(tmp_path: Path) -> None:
    """The local runtime stops a worker with SIGTERM to its process group; the worker treats it as Ctrl-C, so
    its temporary files go (Python's default for SIGTERM ended it on the spot, leaving them behind)."""
    result, held, left = stop_a_worker_holding_scratch(tmp_path, LocalRuntime(), image=None)
    assert result.exit_code == 130 and held and left == []


def test_torn_event_log_line_is_cut_on_reopen(tmp_path: Path) -> None:
    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", image=None)]))
    assert run_campaign(tmp_path, resolved)[0].exit_code == 0
    log = tmp_path / "c/events.jsonl"
    with open(log, "a") as fh:
        fh.write('{"type":"progress","pha')  # as a kill -9 mid-write leaves it
    assert run_campaign(tmp_path, resolved)[0].exit_code == 0
    assert all(json.loads(line) for line in log.read_text().splitlines())


def test_status_reads_only(tmp_path: Path) -> None:
    resolved = resolved_for(two_step_recipe())
    assert run_campaign(tmp_path, resolved)[0].exit_code == 0
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "c").rglob("*")}
    out = subprocess.run([*TRACE_TUI, "status", "--campaign", str(tmp_path / "c"), "--json",
                          "--fail-if-incomplete"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["complete"] is True and data["slices"][0]["score"] is not None
    assert {"model", "seed", "benchmark", "phase", "done", "total", "score", "rate", "eta_s"} <= set(data["slices"][0])
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "c").rglob("*")}
    assert before == after


def test_verify_finds_tampering_missing_slices_and_wrong_scores(tmp_path: Path) -> None:
    resolved = resolved_for(two_step_recipe(), seeds=[42, 43])
    assert run_campaign(tmp_path, resolved)[0].exit_code == 0
    c = tmp_path / "c"
    assert verify_campaign(c).ok()
    rows = c / "outputs/gen/tiny-a/42/t1/rows.jsonl"
    original = rows.read_bytes()
    # a row flipped: the output differs from its receipt, and the recomputed score differs
    flipped = [json.loads(x) for x in original.splitlines()]
    flipped[0]["correct"] = not flipped[0]["correct"]
    rows.write_bytes(b"".join((json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n").encode()
                              for r in flipped))
    res = verify_campaign(c)
    assert {(x.id, x.status) for x in res.failed} == {("output", "failed"), ("score", "failed")}
    rows.write_bytes(original)
    # a receipt edited by hand
    receipt = c / "receipts/gen/tiny-a/43/t1.json"
    data = json.loads(receipt.read_text())
    data["content"]["score"] = 99.0
    receipt.write_text(json.dumps(data))
    assert any(x.id == "receipt" for x in verify_campaign(c).failed)


def test_a_score_that_does_not_recompute_fails(tmp_path: Path, monkeypatch) -> None:
    """verify asks the step kind's worker (the registry's fixed table) to recompute; a different value fails."""
    import dataclasses

    from trace_tui.workers import registry

    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", image=None)]))
    assert run_campaign(tmp_path, resolved)[0].exit_code == 0
    assert verify_campaign(tmp_path / "c").ok()
    name = "trace_tui.stages.selftest"
    monkeypatch.setitem(registry.BY_NAME, name, dataclasses.replace(registry.BY_NAME[name],
                                                                    recompute=lambda campaign, content: -1.0))
    res = verify_campaign(tmp_path / "c")
    assert [x.id for x in res.failed] == ["score"]
    assert res.failed[0].actual == -1.0 and "does not recompute" in res.failed[0].message


def test_published_values_and_verdict_rules(trace_release_dir: Path) -> None:
    pub = load_published(trace_release_dir)
    assert sum(1 for k in pub if k[2] != "trace-validation") == 576
    assert sum(1 for k in pub if k[2] == "trace-validation") == 8
    value, tol = pub[("trace-qwen2.5-vl-3b", None, "trace-validation")]
    assert value == 41.05 and tol == pytest.approx(1.96 * (0.4105 * 0.5895 / 2000) ** 0.5 * 100)
    assert compare("score", "trace-qwen2.5-vl-3b", 42, "trace-validation", value + tol * 0.9, pub).verdict == "within"
    assert compare("score", "trace-qwen2.5-vl-3b", 42, "trace-validation", value + tol * 1.1, pub).verdict == "outside"
    v, t = pub[("qwen2.5-vl-3b-base", 42, "chartqapro")]
    assert t >= 1.0
    assert compare("score", "qwen2.5-vl-3b-base", 42, "chartqapro", v + t - 1e-6, pub).verdict == "within"


# ---------------------------------------------------------------- the command line


def write_recipe(path: Path, step_run: list[str], *, rows: int = 6, image: str | None = None) -> Path:
    stage = f"stage: infer\n    image: {image}" if image else "stage: host"
    path.write_text(f"""name: enginetest
title: engine test
purpose: exercise the engine
canonical: false
selection: {{suite: demo, seeds: all, benchmarks: all}}
local_models:
  - {{id: tiny-a, label: A, store_entry: "local:model/tiny-a"}}
demo_tasks:
  - {{key: t1, rows: {rows}}}
steps:
  - id: gen
    title: rows
    {stage}
    per_slice: true
    run: {json.dumps(step_run)}
""")
    return path


def cli(*args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*TRACE_TUI, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, **(env or {})})


def test_cli_headless_run_status_verify_and_exit_codes(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.yaml", ["trace_tui.stages.selftest", "rows"])
    home = str(tmp_path / "home")
    out = cli("--home", home, "--recipe", str(recipe), "--yes", "--runtime", "local")
    assert out.returncode == 0, out.stderr
    assert "campaign complete" in out.stdout and "completed (6/6 rows" in out.stdout
    campaign = next((tmp_path / "home/campaigns").iterdir())
    assert campaign.name.startswith("enginetest-")
    for name in ("campaign.json", "recipe.json", "state.sqlite", "events.jsonl", "runner.log"):
        assert (campaign / name).is_file(), name
    assert cli("status", "--campaign", str(campaign), "--fail-if-incomplete").returncode == 0
    watch = cli("status", "--campaign", str(campaign), "--watch", "0.2", "--json")
    assert watch.returncode == 0 and json.loads(watch.stdout)["complete"] is True  # complete: one look, then done
    assert cli("status", "--campaign", str(campaign), "--watch", "0").returncode == 2
    assert cli("verify", "--campaign", str(campaign)).returncode == 0
    js = cli("--home", home, "--recipe", str(recipe), "--yes", "--runtime", "local", "--log-format", "json")
    kinds = [json.loads(x)["type"] for x in js.stdout.splitlines() if x.startswith("{")]
    assert kinds[0] == "run_state" and "step_state" in kinds
    # usage errors: exit 2, one line
    bad = cli("--recipe", str(tmp_path / "missing.yaml"), "--yes")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert cli("status", "--campaign", str(tmp_path / "nope")).returncode == 2
    # a failing step: exit 1 and the resume hint
    fail = write_recipe(tmp_path / "f.yaml", ["trace_tui.stages.selftest", "fail"])
    out = cli("--home", home, "--recipe", str(fail), "--yes", "--runtime", "local")
    assert out.returncode == 1 and "exit code 3" in out.stdout and "run the same command again" in out.stdout
    st = cli("status", "--campaign", next(p for p in (tmp_path / "home/campaigns").iterdir() if p != campaign)
             .as_posix(), "--fail-if-incomplete")
    assert st.returncode == 1


def test_requirements_exit_3_when_docker_is_unreachable(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.yaml", ["trace_tui.stages.selftest", "rows"], image="infer")
    out = cli("--home", str(tmp_path / "home"), "--recipe", str(recipe), "--yes", "--runtime", "docker",
              env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    assert out.returncode == 3, out.stderr
    assert "Docker engine is not reachable" in out.stderr and "--runtime local" in out.stderr
    assert not (tmp_path / "home/campaigns").exists()  # nothing was started or written


def test_whole_step_job_tracks_resumes_and_invalidates_per_slice(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """One container works through the slice matrix (as the release evaluator does)."""
    recipe = make_recipe([selftest_step("gen", "matrix", per_slice=False, image=None),
                          selftest_step("agg", "whoami", per_slice=False, image=None)])
    recipe = recipe.model_copy(update={"steps": [recipe.steps[0].model_copy(update={"stage": "infer"}),
                                                 recipe.steps[1]]})
    first = resolved_for(recipe, seeds=[42, 43], benchmarks={"t1": 5, "t2": 4})
    monkeypatch.setenv("SELFTEST_FAIL_AT", "2")  # dies in the first slice
    result, _ = run_campaign(tmp_path, first)
    assert result.exit_code == 1
    st = campaign_status(tmp_path / "c")
    assert len(st["slices"]) == 4 and st["slices"][0]["done"] == 2
    monkeypatch.delenv("SELFTEST_FAIL_AT")
    result, events = run_campaign(tmp_path, first)
    assert result.exit_code == 0, result.message
    done = [e for e in events if isinstance(e, SliceState) and e.state == "completed" and e.model]
    assert len(done) == 4 and all(e.score is not None for e in done)
    st = campaign_status(tmp_path / "c")
    assert st["complete"] and st["slices_completed"] == 4 and all(x["score"] is not None for x in st["slices"])
    res = verify_campaign(tmp_path / "c")
    assert res.ok() and sum(1 for x in res.checks if x.id == "score" and x.status == "passed") == 4
    # t2 changes: only its two slices are redone (and the step after, which reads them all)
    changed = resolved_for(recipe, seeds=[42, 43], benchmarks={"t1": 5, "t2": 6})
    result, events = run_campaign(tmp_path, changed, redo=True)
    assert result.exit_code == 0
    inv = {(e.step, e.benchmark) for e in events if isinstance(e, SliceState) and e.state == "invalidated"}
    assert inv == {("gen", "t2"), ("agg", None)}
    started = {(e.model, e.seed, e.benchmark, e.done) for e in events
               if isinstance(e, SliceState) and e.state in ("running", "resumed") and e.model}
    assert started == {("tiny-a", 42, "t1", 5), ("tiny-a", 43, "t1", 5), ("tiny-a", 42, "t2", 0),
                       ("tiny-a", 43, "t2", 0)}
    clean, _ = run_campaign(tmp_path, changed, name="clean")
    assert clean.exit_code == 0
    assert content_of(tmp_path / "c") == content_of(tmp_path / "clean")
    assert verify_campaign(tmp_path / "c").ok()


def test_a_whole_step_job_exiting_0_with_short_slices_fails_and_a_rerun_resumes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that exits 0 is not a finished step: each slice must reach its planned rows (as the release
    evaluator's generate step: 3 of 1,948 rows was reported "completed")."""
    recipe = make_recipe([selftest_step("gen", "matrix", per_slice=False, image=None)])
    recipe = recipe.model_copy(update={"steps": [recipe.steps[0].model_copy(update={"stage": "infer"})]})
    resolved = resolved_for(recipe, seeds=[42, 43], benchmarks={"t1": 5, "t2": 4})
    monkeypatch.setenv("SELFTEST_STOP_AT", "4")  # t1 (5 rows) stops one short; t2 (4 rows) finishes
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 1
    assert "2 of 4 slices short of their planned rows" in result.message
    assert "tiny-a/42/t1 (4/5)" in result.message and "tiny-a/43/t1 (4/5)" in result.message
    assert "t2" not in result.message.split("short of their planned rows")[1].split(";")[0]
    st = campaign_status(tmp_path / "c")
    assert not st["complete"] and {(x["benchmark"], x["state"]) for x in st["slices"]} == {
        ("t1", "failed"), ("t2", "completed")}
    monkeypatch.delenv("SELFTEST_STOP_AT")
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0, result.message
    # the one worker goes over the matrix again; every slice picks up where it stopped, none from row 0
    started = {(e.seed, e.benchmark, e.state, e.done) for e in events if isinstance(e, SliceState) and e.model
               and e.state in ("running", "resumed")}
    assert started == {(s, b, "resumed", 4) for s in (42, 43) for b in ("t1", "t2")}
    st = campaign_status(tmp_path / "c")
    assert st["complete"] and st["slices_completed"] == 4


def test_slices_are_spread_over_gpu_groups(tmp_path: Path) -> None:
    """GPU ids are only labels here (local runtime: CUDA_VISIBLE_DEVICES); the scheduling is real."""
    step = selftest_step("gen", "whoami", image="infer", gpus=1)
    resolved = resolved_for(make_recipe([step]), seeds=[1, 2, 3, 4], benchmarks={"t1": 1, "t2": 1})
    dealt = {s.id: (0 if s.seed <= 2 else 1) for s in resolved.slices}
    result, events = run_campaign(tmp_path, resolved, gpu_groups=[[2], [5]], slice_groups=dealt)
    assert result.exit_code == 0, result.message
    seen: dict[str, set] = {}
    for job in (tmp_path / "c/jobs/gen").rglob("job.json"):
        spec = json.loads(job.read_text())
        who = json.loads((tmp_path / "c" / spec["output_dir"] / "whoami.json").read_text())
        assert spec["gpus"] == [0] and who["gpus_env"] == str(spec["host_gpus"][0])
        seen.setdefault(who["gpus_env"], set()).add(spec["slice"]["seed"])
    assert set(seen) == {"2", "5"} and len(seen["2"] | seen["5"]) == 4


def test_status_from_another_process_while_a_run_goes_on(tmp_path: Path) -> None:
    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", "--delay", "0.02", image=None)]),
                            benchmarks={"t1": 400})
    with Campaign(tmp_path / "c") as c:
        runner = Runner(resolved, c, LocalRuntime(), store=tmp_path / "store")
        seen: list = []
        t = threading.Thread(target=lambda: seen.append(runner.run()))
        t.start()
        try:
            deadline = time.monotonic() + 60
            data: dict = {}
            while time.monotonic() < deadline:
                out = subprocess.run([*TRACE_TUI, "status", "--campaign", str(tmp_path / "c"), "--json"],
                                     capture_output=True, text=True, timeout=60)
                if out.returncode == 0:
                    data = json.loads(out.stdout)
                    x = data["slices"][0] if data.get("slices") else {}
                    if x.get("rate") and x.get("done", 0) > 0:
                        break
                time.sleep(0.3)
            assert data["running"] is True and data["complete"] is False
            x = data["slices"][0]
            assert x["state"] == "running" and x["phase"] == "generate" and 0 < x["done"] < 400
            assert x["rate"] > 0 and x["eta_s"] > 0
            inc = subprocess.run([*TRACE_TUI, "status", "--campaign", str(tmp_path / "c"), "--fail-if-incomplete"],
                                 capture_output=True, text=True, timeout=60)
            assert inc.returncode == 1 and "rows/s" in inc.stdout
        finally:
            runner.cancel()
            t.join(timeout=60)
    assert seen and seen[0].exit_code == 130


def test_verify_checks_release_pins(tmp_path: Path) -> None:
    """A campaign whose recorded model revision differs from the release lock fails the pin check."""
    from trace_tui.recipe.schema import ResolvedRecipe, SliceKey
    from trace_tui.release import release_lock

    pin = release_lock().models[0]
    recipe = make_recipe([selftest_step("gen", "rows", image=None)])
    base = resolved_for(recipe)

    def with_model(model) -> ResolvedRecipe:
        return rederived(base.model_copy(update={"models": [model],
                                                "slices": [SliceKey(model=pin.id, seed=42, benchmark="t1")]}))

    assert run_campaign(tmp_path, with_model(pin))[0].exit_code == 0
    res = verify_campaign(tmp_path / "c")
    assert res.ok() and any(x.id == "pin" and x.status == "passed" for x in res.checks)
    moved = pin.model_copy(update={"revision": "0" * 40})
    assert run_campaign(tmp_path, with_model(moved), name="moved")[0].exit_code == 0
    bad = [x for x in verify_campaign(tmp_path / "moved").failed]
    assert [x.id for x in bad] == ["pin"] and bad[0].expected == pin.ref

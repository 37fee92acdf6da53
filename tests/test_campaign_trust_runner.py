"""A campaign handed over runs nothing, writes nowhere else, and launders no tampered row: the runner's side.

Real runs of the selftest, generate and extract workers on the local runtime, real links,
real batch scripts run by bash; no fakes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _plant_trace_tui(folder: Path, marker: Path) -> None:
    """A trace_tui/ package in FOLDER that leaves MARKER when imported."""
    pkg = folder / "trace_tui"
    pkg.mkdir(parents=True)
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    (pkg / "__init__.py").write_text(payload)
    (pkg / "__main__.py").write_text(payload)


def test_slurm_scripts_never_import_a_trace_tui_folder_from_where_they_were_submitted(tmp_path: Path) -> None:
    """A batch job starts in the submission folder; `python3 -m trace_tui` there imported a trace_tui/
    planted in it. The generated merge script, run by bash from such a folder, runs the installed one."""
    camp = tmp_path / "c"
    done = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path / "home"), "--recipe", "demo",
                           "--scheduler", "slurm", "--dry-run", "--campaign", str(camp)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    submit = tmp_path / "submitted-from"
    marker = tmp_path / "planted-code-ran"
    _plant_trace_tui(submit, marker)
    env = {**os.environ, "SLURM_JOB_ID": "7", "PYTHONPATH": ""}
    run = subprocess.run(["bash", str(camp / "slurm" / "merge.sbatch")], cwd=submit, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert not marker.exists(), "a trace_tui/ in the submission folder ran in the batch job"
    # the installed trace-tui ran: the merge refuses the unstarted shards in one line
    assert "has not started" in run.stderr + run.stdout, run.stderr


# -- 1. nothing a campaign file says chooses what runs --------------------------------------------------


def _backends(home: Path, campaign: Path | None = None):
    from trace_tui.service.requests import RunOptions, RunRequest
    from trace_tui.tui.backends import default_backends

    options = RunOptions(home=str(home), runtime="local", campaign=str(campaign) if campaign else None)
    return default_backends(RunRequest(options=options))


def _eval_preview_campaign(tmp_path: Path) -> Path:
    from trace_tui.cli import main

    home = tmp_path / "home"
    campaign = tmp_path / "c"
    assert main(["--recipe", "eval-preview", "--runtime", "local", "--yes", "--home", str(home),
                 "--campaign", str(campaign)]) == 0
    return campaign


def _add_step(campaign: Path, step: dict, *, rehash: bool) -> None:
    """A step added to the campaign's recipe.json (its configuration hash redone, as a careful attacker would)."""
    import json
    from types import SimpleNamespace as NS

    from trace_tui.common.digest import sha256_json
    from trace_tui.recipe.schema import BenchmarkRef, config_data

    data = json.loads((campaign / "recipe.json").read_text())
    data["recipe"]["steps"].append(step)
    if rehash:  # from the raw data: the schema would refuse the step before any hash is computed
        recipe = NS(**{**data["recipe"], "steps": [NS(**{"image": None, "env": {}, "per_slice": False, **s})
                                                   for s in data["recipe"]["steps"]]})
        data["config_sha256"] = sha256_json(config_data(
            recipe, data["suite"], data["suite_sha256"], [NS(**m, ref=f"{m['repo_id']}@{m['revision']}") for m in data["models"]], data["seeds"],
            [BenchmarkRef(**b) for b in data["benchmarks"]], data["settings"], data["training"],
            data["store_entries"]))
    (campaign / "recipe.json").write_text(json.dumps(data))


def _resume_in_the_tui(home: Path, campaign: Path) -> Exception | None:
    """What `r` on the TUI's run screen does for a campaign opened from disk: open it, build its runner, run."""
    backends = _backends(home, campaign)
    try:
        opened = backends.open_campaign(campaign)
        backends.runner_factory(opened.resolved, campaign).run(lambda _e: None)
    except Exception as exc:  # noqa: BLE001 - the refusal is what the test looks at
        return exc
    return None


def test_a_host_step_added_to_recipe_json_never_runs_on_a_tui_resume(tmp_path: Path, capsys) -> None:
    """The issue's attack: a host step whose run is `timeit -s "..."` added to recipe.json ran as the user on `r`."""
    campaign = _eval_preview_campaign(tmp_path)
    marker = tmp_path / "campaign-code-ran"
    original = (campaign / "recipe.json").read_bytes()
    for rehash in (False, True):
        (campaign / "recipe.json").write_bytes(original)
        _add_step(campaign, {"id": "evil", "title": "x", "stage": "host",
                             "run": ["timeit", "-s", f"open({str(marker)!r}, 'w').write('ran')", "pass"]},
                  rehash=rehash)
        refused = _resume_in_the_tui(tmp_path / "home", campaign)
        assert not marker.exists(), "a step recipe.json named ran"
        line = refused.line() if hasattr(refused, "line") else str(refused)
        assert "timeit" in line and str(campaign / "recipe.json") in line and "\n" not in line, line


def test_a_step_of_trace_tuis_own_workers_added_to_recipe_json_is_refused_in_one_line(tmp_path: Path) -> None:
    """Even a step that names a worker of ours is not run when the shipped recipe has no such step:
    the resume takes the shipped recipe, and refuses a campaign whose recorded recipe is another."""
    from trace_tui.errors import UsageError

    campaign = _eval_preview_campaign(tmp_path)
    _add_step(campaign, {"id": "extra", "title": "x", "stage": "host", "run": ["trace_tui.stages.selftest", "whoami"]},
              rehash=True)
    refused = _resume_in_the_tui(tmp_path / "home", campaign)
    assert isinstance(refused, UsageError), refused
    line = refused.line()
    assert "\n" not in line and str(campaign / "recipe.json") in line and "step 'extra'" in line
    assert not (campaign / "outputs" / "extra").exists()


def test_an_untampered_campaign_resumes_in_the_tui_with_the_shipped_recipe(tmp_path: Path) -> None:
    campaign = _eval_preview_campaign(tmp_path)
    assert _resume_in_the_tui(tmp_path / "home", campaign) is None


def test_a_run_naming_anything_but_trace_tuis_entry_points_is_refused_by_the_schema_and_at_launch(
        tmp_path: Path) -> None:
    """The recipe schema refuses the step (file:line, field); a step built past the schema (model_construct)
    is refused before anything starts, by the runner and by the local runtime."""
    from test_engine_support import make_recipe, resolved_for, selftest_step

    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.runner import Runner
    from trace_tui.errors import UsageError
    from trace_tui.recipe.catalog import parse_recipe
    from trace_tui.recipe.schema import Step
    from trace_tui.runtime.base import Launch
    from trace_tui.runtime.local import LocalRuntime

    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    recipe_text = ("name: mine\ntitle: t\npurpose: p\nsteps:\n  - id: x\n    title: x\n    stage: host\n"
                   f"    run: [timeit, -s, \"{code}\", pass]\n")
    import pytest

    with pytest.raises(UsageError, match=r"mine.yaml:\d+: .*'timeit' is not a trace-tui stage worker"):
        parse_recipe(recipe_text, source="mine.yaml")
    for run in (["timeit", "-s", code, "pass"], ["trace_tui", "bundle", "import", "/x"],
                ["trace_tui", "verify", "--log-file", str(marker)], ["trace_tui", "verify", f"--log-fi={marker}"],
                ["trace_tui", "hw", "--ho", str(tmp_path)]):
        with pytest.raises(ValueError, match="not a trace-tui stage worker|not a command a step may run|would write"):
            Step(id="x", title="x", stage="host", run=run)
    good = selftest_step("who", "whoami", per_slice=False, image=None)
    evil = Step.model_construct(**{**dict(good), "run": ["timeit", "-s", code, "pass"]})
    resolved = resolved_for(make_recipe([good]))
    resolved = resolved.model_copy(update={"recipe": resolved.recipe.model_copy(update={"steps": [evil]})})
    with Campaign(tmp_path / "c") as c, pytest.raises(UsageError, match="step who: run 'timeit'"):
        Runner(resolved, c, LocalRuntime(), store=tmp_path / "store").run(lambda _e: None)
    launch = Launch(step="who", slice="_step", module="timeit", args=["-s", code, "pass"], job_dir=tmp_path,
                    campaign=tmp_path / "c", store=tmp_path / "store", log_path=tmp_path / "log")
    with pytest.raises(ValueError, match="not started"):
        LocalRuntime().start(launch)
    assert not marker.exists()


def test_a_slurm_plan_naming_a_recipe_file_is_refused(tmp_path: Path) -> None:
    """shards.json's recipe is a shipped recipe's name; a path there would have the TUI's resubmission load
    a recipe file of the campaign's choosing."""
    import json

    import pytest

    from trace_tui.campaign_files.shards import plan_shards
    from trace_tui.engine.cluster import read_plan
    from trace_tui.errors import TraceTuiError
    from trace_tui.recipe.catalog import resolve_recipe

    (tmp_path / "evil.yaml").write_text("name: demo\n")
    data = plan_shards(resolve_recipe("demo")).model_dump(mode="json")
    data["recipe"] = str(tmp_path / "evil.yaml")
    (tmp_path / "shards.json").write_text(json.dumps(data))
    with pytest.raises(TraceTuiError, match="shards.json"):
        read_plan(tmp_path)


# -- 3. a resume keeps only rows that prove themselves ---------------------------------------------------


def _rows(folder: Path) -> dict[int, dict]:
    import json

    return {int(f.stem): json.loads(f.read_text()) for f in sorted((folder / "rows").glob("*.json"))}


def test_a_resumed_generate_worker_redoes_a_row_whose_response_or_dataset_facts_were_edited(
        monkeypatch, tmp_path: Path, tiny_qwen25vl_dir: Path, trace_sample_dir: Path) -> None:
    """The issue's attack: a slice marked failed, one of its rows edited (response changed, its
    response_sha256 left as it was; or an answer_gt changed): the worker said "resuming at row N", kept the
    row and wrote a fresh receipt over it. Now the edited rows are generated again, the others kept."""
    import json

    from stages_support import run_worker, sample_generate_job

    from trace_tui.common.digest import sha256_file
    from trace_tui.stages import generate

    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, [0, 1, 2, 3], batch_size=4)
    run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    out = tmp_path / "outputs/generate/s"
    before = _rows(out)
    edited = dict(before[2], response="The answer is 7.")  # response_sha256 left as it was
    (out / "rows/000002.json").write_text(json.dumps(edited))
    forged = dict(before[1], answer_gt="forged")
    (out / "rows/000001.json").write_text(json.dumps(forged))
    moved = dict(before[3], index=0)  # a row copied into another index's file
    (out / "rows/000000.json").write_text(json.dumps(moved))
    receipt, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    after = _rows(out)
    assert after == before  # the edited rows generated again (seeded per row: the same), the rest kept
    first = next(e for e in events if e["type"] == "progress")
    assert first["done"] == 1  # only row 3 was kept
    for rel, digest in receipt["content"]["outputs"].items():
        assert sha256_file(tmp_path / rel) == digest


def test_a_resumed_extract_worker_redoes_an_edited_row_and_refuses_an_edited_response(
        monkeypatch, tmp_path: Path) -> None:
    """An extract row whose final/value (or copied answer_gt) was edited is extracted again on resume, not
    kept; a generate row whose response no longer matches its response_sha256 is refused in one line."""
    import json

    import pytest
    from stages_support import run_worker
    from test_stages_extract import extract_job, write_generate_rows

    from trace_tui.errors import TraceTuiError
    from trace_tui.stages import extract

    write_generate_rows(tmp_path, "outputs/generate/s")
    job = extract_job(["--no-judge"])
    run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, job)
    out = tmp_path / "outputs/extract/s"
    before = _rows(out)
    assert before[1]["final"] == "unresolved"
    (out / "rows/000001.json").write_text(json.dumps(dict(before[1], final="found", value=42)))
    (out / "rows/000000.json").write_text(json.dumps(dict(before[0], answer_gt=41)))
    receipt, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, job)
    assert _rows(out) == before
    assert receipt["content"]["counts"]["found"] == 1
    gen = tmp_path / "outputs/generate/s/rows/000003.json"
    row = json.loads(gen.read_text())
    gen.write_text(json.dumps(dict(row, response='{"answer": "C"}')))
    with pytest.raises(TraceTuiError, match="000003.json: its response does not match its response_sha256"):
        run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, job)


# -- 2. the runner and the workers never write through a link planted in a campaign --------------------


def _selftest_campaign(tmp_path: Path):
    from test_engine_support import make_recipe, resolved_for, selftest_step

    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.runner import Runner
    from trace_tui.runtime.local import LocalRuntime

    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", image=None)]), benchmarks={"t1": 3, "t2": 3})

    def run(campaign: Path):
        with Campaign(campaign) as c:
            return Runner(resolved, c, LocalRuntime(), store=tmp_path / "store").run(lambda _e: None)

    return resolved, run


def _outside(tmp_path: Path) -> dict[str, bytes]:
    return {p.relative_to(tmp_path / "outside").as_posix(): p.read_bytes()
            for p in sorted((tmp_path / "outside").rglob("*")) if p.is_file()}


def test_the_runner_refuses_a_lock_state_events_or_log_linked_out_of_the_campaign(tmp_path: Path) -> None:
    """The issue's attacks: `.lock` linked to a file outside (a resume replaced its content), `state.sqlite`
    linked to another SQLite file (the runner added its tables to it; a dangling link made one outside),
    `events.jsonl` linked out (lines appended outside). Each is refused in one line naming the path, and
    nothing outside changes."""
    import sqlite3

    import pytest

    from trace_tui.errors import UsageError

    _, run = _selftest_campaign(tmp_path)
    campaign = tmp_path / "c"
    assert run(campaign).exit_code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine\n")
    other = sqlite3.connect(outside / "other.sqlite")
    other.execute("CREATE TABLE mine(x)")
    other.commit()
    other.close()
    before = _outside(tmp_path)
    for name, target in ((".lock", outside / "precious.txt"), ("state.sqlite", outside / "other.sqlite"),
                         ("state.sqlite", outside / "made-by-a-dangling-link.sqlite"),
                         ("events.jsonl", outside / "precious.txt")):
        kept = campaign / f"{name}.kept"
        (campaign / name).rename(kept)
        (campaign / name).symlink_to(target)
        with pytest.raises(UsageError) as refused:
            run(campaign)
        line = refused.value.line()
        assert str(campaign / name) in line and "is a link" in line and "\n" not in line, line
        assert _outside(tmp_path) == before, name
        (campaign / name).unlink()
        kept.rename(campaign / name)
    assert not (outside / "made-by-a-dangling-link.sqlite").exists()
    assert run(campaign).exit_code == 0  # and with the links gone it resumes as before


def test_a_headless_run_refuses_a_runner_log_linked_out(tmp_path: Path) -> None:
    from trace_tui.cli import main

    home, campaign = tmp_path / "home", tmp_path / "c"
    args = ["--recipe", "eval-preview", "--runtime", "local", "--yes", "--home", str(home), "--campaign", str(campaign)]
    assert main(args) == 0
    outside = tmp_path / "outside.log"
    outside.write_text("mine\n")
    (campaign / "runner.log").unlink()
    (campaign / "runner.log").symlink_to(outside)
    proc = subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 2 and "runner.log: is a link" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    assert outside.read_text() == "mine\n"


def test_a_job_whose_output_folder_is_linked_out_fails_and_writes_nothing_there(tmp_path: Path) -> None:
    _, run = _selftest_campaign(tmp_path)
    campaign = tmp_path / "c"
    outside = tmp_path / "outside"
    outside.mkdir()
    (campaign / "outputs").mkdir(parents=True)
    (campaign / "outputs" / "gen").symlink_to(outside)
    result = run(campaign)
    assert result.exit_code == 1
    assert all("outputs/gen: is a link" in line and "\n" not in line for line in result.failed), result.failed
    assert _outside(tmp_path) == {}
    # deeper: a link planted inside a finished job's folder, the job then marked failed for a rerun
    (campaign / "outputs" / "gen").unlink()
    assert run(campaign).exit_code == 0
    import sqlite3

    folder = next(p.parent for p in (campaign / "outputs" / "gen").rglob("*") if p.is_file())
    (folder / "planted").symlink_to(outside)
    db = sqlite3.connect(campaign / "state.sqlite")
    db.execute("UPDATE jobs SET state='failed'")
    db.commit()
    db.close()
    result = run(campaign)
    assert result.exit_code == 1 and any(f"{folder / 'planted'}: is a link" in line for line in result.failed)
    assert _outside(tmp_path) == {}


def test_a_generate_worker_never_writes_its_rows_into_a_rows_folder_linked_out(
        monkeypatch, tmp_path: Path, tiny_qwen25vl_dir: Path, trace_sample_dir: Path) -> None:
    """The issue's attack: a generate `rows/` folder linked out: the worker wrote its rows there, the new
    receipt listed none of them. Now the worker refuses in one line, and the runner's receipt refuses a link
    found among a job's outputs."""
    import pytest
    from stages_support import run_worker, sample_generate_job

    from trace_tui.engine.receipts import outputs_record
    from trace_tui.errors import TraceTuiError
    from trace_tui.stages import generate

    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "outputs/generate/s"
    out.mkdir(parents=True)
    (out / "rows").symlink_to(outside)
    job = sample_generate_job(tiny_qwen25vl_dir, trace_sample_dir, [0, 1], batch_size=2)
    with pytest.raises(TraceTuiError, match=r"outputs/generate/s/rows: is a link"):
        run_worker(monkeypatch, tmp_path, tmp_path / "store", generate.run, job)
    assert _outside(tmp_path) == {}
    with pytest.raises(Exception, match="rows: is a link"):
        outputs_record(tmp_path, "outputs/generate/s")


def test_slurm_scripts_never_go_through_a_link_planted_in_the_campaign(tmp_path: Path) -> None:
    """A Slurm campaign's slurm/logs linked out (Slurm would append every job's log there) is refused in one
    line; a batch script's name linked to a file outside is replaced, the file left as it was."""
    camp = tmp_path / "c"
    base = [sys.executable, "-m", "trace_tui", "--home", str(tmp_path / "home"), "--recipe", "demo",
            "--scheduler", "slurm", "--dry-run", "--campaign", str(camp)]
    assert subprocess.run(base, capture_output=True, text=True, timeout=120, check=False).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("mine\n")
    (camp / "slurm" / "merge.sbatch").unlink()
    (camp / "slurm" / "merge.sbatch").symlink_to(outside / "precious")
    assert subprocess.run(base, capture_output=True, text=True, timeout=120, check=False).returncode == 0
    assert (outside / "precious").read_text() == "mine\n" and not (camp / "slurm" / "merge.sbatch").is_symlink()
    (camp / "slurm" / "logs").rename(tmp_path / "old-logs")
    (camp / "slurm" / "logs").symlink_to(outside)
    proc = subprocess.run(base, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "slurm/logs: is a link" in proc.stderr and "Traceback" not in proc.stderr

"""Shards and Slurm batch scripts: the pure planner, the script text, merge/status/verify over shard directories.

No Slurm here (tests/test_cluster_slurm.py runs a real one-node cluster); these are the
pure parts and the file-level merge, over the real recipes and the real release lock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.campaign_files.shards import coverage_problems, plan_shards, shard_arguments
from trace_tui.errors import UsageError
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.runtime import slurm

REPO = Path(__file__).resolve().parent.parent


def test_full_splits_into_one_shard_per_model_and_seed():
    resolved = resolve_recipe("full")
    plan = plan_shards(resolved)
    assert plan.shard_by == "model-seed"
    assert len(plan.shards) == len(resolved.models) * len(resolved.seeds) == 24
    assert all(len(s.slices) == 24 for s in plan.shards)  # each a whole trace_eval_v1 run of one model and seed
    assert len({s.id for s in plan.shards}) == 24
    assert [s.index for s in plan.shards] == list(range(24))
    assert sum(s.rows_total for s in plan.shards) == resolved.rows_total
    assert coverage_problems(plan) == []


def test_validation_splits_per_model_and_demo_per_seed():
    val = resolve_recipe("validation")
    plan = plan_shards(val)
    assert plan.shard_by == "model" and len(plan.shards) == len(val.models)
    demo = resolve_recipe("demo", seeds=[42, 43, 7])
    plan = plan_shards(demo)
    assert plan.shard_by == "seed" and [s.id for s in plan.shards] == ["seed-42", "seed-43", "seed-7"]
    assert coverage_problems(plan) == []


def test_shard_by_chooses_and_the_shard_command_narrows_the_same_recipe():
    # `full` takes no benchmark filter (the release evaluator runs all 24), so the narrowing is the demo's
    resolved = resolve_recipe("demo", seeds=[42, 43], benchmarks=["counting"])
    plan = plan_shards(resolved, "seed", narrowed_benchmarks=True)
    assert len(plan.shards) == 2
    args = shard_arguments(plan, plan.shards[0])
    assert args[:2] == ["--recipe", "demo"] and "--benchmarks" in args
    # the narrowing resolves to exactly the shard's slices
    shard = resolve_recipe("demo", models=plan.shards[0].models, seeds=plan.shards[0].seeds,
                           benchmarks=plan.benchmarks)
    assert [x.id for x in shard.slices] == plan.shards[0].slices


def test_a_broken_plan_is_caught():
    plan = plan_shards(resolve_recipe("demo", seeds=[1, 2]))
    bad = plan.model_copy(update={"shards": [plan.shards[0], plan.shards[0]]})
    problems = coverage_problems(bad)
    assert any("in shards" in p for p in problems) and any("in no shard" in p for p in problems)


def test_recipes_without_slices_and_unknown_splits_are_refused():
    with pytest.raises(UsageError, match="no model x seed x benchmark slices"):
        plan_shards(resolve_recipe("smoke-3b"))
    with pytest.raises(UsageError, match="--shard-by 'benchmark'"):
        plan_shards(resolve_recipe("demo"), "benchmark")


def test_the_demo_takes_any_seed():
    resolved = resolve_recipe("demo", seeds=[43, 1234])
    assert resolved.seeds == [43, 1234] and {x.seed for x in resolved.slices} == {43, 1234}
    assert resolve_recipe("demo").seeds == [42]
    assert resolve_recipe("demo", seeds=[43]).run_tag != resolve_recipe("demo").run_tag


def test_array_spec_ranges_lists_and_throttle():
    assert slurm.array_spec(list(range(24)), 8) == "0-23%8"
    assert slurm.array_spec([5, 1, 7], None) == "1,5,7"
    assert slurm.array_spec([3], 2) == "3%2"
    with pytest.raises(ValueError):
        slurm.array_spec([], 2)


def test_array_script_carries_the_sites_choices():
    opts = slurm.BatchOptions(partition="gpu", account="lab", gpus_per_node=8, time="2-00:00:00")
    text = slurm.array_script(name="full-x", log="/c/slurm/logs/shard-%A_%a.log", opts=opts, array="0-23%4",
                              commands={0: ["python", "-m", "trace_tui", "--seeds", "42"], 1: ["echo", "a b"]},
                              record="/c/slurm/tasks/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.json")
    for line in ("#SBATCH --array=0-23%4", "#SBATCH --gres=gpu:8", "#SBATCH --partition=gpu",
                 "#SBATCH --account=lab", "#SBATCH --time=2-00:00:00",
                 "#SBATCH --output=/c/slurm/logs/shard-%A_%a.log"):
        assert line in text.splitlines()
    assert "  1) cmd=(echo 'a b') ;;" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_scripts_run_their_shard_and_record_the_exit(tmp_path):
    """The array script under bash with Slurm's variables set (the real sbatch runs it in test_cluster_slurm)."""
    text = slurm.array_script(name="t", log="x", opts=slurm.BatchOptions(), array="0-1",
                              commands={0: ["sh", "-c", "echo zero > $OUT"], 1: ["sh", "-c", "exit 3"]},
                              record=str(tmp_path) + "/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.json")
    script = tmp_path / "a.sbatch"
    script.write_text(text)
    for task, rc in ((0, 0), (1, 3)):
        env = {"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_JOB_ID": "77",
               "SLURM_JOB_ID": str(78 + task), "OUT": str(tmp_path / "out")}
        assert subprocess.run(["bash", str(script)], env=env, capture_output=True).returncode == rc
        rec = json.loads((tmp_path / f"77_{task}.json").read_text())
        assert rec["exit_code"] == rc and rec["task"] == str(task)
    assert (tmp_path / "out").read_text() == "zero\n"


def test_without_sbatch_the_run_says_so_with_exit_3(tmp_path):
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                           "--scheduler", "slurm", "--yes"], capture_output=True, text=True, env=env)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "`sbatch` is not on PATH" in proc.stderr


def test_bad_slurm_options_are_usage_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                           "--scheduler", "slurm", "--max-parallel", "0", "--dry-run"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--max-parallel 0" in proc.stderr and "Traceback" not in proc.stderr


def test_dry_run_writes_the_scripts_and_prints_the_chain(tmp_path):
    camp = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "full",
                           "--scheduler", "slurm", "--dry-run", "--campaign", str(camp), "--gpus-per-node", "8",
                           "--max-parallel", "4", "--partition", "gpu", "--offline", "--runtime", "docker"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "24 shards by model-seed" in proc.stdout and "--dependency=afterok:$ARRAY" in proc.stdout
    text = (camp / "slurm" / "shards.sbatch").read_text()
    assert "#SBATCH --array=0-23%4" in text and "#SBATCH --gres=gpu:8" in text
    assert text.count(" cmd=(") == 24
    first = next(line for line in text.splitlines() if line.startswith("  0) cmd=("))
    assert f"--seeds 42 --campaign {camp}/shards/" in first
    assert "--offline" in first and "--runtime docker" in first and "--yes" in first  # the node's run, headless
    merge = (camp / "slurm" / "merge.sbatch").read_text()
    assert " merge --campaign " in merge and " report --campaign " in merge  # full has summary tables
    assert " verify --campaign " in (camp / "slurm" / "verify.sbatch").read_text()
    assert json.loads((camp / "shards.json").read_text())["shard_by"] == "model-seed"
    # the same command with another split is refused: the directory holds this plan
    again = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "full",
                            "--scheduler", "slurm", "--dry-run", "--campaign", str(camp), "--shard-by", "model"],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "split differently" in again.stderr


def test_merge_status_and_verify_over_the_24_shard_layout(tmp_path):
    sys.path.insert(0, str(REPO))
    try:
        from bench.bench_cluster import synthetic_full_layout
    finally:
        sys.path.remove(str(REPO))
    from trace_tui.engine.cluster import merge_campaign
    from trace_tui.engine.cluster_status import cluster_status
    from trace_tui.errors import CheckFailed

    parent = tmp_path / "full"
    resolved, plan = synthetic_full_layout(parent)
    st = cluster_status(parent)
    assert st["shards_total"] == 24 and st["shards_completed"] == 24 and not st["merged"]
    assert all(s["slurm_state"] == "NOT SUBMITTED" for s in st["shards"])
    assert st["slices_total"] == 2 * 576  # generate and score slices of every shard
    merged = merge_campaign(parent)
    assert sum(len(s["slices"]) for s in merged["shards"]) == 576
    assert cluster_status(parent)["complete"]
    # one shard loses its state: the merge refuses, naming it
    (parent / plan.shards[3].dir / "state.sqlite").unlink()
    with pytest.raises(CheckFailed, match=f"shard {plan.shards[3].id} has not started"):
        merge_campaign(parent)


def test_a_single_node_run_refuses_a_slurm_campaign_directory(tmp_path):
    camp = tmp_path / "c"
    subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo", "--scheduler",
                    "slurm", "--dry-run", "--campaign", str(camp)], check=True, capture_output=True)
    from trace_tui.engine.cluster import check_not_sharded

    with pytest.raises(UsageError, match="is a Slurm campaign"):
        check_not_sharded(camp)


def test_the_slurm_backend_sits_below_the_engine():
    """Layering: runtime modules (Slurm's beside Docker's and the local one) never import the engine or the TUI."""
    import ast

    for path in sorted((REPO / "src" / "trace_tui" / "runtime").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in names if m.startswith(("trace_tui.engine", "trace_tui.tui"))], path.name
    src = (REPO / "src" / "trace_tui" / "runtime" / "slurm.py").read_text()
    assert {"sbatch", "squeue", "sacct", "scancel"} <= set(src.replace('"', " ").split())


def test_the_merge_waits_for_named_array_tasks_or_nothing():
    from trace_tui.engine.cluster import afterok_dependency as _dependency

    assert _dependency("12", [1, 3], ["9_0"]) == "afterok:12_1:12_3:9_0"
    assert _dependency(None, [], []) is None  # every shard complete: the merge runs at once


def test_report_reads_a_slurm_campaign_through_its_shards(tmp_path):
    """report --campaign on a sharded `full`: refused until merged, then each shard's score file is read (the
    synthetic shards have none, so the report names the first shard's missing scores.json)."""
    sys.path.insert(0, str(REPO))
    try:
        from bench.bench_cluster import synthetic_full_layout
    finally:
        sys.path.remove(str(REPO))
    from trace_tui.engine.cluster import merge_campaign

    parent = tmp_path / "full"
    _, plan = synthetic_full_layout(parent)
    args = [sys.executable, "-m", "trace_tui", "report", "--campaign", str(parent)]
    before = subprocess.run(args, capture_output=True, text=True)
    assert before.returncode == 1 and "not merged yet" in before.stderr
    merge_campaign(parent)
    after = subprocess.run(args, capture_output=True, text=True)
    assert after.returncode == 1 and f"shards/{plan.shards[0].id}/outputs/score/_step/scores.json: absent" \
        in after.stderr, after.stderr
    # a shard folder that is a link to a campaign elsewhere is not read, and a damaged merge is no merge
    first = parent / "shards" / plan.shards[0].id
    first.rename(tmp_path / "elsewhere")
    first.symlink_to(tmp_path / "elsewhere")
    linked = subprocess.run(args, capture_output=True, text=True)
    assert linked.returncode == 1 and f"{first}" in linked.stderr and "link" in linked.stderr, linked.stderr
    (parent / "merged.json").write_text("[1,2")
    damaged = subprocess.run(args, capture_output=True, text=True)
    assert damaged.returncode == 1 and "merged.json" in damaged.stderr and len(damaged.stderr.splitlines()) == 1


def test_a_campaign_path_that_is_a_file_is_bad_input(tmp_path):
    """What a shard's node sees when its directory is broken: one line, exit 2 (it was an internal error)."""
    where = tmp_path / "file"
    where.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo", "--yes",
                           "--runtime", "local", "--campaign", str(where)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith(f"trace-tui: error: --campaign {where}: is a file, not a campaign directory")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_shard_whose_database_has_no_tables_yet_is_starting(tmp_path):
    """The moment a node's runner has created state.sqlite but not its tables (was an internal error)."""
    import sqlite3

    from trace_tui.engine.cluster import prepare_parent
    from trace_tui.engine.cluster_status import cluster_status

    resolved = resolve_recipe("demo", seeds=[1, 2])
    plan = plan_shards(resolved)
    prepare_parent(tmp_path, resolved, plan)
    (tmp_path / plan.shards[0].dir).mkdir(parents=True)
    sqlite3.connect(tmp_path / plan.shards[0].dir / "state.sqlite").close()
    st = cluster_status(tmp_path)
    assert [s["campaign_state"] for s in st["shards"]] == ["starting", "not started"]


def test_array_tasks_slurm_lists_under_the_array_record_take_its_state() -> None:
    """squeue lists an array cancelled before its tasks were split as one record, `5` (or `5_[0-1%2]` while
    pending): the shards read UNKNOWN forever (seen on the real cluster: `5|CANCELLED|None|`, the TUI waiting
    for CANCELLED). A task listed on its own keeps its own state."""
    from trace_tui.engine.cluster_status import fill_array_tasks

    states = {"5": slurm.TaskState(job_id="5", state="CANCELLED"), "6": slurm.TaskState(job_id="6", state="CANCELLED")}
    fill_array_tasks(states, "5", ["0", "1"])
    assert {k: (v.job_id, v.state) for k, v in states.items() if k.startswith("5_")} == \
        {"5_0": ("5_0", "CANCELLED"), "5_1": ("5_1", "CANCELLED")}
    states = {"8_0": slurm.TaskState(job_id="8_0", state="RUNNING", node="vm"),
              "8_[1-3%2]": slurm.TaskState(job_id="8_[1-3%2]", state="PENDING", reason="JobArrayTaskLimit")}
    fill_array_tasks(states, "8", ["0", "1", "2", "3"])
    assert states["8_0"].state == "RUNNING"
    assert [states[f"8_{i}"].state for i in (1, 2, 3)] == ["PENDING"] * 3
    assert states["8_3"].reason == "JobArrayTaskLimit"
    fill_array_tasks(states, "9", ["0"])  # an array Slurm no longer lists: nothing is made up
    assert "9_0" not in states


@pytest.mark.parametrize(("flag", "value"), [
    ("--time", "1:00\necho INJECTED"), ("--time", "abc"), ("--time", "1-2-3"), ("--time", "10 #x"),
    ("--partition", "gpu\necho INJECTED"), ("--partition", "a b"), ("--account", "a b;echo x"),
    ("--account", "x\ry"), ("--account", "$(id)")])
def test_slurm_options_that_are_not_slurm_values_never_reach_a_script(tmp_path, flag, value):
    """Slurm's values were pasted into `#SBATCH` lines unchecked: a newline started a line of shell."""
    camp = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                           "--scheduler", "slurm", "--dry-run", "--campaign", str(camp), flag, value],
                          capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"trace-tui: error: {flag} {value!r}"[:60]), lines[0]
    assert not (camp / "slurm").exists()


def test_slurm_values_slurm_takes_are_written(tmp_path):
    camp = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                           "--scheduler", "slurm", "--dry-run", "--campaign", str(camp), "--time", "2-00:00:00",
                           "--partition", "gpu,debug", "--account", "my_lab.x-1"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = (camp / "slurm" / "shards.sbatch").read_text()
    assert "#SBATCH --time=2-00:00:00\n" in text and "#SBATCH --partition=gpu,debug\n" in text
    assert "#SBATCH --account=my_lab.x-1\n" in text
    for minutes in ("30", "90:00", "12:00:00", "1-12", "UNLIMITED"):
        from trace_tui.service.submit import SLURM_TIME

        assert SLURM_TIME.fullmatch(minutes), minutes


def test_a_campaign_path_a_batch_script_cannot_hold_is_refused(tmp_path):
    """The campaign's path goes into `#SBATCH --output=` and a double-quoted shell word."""
    for name in ('a"b', "a$b", "a\nb", "a b", "a%b"):
        camp = tmp_path / name
        proc = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                               "--scheduler", "slurm", "--dry-run", "--campaign", str(camp)],
                              capture_output=True, text=True)
        assert proc.returncode == 2 and "--campaign" in proc.stderr and "Slurm batch script" in proc.stderr, \
            (name, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and not camp.exists()

"""A campaign across nodes on a REAL one-node Slurm cluster (Debian's slurm-wlm and munge, started by
.ci/slurm-cluster for this module and stopped afterwards). trace-tui talks to it only through sbatch,
squeue, sacct and scancel; nothing about Slurm is faked.

The demo is narrowed to one task group (--benchmarks counting) so that the three demo computations
here (one node without Slurm, and the Slurm campaign with a cancelled and resumed shard) stay within
a few minutes each on two CPUs; each shard is still the whole demo path (prepare, train, generate,
extract, score, verify) of its seed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SEEDS = ["42", "43"]
NARROW = ["--benchmarks", "counting"]

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("slurmctld") is None or os.geteuid() != 0:
        pytest.skip("needs root and slurm-wlm + munge (`.ci/run` installs them)")
    where = tmp_path_factory.mktemp("slurm")
    up = subprocess.run([str(REPO / ".ci" / "slurm-cluster"), "up", str(where)], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    conf = up.stdout.strip().splitlines()[-1]
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    yield conf
    subprocess.run([str(REPO / ".ci" / "slurm-cluster"), "down", str(where)], check=False)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def trace_tui(*args: str, timeout: float = 1500, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACE_TUI_SLURM_POLL_S": "2"}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, **kw)


def demo_args(home: Path, campaign: Path) -> list[str]:
    return ["--home", str(home), "--recipe", "demo", "--seeds", *SEEDS, *NARROW, "--runtime", "local",
            "--campaign", str(campaign)]


def slice_scores(status: dict) -> dict[tuple[str, str], float]:
    return {(x["step"], x["slice"]): x["score"] for x in status["slices"] if x["score"] is not None}


def squeue_state(job: str) -> str:
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", job.split("_")[0], "-o", "%i %T"],
                         capture_output=True, text=True).stdout
    return dict(line.split() for line in out.splitlines()).get(job, "")


@pytest.fixture(scope="module")
def single_node(tmp_path_factory):
    """The same configuration on one node without Slurm (it also fills the store the shards share)."""
    home = tmp_path_factory.mktemp("home")
    camp = home / "single"
    proc = trace_tui(*demo_args(home, camp), "--yes")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    status = json.loads(trace_tui("status", "--campaign", str(camp), "--json").stdout)
    assert status["complete"]
    return home, slice_scores(status)


@pytest.fixture(scope="module")
def slurm_campaign(cluster, single_node):
    """The demo as a 2-task array; one running task is scancelled, then the same command resubmits only it."""
    home, _ = single_node
    camp = home / "sharded"
    first = trace_tui(*demo_args(home, camp), "--scheduler", "slurm", "--yes", "--no-wait")
    assert first.returncode == 0, first.stderr
    subs = json.loads((camp / "slurm" / "submissions.json").read_text())
    array = subs[0]["array_job"]
    assert subs[0]["tasks"] == {"0": "seed-42", "1": "seed-43"}
    victim = f"{array}_1"
    deadline = time.time() + 600
    while time.time() < deadline:  # running, and its campaign has begun
        if squeue_state(victim) == "RUNNING" and (camp / "shards" / "seed-43" / "state.sqlite").is_file():
            break
        time.sleep(1)
    else:
        pytest.fail(f"array task {victim} never ran")
    time.sleep(5)
    subprocess.run(["scancel", victim], check=True)
    deadline = time.time() + 120
    while squeue_state(victim) not in ("CANCELLED", "") and time.time() < deadline:
        time.sleep(1)
    cancelled = json.loads(trace_tui("status", "--campaign", str(camp), "--json").stdout)
    again = trace_tui(*demo_args(home, camp), "--scheduler", "slurm", "--yes")
    return camp, first, cancelled, again


def test_the_demo_on_slurm_matches_one_node_after_a_cancelled_task_is_resumed(slurm_campaign, single_node):
    camp, first, cancelled, again = slurm_campaign
    assert "submitted 2 of 2 shards as array job" in first.stdout
    shard43 = next(s for s in cancelled["shards"] if s["id"] == "seed-43")
    assert shard43["slurm_state"] == "CANCELLED" and not shard43["complete"]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    # only the unfinished shard went again (seed-42 either finished or was still running: never resubmitted)
    assert "submitted 1 of 2 shards" in again.stdout
    subs = json.loads((camp / "slurm" / "submissions.json").read_text())
    assert len(subs) == 2 and subs[1]["tasks"] == {"1": "seed-43"}
    assert "merge job" in again.stdout and "merged and verified" in again.stdout
    # the merge ran after the array through the dependency, then the verification after it
    for kind in ("merge_job", "verify_job"):
        assert json.loads((camp / "slurm" / "tasks" / f"{subs[1][kind]}.json").read_text())["exit_code"] == 0
    merge_rec = json.loads((camp / "slurm" / "tasks" / f"{subs[1]['merge_job']}.json").read_text())
    task_rec = json.loads((camp / "slurm" / "tasks" / f"{subs[1]['array_job']}_1.json").read_text())
    assert merge_rec["finished_at"] >= task_rec["finished_at"]
    verify = trace_tui("verify", "--campaign", str(camp), "--json")
    assert verify.returncode == 0, verify.stdout[-3000:]
    res = json.loads(verify.stdout)
    assert res["ok"] and res["counts"].get("failed", 0) == 0 and res["counts"]["passed"] > 0
    # every shard's checks, and the parent's own recipe.json (its configuration hash recomputed)
    assert {c["subject"].split(":")[0] for c in res["checks"]} == {"shards/seed-42", "shards/seed-43", "recipe.json"}
    status = json.loads(trace_tui("status", "--campaign", str(camp), "--json").stdout)
    assert status["complete"] and all(s["slurm_state"] == "COMPLETED" for s in status["shards"])
    home, baseline = single_node
    assert slice_scores(status) == baseline and len(baseline) == 2  # the score step's slices, both seeds
    # the same per-row results byte for byte: every per-slice receipt's outputs and score equal one node's
    single = receipts(home / "single")
    sharded = {}
    for shard in ("seed-42", "seed-43"):
        sharded.update(receipts(camp / "shards" / shard))
    assert set(single) == set(sharded) and len(single) == 6  # generate, extract, score x 2 seeds
    assert single == sharded


def receipts(campaign: Path) -> dict[str, dict]:
    out = {}
    for step in ("generate", "extract", "score"):
        for path in sorted((campaign / "receipts" / step).rglob("*.json")):
            content = json.loads(path.read_text())["content"]
            # the worker's own STEP.receipt.json records times and pid (circumstance): every other output counts
            outputs = {k: v for k, v in content["outputs"].items() if not k.endswith(".receipt.json")}
            out[f"{step}/{path.relative_to(campaign / 'receipts' / step)}"] = {
                "outputs": outputs, "score": content.get("score"), "rows": content.get("rows")}
    return out


def test_a_failing_shard_is_shown_failed_and_the_merge_does_not_run(slurm_campaign, tmp_path):
    camp = slurm_campaign[0]
    home = camp.parent
    broken = home / "broken"
    shutil.copytree(camp, broken, ignore=shutil.ignore_patterns("merged.json", "submissions.json", "tasks", "logs"))
    shutil.rmtree(broken / "shards" / "seed-43")
    (broken / "shards" / "seed-43").write_text("not a campaign directory\n")  # the bad input
    proc = trace_tui(*demo_args(home, broken), "--scheduler", "slurm", "--yes", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "submitted 1 of 2 shards" in proc.stdout
    assert "failed: shard seed-43: Slurm FAILED (exit 2" in proc.stdout, proc.stdout
    assert "the merge did not run" in proc.stdout
    assert not (broken / "merged.json").exists()
    st = json.loads(trace_tui("status", "--campaign", str(broken), "--json").stdout)
    s43 = next(s for s in st["shards"] if s["id"] == "seed-43")
    assert s43["slurm_state"] == "FAILED" and s43["exit_code"].startswith("2")
    log = Path(s43["log"]).read_text()
    assert "not a campaign directory" in log and "internal error" not in log and "Traceback" not in log
    merge = next(f for f in st["finishing"] if f["kind"] == "merge")
    assert merge["slurm_state"] == "CANCELLED"  # never ran: cancelled once its dependency could not be met
    assert not Path(merge["log"]).exists()
    human = trace_tui("status", "--campaign", str(broken))
    assert "FAILED" in human.stdout and s43["log"] in human.stdout
    # the TUI, opening the same campaign, shows the same: failed with Slurm's exit code and the log path
    tui = asyncio.run(reopened_rows(home, broken))
    assert tui["seed-43"][1] == f"FAILED (exit {s43['exit_code']})" and tui["seed-43"][7] == s43["log"]
    assert tui["seed-42"][3] == "complete" and tui["merge"][1] == "CANCELLED"  # seed-42 was not resubmitted
    verify = trace_tui("verify", "--campaign", str(broken))
    assert verify.returncode == 1 and "never merged" in verify.stdout


def test_dry_run_scripts_are_accepted_by_sbatch_test_only(cluster, tmp_path):
    camp = tmp_path / "c"
    proc = trace_tui("--home", str(tmp_path), "--recipe", "demo", "--seeds", "1", "2", "3", "--scheduler", "slurm",
                     "--dry-run", "--max-parallel", "2", "--time", "30", "--campaign", str(camp))
    assert proc.returncode == 0, proc.stderr
    assert not (camp / "slurm" / "submissions.json").exists()
    for kind in ("shards", "merge", "verify"):
        test = subprocess.run(["sbatch", "--test-only", str(camp / "slurm" / f"{kind}.sbatch")],
                              capture_output=True, text=True)
        assert test.returncode == 0 and "to start at" in test.stderr, test.stderr
    out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout
    assert camp.name not in out and "demo-" not in out  # nothing was submitted


def test_ctrl_c_cancels_the_campaigns_jobs_and_leaves_it_resumable(cluster, tmp_path):
    """Ctrl-C while following the jobs, without a terminal to ask: scancel every queued or running job, exit 130.

    Started as `trace-tui ... &` in a script starts it, with SIGINT inherited ignored (a shell without job
    control does that): a SIGINT sent to it must still stop it. Python installs no handler of its own then,
    so the watch went on to the end and exited 0 (the test also passed or failed with how pytest was started)."""
    import signal

    camp = tmp_path / "c"
    env = {**os.environ, "TRACE_TUI_SLURM_POLL_S": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "demo",
                             "--seeds", "5", "6", *NARROW, "--runtime", "local", "--campaign", str(camp),
                             "--scheduler", "slurm", "--yes"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not (camp / "shards" / "seed-5" / "state.sqlite").is_file():
            time.sleep(0.5)
        time.sleep(3)  # the watch has seen the tasks running
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert "cancelled" in out and "run the same command again to resume" in out
    sub = json.loads((camp / "slurm" / "submissions.json").read_text())[0]
    deadline = time.time() + 120
    while time.time() < deadline:
        states = {squeue_state(f"{sub['array_job']}_{i}") for i in (0, 1)} | \
                 {squeue_state(str(sub[k])) for k in ("merge_job", "verify_job")}
        if states == {"CANCELLED"}:
            break
        time.sleep(1)
    assert states == {"CANCELLED"}
    st = json.loads(trace_tui("status", "--campaign", str(camp), "--json").stdout)
    assert not st["complete"] and {s["slurm_state"] for s in st["shards"]} == {"CANCELLED"}


# --------------------------------------------------------------------------- the TUI on the same cluster
# The real app (build_app from the command line's own arguments, default backends: the real hardware
# probe, recipes and cluster module) driven by Pilot; Slurm is the real one-node cluster above.

TUI_SIZE = (200, 40)


def tui_args(*argv: str) -> dict:
    """What the command line hands the TUI for ARGV: build_app's request and Slurm options."""
    from trace_tui.cli import build_parser
    from trace_tui.commands.launch import run_request, slurm_options

    args = build_parser().parse_args(list(argv))
    return {"request": run_request(args), "slurm": slurm_options(args)}


async def wait_until(pilot, predicate, timeout: float = 120.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            said = [str(w.render()) for w in pilot.app.screen.query("#cluster-status")]
            shards = [shard_rows(pilot.app.screen)] if pilot.app.screen.query("#cluster-table") else []
            raise AssertionError(f"timed out waiting for {what} (screens: "
                                 f"{[type(s).__name__ for s in pilot.app.screen_stack]}; status line {said}; "
                                 f"shards {shards}; squeue {slurm_queue_now()!r})")
        await pilot.pause(0.1)


def slurm_queue_now() -> str:
    """Every job slurmctld holds, as squeue lists them: what a failed wait saw."""
    return subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r|%N"], capture_output=True,
                          text=True).stdout


def shard_rows(screen) -> dict[str, list[str]]:
    table = screen.query_one("#cluster-table")
    rows = [table.row_text(i) for i in range(table.row_count)]
    return {r[0]: r for r in rows}


def status_text(app) -> str:
    return str(app.screen.query_one("#cluster-status").render())


async def test_tui_chooses_slurm_submits_follows_and_cancels_then_reopens_and_resumes(cluster, tmp_path):
    """`trace-tui --recipe demo --seeds 7 8 --scheduler slurm` in a terminal: the run screen's choice (w) goes
    into the submission, the shards show their Slurm state and node live, c asks and scancels; reopening
    the campaign (`trace-tui --campaign DIR`) shows it and r resubmits the shards that are not complete."""
    import socket

    from trace_tui.tui.app import build_app
    from trace_tui.tui.dialogs.confirm import ConfirmScreen
    from trace_tui.tui.dialogs.steps import StepsScreen
    from trace_tui.tui.screens.cluster import ClusterScreen
    from trace_tui.tui.screens.preview import PreviewScreen
    from trace_tui.tui.screens.scheduler import SchedulerScreen

    home, camp = tmp_path / "home", tmp_path / "c"
    node = socket.gethostname().split(".")[0]
    app = build_app(**tui_args("--home", str(home), "--recipe", "demo", "--seeds", "7", "8", *NARROW, "--runtime",
                             "local", "--campaign", str(camp), "--scheduler", "slurm", "--max-parallel", "2"))
    async with app.run_test(size=TUI_SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen) and app.screen.resolved is not None,
                         what="the preview")
        preview = str(app.screen.query_one("#preview-text").render())
        assert "runs on: Slurm (--max-parallel 2)" in preview
        await pilot.press("w")  # where it runs: the command line's choice, changed in the form
        await wait_until(pilot, lambda: isinstance(app.screen, SchedulerScreen), what="the scheduler form")
        form = app.screen
        assert form.query_one("#scheduler-slurm").value and form.query_one("#scheduler-max_parallel").value == "2"
        form.query_one("#scheduler-gpus_per_node").value = "-1"
        await pilot.click("#ok")
        assert "--gpus-per-node -1: give 0 or more" in str(form.query_one("#scheduler-error").render())
        form.query_one("#scheduler-gpus_per_node").value = ""
        form.query_one("#scheduler-time").value = "20"
        # enter in a field uses the form as the button does; a click could land where the button was
        # before the error line moved it, on a loaded machine
        form.query_one("#scheduler-time").focus()
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="back to the preview")
        assert app.scheduler.time == "20" and app.scheduler.max_parallel == 2
        assert "runs on: Slurm (--time 20 --max-parallel 2)" in str(app.screen.query_one("#preview-text").render())
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, StepsScreen), what="the steps")
        await pilot.press("a")  # confirm all
        await wait_until(pilot, lambda: isinstance(app.screen, ClusterScreen), what="the Slurm run screen")
        screen = app.screen
        await wait_until(pilot, lambda: "submitted 2 of 2 shards as array job" in status_text(app),
                         what="the submission")
        sub = json.loads((camp / "slurm" / "submissions.json").read_text())[0]
        assert sub["options"]["time"] == "20" and sub["options"]["max_parallel"] == 2
        assert "#SBATCH --time=20" in (camp / "slurm" / "shards.sbatch").read_text()
        assert sub["tasks"] == {"0": "seed-7", "1": "seed-8"}
        array = sub["array_job"]
        # live: running on the node, with its log, once the shard's campaign has begun
        await wait_until(pilot, lambda: shard_rows(screen).get("seed-7", [""] * 8)[1] == "RUNNING"
                         and (camp / "shards" / "seed-7" / "state.sqlite").is_file(), timeout=300,
                         what="seed-7 running")
        await pilot.pause(3)
        rows = shard_rows(screen)
        assert rows["seed-7"][2] == f"on {node}"
        assert rows["seed-7"][7] == str(camp / "slurm" / "logs" / f"shard-{array}_0.log")
        # the same reading as `trace-tui status --campaign DIR --json`
        def cli_seed7() -> dict:
            return next(s for s in json.loads(trace_tui("status", "--campaign", str(camp), "--json").stdout)["shards"]
                        if s["id"] == "seed-7")

        cli = cli_seed7()
        assert cli["slurm_state"] == "RUNNING" and cli["log"] == rows["seed-7"][7]
        # The shard plans more rows as it goes (24, then 26): the screen, polled every 2 s, must come to
        # show the total status reads, not one read at another moment.
        for _ in range(30):
            if shard_rows(screen)["seed-7"][4].endswith(f"/{cli['rows_total']:,}"):
                break
            await pilot.pause(1.0)
            cli = cli_seed7()
        assert shard_rows(screen)["seed-7"][4].endswith(f"/{cli['rows_total']:,}") and cli["rows_total"] > 0
        assert rows["merge"][1] == "PENDING" and rows["merge"][2] == "Dependency"
        assert "Slurm · 0/2 shards complete (by seed)" in str(screen.query_one("#cluster-summary").render())
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: "cancelled" in status_text(app) and "Slurm job(s)" in status_text(app),
                         what="the cancel")
        await wait_until(pilot, lambda: {shard_rows(screen)[s][1] for s in ("seed-7", "seed-8")} == {"CANCELLED"},
                         what="both shards cancelled")
        assert {squeue_state(f"{array}_{i}") for i in (0, 1)} == {"CANCELLED"}
        assert shard_rows(screen)["merge"][1] == "CANCELLED"
        assert "r: resume" in status_text(app)
    assert not (camp / "merged.json").exists()

    # reopen: the sharded parent in the TUI, then r resubmits the two unfinished shards (and nothing else)
    app = build_app(**tui_args("--home", str(home), "--campaign", str(camp)))
    async with app.run_test(size=TUI_SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.status is not None,
                         what="the reopened campaign")
        screen = app.screen
        assert {shard_rows(screen)[s][1] for s in ("seed-7", "seed-8")} == {"CANCELLED"}
        assert screen.choice.time == "20" and screen.run_options["runtime"] == "local"
        await pilot.press("r")
        await wait_until(pilot, lambda: "submitted 2 of 2 shards as array job" in status_text(app), what="resume")
        subs = json.loads((camp / "slurm" / "submissions.json").read_text())
        assert len(subs) == 2 and subs[1]["tasks"] == {"0": "seed-7", "1": "seed-8"}
        assert subs[1]["options"]["time"] == "20" and subs[1]["options"]["runtime"] == "local"
        await wait_until(pilot, lambda: shard_rows(screen)["seed-8"][1] in ("PENDING", "RUNNING"),
                         what="the resubmitted shard queued")
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: {shard_rows(screen)[s][1] for s in ("seed-7", "seed-8")} == {"CANCELLED"},
                         what="cancelled again")


async def reopened_rows(home: Path, camp: Path) -> dict[str, list[str]]:
    """`trace-tui --campaign DIR` for a sharded parent: the shard table the TUI shows, once read."""
    from trace_tui.tui.app import build_app
    from trace_tui.tui.screens.cluster import ClusterScreen

    app = build_app(**tui_args("--home", str(home), "--campaign", str(camp)))
    async with app.run_test(size=TUI_SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.status is not None,
                         what="the reopened campaign")
        assert not app.screen.check_action("cancel", ())  # nothing queued or running: c has nothing to cancel
        return shard_rows(app.screen)


async def test_tui_reopens_the_merged_campaign_resume_submits_nothing_and_verify_opens(slurm_campaign):
    """The campaign of the first test, complete and merged, opened in the TUI: every shard COMPLETED and
    done, r resubmits nothing (every shard is complete), v verifies it as `verify --campaign` does."""
    from trace_tui.tui.app import build_app
    from trace_tui.tui.screens.cluster import ClusterScreen
    from trace_tui.tui.screens.verify import VerifyScreen

    camp = slurm_campaign[0]
    before = (camp / "slurm" / "submissions.json").read_text()
    app = build_app(**tui_args("--home", str(camp.parent), "--campaign", str(camp)))
    async with app.run_test(size=TUI_SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.status is not None,
                         what="the reopened campaign")
        screen = app.screen
        rows = shard_rows(screen)
        for shard in ("seed-42", "seed-43"):
            assert rows[shard][1] == "COMPLETED" and rows[shard][3] == "complete" and rows[shard][6] == "done"
        assert rows["merge"][1] == rows["verify"][1] == "COMPLETED"
        assert "Slurm · 2/2 shards complete (by seed)" in str(screen.query_one("#cluster-summary").render())
        assert "merged" in str(screen.query_one("#cluster-summary").render())
        await pilot.press("r")
        await wait_until(pilot, lambda: "all 2 shards are complete and merged" in status_text(app),
                         what="the resume answer")
        assert (camp / "slurm" / "submissions.json").read_text() == before  # nothing submitted
        await pilot.press("v")
        await wait_until(pilot, lambda: isinstance(app.screen, VerifyScreen), what="the verify screen")
        await wait_until(pilot, lambda: str(app.screen.query_one("#verify-summary").render()).startswith(
            ("VERIFIED", "FAILED", "Cannot")), what="verification")
        assert str(app.screen.query_one("#verify-summary").render()).startswith("VERIFIED")

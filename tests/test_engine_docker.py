"""The engine against the real Docker engine: real containers of a small test image
(tests/docker_image: the local Debian base + python3 + the trace_tui package).

CI always has a Docker engine: when it is unreachable these tests FAIL, they do not skip.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_engine_support import (
    BASE_IMAGE,
    REPO,
    TEST_IMAGE,
    build_test_image,
    content_of,
    make_recipe,
    resolved_for,
    selftest_step,
    stop_a_worker_holding_scratch,
)

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.engine.status import campaign_status
from trace_tui.runtime.base import LABEL_CAMPAIGN, LABEL_OWNER
from trace_tui.runtime.docker import DockerRuntime, container_user
from trace_tui.verify.campaign import verify_campaign

pytestmark = [pytest.mark.docker, pytest.mark.slow]
IMAGES = {"infer": TEST_IMAGE, "score": TEST_IMAGE, "train": TEST_IMAGE}


@pytest.fixture(scope="session")
def docker_image() -> str:
    import docker

    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"the Docker engine is unreachable ({exc}); CI always has one: start dockerd")
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{BASE_IMAGE} is missing: run `make base-image`")
    return build_test_image()


def labelled(campaign_id: str) -> list:
    import docker

    return docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_CAMPAIGN}={campaign_id}"})


def run_docker(tmp: Path, resolved, name: str = "c", *, runtime: DockerRuntime | None = None, **kw):
    events: list = []
    with Campaign(tmp / name) as c:
        result = Runner(resolved, c, runtime or DockerRuntime(images=IMAGES), store=tmp / "store",
                        **kw).run(events.append)
        cid = c.id
    return result, events, cid


def report(campaign: Path, step: str, name: str) -> dict:
    return json.loads((campaign / f"outputs/{step}/_step/{name}.json").read_text())


def test_success_runs_unprivileged_with_read_only_mounts_and_user_owned_files(docker_image: str,
                                                                              tmp_path: Path) -> None:
    recipe = make_recipe([selftest_step("gen", "rows"), selftest_step("who", "whoami", per_slice=False),
                          selftest_step("store", "store-write", per_slice=False)])
    result, events, cid = run_docker(tmp_path, resolved_for(recipe, seeds=[42, 43]))
    assert result.exit_code == 0, result.message
    c = tmp_path / "c"
    who = report(c, "who", "whoami")
    uid, gid = container_user()
    assert (who["uid"], who["gid"]) == (uid, gid) and who["uid"] != 0
    assert int(who["cap_eff"], 16) == 0 and who["no_new_privs"] == "1"
    assert who["job_write"] == "error 30"  # /job is mounted read-only (EROFS)
    store = report(c, "store", "store-write")
    assert store["write"] == "error" and store["errno"] == 30  # /store is read-only
    assert not (tmp_path / "store/selftest-write").exists()
    written = [p for p in (c / "outputs/gen").rglob("*") if p.is_file()]
    assert len(written) == 4  # rows.jsonl and score.json of two slices
    for p in written:
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (uid, gid), p
    assert labelled(cid) == []  # the runner removed its containers
    assert verify_campaign(c).ok()


def test_failing_step_reports_exit_code_and_last_log_lines(docker_image: str, tmp_path: Path) -> None:
    result, _, cid = run_docker(tmp_path, resolved_for(make_recipe([selftest_step("bad", "fail", per_slice=False)])))
    assert result.exit_code == 1
    line = result.failed[0]
    assert line.startswith("step bad failed: exit code 3")
    assert "something went wrong (as asked)" in line and "run the same command again to resume" in line
    assert labelled(cid) == []


def test_oom_kill_is_named(docker_image: str, tmp_path: Path) -> None:
    recipe = make_recipe([selftest_step("hog", "oom", "--mib", "1024", per_slice=False)])
    result, _, _ = run_docker(tmp_path, resolved_for(recipe), runtime=DockerRuntime(images=IMAGES, mem_limit="64m"))
    assert result.exit_code == 1
    assert "killed by the out-of-memory limit (OOM)" in result.failed[0]


def test_network_none_really_has_no_network(docker_image: str, tmp_path: Path) -> None:
    recipe = make_recipe([selftest_step("off", "network", per_slice=False),
                          selftest_step("on", "network", per_slice=False, network=True)])
    result, _, _ = run_docker(tmp_path, resolved_for(recipe))
    assert result.exit_code == 0, result.message
    off, on = report(tmp_path / "c", "off", "network"), report(tmp_path / "c", "on", "network")
    assert off["interfaces"] == ["lo"] and off["connect"].startswith("error")
    assert "eth0" in on["interfaces"]
    # --offline: no network even for a step that asks for it
    result, _, _ = run_docker(tmp_path, resolved_for(recipe), name="offline", offline=True)
    assert result.exit_code == 0
    assert report(tmp_path / "offline", "on", "network")["interfaces"] == ["lo"]


def test_requirements_are_checked_before_any_container_starts(docker_image: str, tmp_path: Path) -> None:
    from trace_tui.errors import RequirementsError

    recipe = make_recipe([selftest_step("gen", "rows")])
    runtime = DockerRuntime(images={"infer": "trace-tui/no-such-image:0"})
    with Campaign(tmp_path / "c") as c, pytest.raises(RequirementsError) as err:
        Runner(resolved_for(recipe), c, runtime, store=tmp_path / "store").run()
    assert "trace-tui/no-such-image:0 is missing" in err.value.line() and "make appliance" in err.value.line()
    assert labelled(c.id) == []
    problems = DockerRuntime(images=IMAGES).check({"infer"}, gpus=True)
    assert problems and "GPU runtime" in problems[0] and "nvidia" in problems[0].lower()


def test_stale_containers_of_a_killed_runner_are_removed_and_others_kept(docker_image: str, tmp_path: Path) -> None:
    import docker

    client = docker.from_env()
    recipe = make_recipe([selftest_step("gen", "rows")])
    with Campaign(tmp_path / "c") as c:
        cid = c.id
    stale = client.containers.run(TEST_IMAGE, ["sleep", "300"], detach=True, network_mode="none",
                                  labels={LABEL_CAMPAIGN: cid, LABEL_OWNER: "otherhost-1"})
    other = client.containers.run(TEST_IMAGE, ["sleep", "300"], detach=True, network_mode="none",
                                  labels={LABEL_CAMPAIGN: "someone-else", LABEL_OWNER: "otherhost-1"})
    try:
        result, events, _ = run_docker(tmp_path, resolved_for(recipe))
        assert result.exit_code == 0
        assert any("removed 1 container" in getattr(e, "message", "") for e in events)
        assert labelled(cid) == []
        other.reload()
        assert other.status == "running"
    finally:
        for ctr in (stale, other):
            try:
                ctr.remove(force=True)
            except docker.errors.NotFound:
                pass


RECIPE_YAML = """name: enginetest
title: engine test
purpose: exercise the engine
canonical: false
selection: {{suite: demo, seeds: all, benchmarks: all}}
local_models:
  - {{id: tiny-a, label: A, store_entry: "local:model/tiny-a"}}
demo_tasks:
  - {{key: t1, rows: {rows}}}
  - {{key: t2, rows: {rows}}}
steps:
  - id: gen
    title: rows
    stage: infer
    image: infer
    per_slice: true
    run: {run}
"""


def start_cli(recipe: Path, campaign: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "TRACE_TUI_IMAGE_INFER": TEST_IMAGE, "TRACE_TUI_HOME": str(campaign.parent / "home")}
    return subprocess.Popen([sys.executable, "-m", "trace_tui", "--recipe", str(recipe), "--yes", "--runtime",
                             "docker", "--campaign", str(campaign), *extra], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(cond, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def campaign_id(campaign: Path) -> str | None:
    try:
        return json.loads((campaign / "campaign.json").read_text())["id"]
    except (OSError, ValueError):
        return None


def test_ctrl_c_stops_containers_saves_state_and_exits_130(docker_image: str, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE_YAML.format(rows=600, run=json.dumps(["trace_tui.stages.selftest", "rows", "--delay",
                                                                   "0.05"])))
    campaign = tmp_path / "camp"
    proc = start_cli(recipe, campaign)
    try:
        wait_for(lambda: campaign_id(campaign) is not None and any(
            c.status == "running" for c in labelled(campaign_id(campaign))))
        wait_for(lambda: (campaign / "outputs/gen/tiny-a/42/t1/rows.jsonl").exists()
                 and (campaign / "outputs/gen/tiny-a/42/t1/rows.jsonl").stat().st_size > 0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "resume" in out
    assert labelled(campaign_id(campaign)) == []
    st = campaign_status(campaign)
    assert not st["complete"] and not st["running"]
    assert st["slices"][0]["state"] == "cancelled" and 0 < st["slices"][0]["done"] < 600


def test_a_stopped_container_worker_cleans_up_instead_of_being_killed(docker_image: str, tmp_path: Path) -> None:
    """`docker stop` sends SIGTERM to the worker, PID 1 of its container, and the kernel drops a signal PID 1 has
    no handler for: the stop waited out the grace period, SIGKILL followed, and the scratch directory the worker
    held in the (bind-mounted) campaign stayed. The worker now handles SIGTERM as Ctrl-C."""
    result, held, left = stop_a_worker_holding_scratch(tmp_path, DockerRuntime(images=IMAGES), image="train")
    assert result.exit_code == 130 and held and left == []


def test_kill_9_then_rerun_gives_identical_content(docker_image: str, tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE_YAML.format(rows=60, run=json.dumps(["trace_tui.stages.selftest", "rows", "--delay",
                                                                  "0.02"])))
    killed = tmp_path / "killed"
    proc = start_cli(recipe, killed)
    rows = killed / "outputs/gen/tiny-a/42/t2/rows.jsonl"  # the second slice: the first one is complete by then
    try:
        wait_for(lambda: rows.exists() and rows.stat().st_size > 200)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the killed runner's container may still be writing: the rerun removes it first
    rerun = start_cli(recipe, killed)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "removed 1 container(s) left by an earlier run" in out or "resumed" in out
    clean = tmp_path / "clean"
    fresh = start_cli(recipe, clean)
    _, err = fresh.communicate(timeout=300)
    assert fresh.returncode == 0, err
    assert content_of(killed) == content_of(clean)
    lines = rows.read_text().splitlines()
    assert [json.loads(x)["row"] for x in lines] == list(range(60))  # no lost or duplicated rows
    assert not [p for p in killed.rglob(".*.tmp")]  # no half-written file
    assert verify_campaign(killed).ok()
    assert labelled(campaign_id(killed)) == []


def test_gpu_request_without_a_gpu_runtime_is_a_clear_requirement_error(docker_image: str, tmp_path: Path) -> None:
    """The real engine receives the device request (GPU 0 by id) and refuses it: no NVIDIA runtime here."""
    from trace_tui.errors import RequirementsError
    from trace_tui.runtime.base import Launch

    with Campaign(tmp_path / "c") as c:
        job_dir = c.path / "jobs/g/_step"
        job_dir.mkdir(parents=True)
        (job_dir / "job.json").write_text('{"step": "g", "output_dir": "outputs/g/_step"}')
        launch = Launch(step="g", slice="_step", module="trace_tui.stages.selftest", args=["whoami"], job_dir=job_dir,
                        campaign=c.path, store=tmp_path / "store", log_path=c.path / "logs/g.log", image="infer",
                        gpus=[0], labels={LABEL_CAMPAIGN: c.id}, output_dir=c.path / "outputs/g/_step")
        with pytest.raises(RequirementsError) as err:
            DockerRuntime(images=IMAGES).start(launch)
        assert "cannot give GPUs" in err.value.line() and "NVIDIA Container Toolkit" in err.value.line()
        assert labelled(c.id) == []


def plant_hostile_modules(campaign: Path) -> Path:
    """A campaign holding a json.py and a trace_tui/ package that would run if the campaign were on sys.path."""
    marker = campaign.parent / "campaign-code-ran"
    campaign.mkdir(parents=True, exist_ok=True)
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    (campaign / "json.py").write_text(payload)
    (campaign / "trace_tui").mkdir(exist_ok=True)
    (campaign / "trace_tui" / "__init__.py").write_text(payload)
    return marker


def test_stage_containers_have_memory_pids_limits_and_a_read_only_root(docker_image: str, tmp_path: Path) -> None:
    """The hardening of the success test, for limits: no swap beyond the memory limit, a pids limit,
    a root filesystem the stage cannot write, a tmpfs at /tmp for scratch, and a neutral working
    directory (never the campaign) so nothing a campaign holds is importable."""
    from trace_tui.runtime.docker import PIDS_LIMIT

    recipe = make_recipe([selftest_step("who", "whoami", per_slice=False)])
    marker = plant_hostile_modules(tmp_path / "c")
    result, _, _ = run_docker(tmp_path, resolved_for(recipe), runtime=DockerRuntime(images=IMAGES, mem_limit="256m"))
    assert result.exit_code == 0, result.message
    who = report(tmp_path / "c", "who", "whoami")
    assert who["root_write"] == "error 30"  # EROFS: read-only root filesystem
    assert who["tmp_write"] == "ok"
    assert who["pids_max"] == str(PIDS_LIMIT)
    assert who["memory_max"] == str(256 << 20)
    assert who["cwd"] == "/" and "/campaign" not in who["sys_path"] and "" not in who["sys_path"]
    assert not marker.exists()
    # Without a configured limit a stage still gets one (90% of the host's memory), never none.
    result, _, _ = run_docker(tmp_path, resolved_for(recipe), name="d")
    assert result.exit_code == 0, result.message
    assert int(report(tmp_path / "d", "who", "whoami")["memory_max"]) < os.sysconf("SC_PAGE_SIZE") * os.sysconf(
        "SC_PHYS_PAGES")

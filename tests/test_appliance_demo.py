"""`make appliance` for the cpu flavour, and the demo recipe through the Docker runtime.

Real images built from the local Debian bases (Docker cannot pull here), real
containers, a real bundle round trip: export the demo bundle, remove the
images and the store, import, and run the demo again offline in a fresh
campaign with network none — the same scores as before. The infer and score
images carry vLLM 0.10.2's CPU build, and the demo's generate and extract run
on it (the real engine, no stand-in): their receipts say so, and a generate
worker killed with SIGKILL mid-slice resumes to the same rows as an
uninterrupted run with other batching.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from test_cluster_slurm import cluster  # noqa: F401 - the fixture: a one-node Slurm cluster for this module

from trace_tui import images

# The first test also builds the three cpu images (the module fixture): on a fresh machine that is the
# wheelhouse download and the vLLM stack's install, well over the suite's 10-minute default.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700)]
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The three cpu images, built the way `make appliance` builds them, under a lock of their own."""
    lock_path = tmp_path_factory.mktemp("appliance") / "images.lock.json"
    subprocess.run([sys.executable, str(ROOT / "appliance" / "lock.py"), "wheelhouse", "cpu"], check=True,
                   capture_output=True)
    lock = images.build_images("cpu", say=lambda _m: None)
    images.write_images_lock(lock, lock_path)
    return lock, lock_path


@pytest.fixture(scope="module")
def env(built, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(built[1]), "TRACE_TUI_HOME": str(home)}


def _scores(campaign: Path, env: dict[str, str]) -> dict[str, float]:
    done = _cli("status", "--campaign", str(campaign), "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {f"{s['step']}/{s['slice']}": s["score"] for s in data["slices"] if s["score"] is not None}


def test_rebuilding_with_nothing_changed_keeps_every_image_id(built):
    lock, _ = built
    again = images.build_images("cpu", say=lambda _m: None)
    assert {n: i.id for n, i in again.images.items()} == {n: i.id for n, i in lock.images.items()}
    for img in lock.images.values():
        labels = images.docker_client().images.get(img.id).labels
        assert labels["org.trace-tui.version"] and labels["org.trace-tui.lock-sha256"] == img.build_args["LOCK_SHA256"]


def _run_in(image: str, *args: str, volumes: dict[str, str] | None = None, name: str | None = None,
            env: dict[str, str] | None = None, detach: bool = False) -> subprocess.CompletedProcess[str] | subprocess.Popen:
    """A container with the production options of a stage container (read-only root, tmpfs /tmp as HOME,
    the invoking user, no capabilities, no network)."""
    cmd = ["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777",
           "--user", f"{os.getuid()}:{os.getgid()}", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "-e", "HOME=/tmp", "--workdir", "/"]
    for host, inside in (volumes or {}).items():
        cmd += ["-v", f"{host}:{inside}"]
    for k, v in (env or {}).items():
        cmd += ["-e", f"{k}={v}"]
    cmd += [*(["--name", name] if name else []), image, *args]
    if detach:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def test_cpu_infer_and_score_images_carry_vllm_0_10_2(built):
    """The acceptance line as written: `python -c "import vllm; print(vllm.__version__)"` in the image."""
    lock, _ = built
    for name in ("infer", "score"):
        done = subprocess.run(["docker", "run", "--rm", "--network", "none", lock.images[name].tag, "python", "-c",
                               "import vllm; print(vllm.__version__)"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().splitlines()[-1].startswith("0.10.2"), done.stdout
    # One environment layer for both (the same lock, base and instructions): built and stored once.
    client = images.docker_client()
    layers = {n: client.images.get(lock.images[n].id).attrs["RootFS"]["Layers"] for n in ("infer", "score")}
    shared = [a for a, b in zip(layers["infer"], layers["score"]) if a == b]
    assert len(shared) >= 2, "infer and score must share the base and the vLLM environment layers"


def test_vllm_generate_killed_mid_slice_resumes_to_the_same_rows_as_other_batching(built, tmp_path,
                                                                                   tiny_qwen25vl_dir, trace_sample_dir):
    """The generate worker in the cpu infer image, on vLLM's CPU engine (its default there): SIGKILL the
    container mid-slice (one row per batch), rerun it, and every row equals an uninterrupted run's that
    generated the whole slice in one batch: a row's sample depends on its prompt and seed alone."""
    from stages_support import responses, sample_generate_job

    lock, _ = built
    image = lock.images["infer"].tag
    rows = list(range(48))
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    os.chmod(tmp_path, 0o755)
    volumes = {str(tiny_qwen25vl_dir): "/models/tiny:ro", str(trace_sample_dir): "/sample:ro",
               str(campaign): "/campaign"}

    def job_file(out: str, batch_size: int | None) -> str:
        job = sample_generate_job(Path("/models/tiny"), Path("/sample"), rows, out=out,
                                  **({"batch_size": batch_size} if batch_size else {}))
        job["settings"]["max_tokens"] = 24
        (campaign / f"{out.replace('/', '_')}.json").write_text(json.dumps(job))
        return f"/campaign/{out.replace('/', '_')}.json"

    def worker(job: str, **kw):
        return _run_in(image, "python3", "-m", "trace_tui.stages.generate", volumes=volumes,
                       env={"TRACE_TUI_JOB": job, "TRACE_TUI_CAMPAIGN": "/campaign"}, **kw)

    killed = job_file("outputs/generate/killed", 1)
    name = f"trace-tui-test-kill-{uuid.uuid4().hex[:8]}"
    proc = worker(killed, name=name, detach=True)
    rows_dir = campaign / "outputs/generate/killed/rows"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(list(rows_dir.glob("*.json"))) < 3 and proc.poll() is None:
        time.sleep(0.05)
    subprocess.run(["docker", "kill", "--signal", "KILL", name], capture_output=True)
    log = proc.communicate(timeout=120)[0]
    partial = len(list(rows_dir.glob("*.json")))
    assert 3 <= partial < len(rows), ("the kill must land mid-slice", partial, log[-3000:])
    done = worker(killed)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [e for e in events if e["type"] == "progress"][0]["done"] >= partial  # resumed, rows kept
    whole = worker(job_file("outputs/generate/whole", None))
    assert whole.returncode == 0, (whole.stdout[-3000:], whole.stderr[-3000:])
    assert responses(campaign, "outputs/generate/killed") == responses(campaign, "outputs/generate/whole")
    for out in ("killed", "whole"):
        receipt = json.loads((campaign / f"outputs/generate/{out}/generate.receipt.json").read_text())
        assert receipt["content"]["backend"] == "vllm"
        assert receipt["circumstance"]["versions"]["vllm"].startswith("0.10.2")


# The demo twice (vLLM engines loaded per job) and a bundle of the three images (7.3 GB of shared layers
# saved, removed and loaded again): past the suite's default 600 s on this 2-core machine.
@pytest.fixture(scope="module")
def docker_demo(built, env, tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """The demo run once through Docker: (its campaign, its scores), what the other runtimes must match."""
    first = tmp_path_factory.mktemp("docker-demo") / "first"
    done = _cli("--recipe", "demo", "--yes", "--runtime", "docker", "--campaign", str(first), env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return first, _scores(first, env)


@pytest.mark.timeout(1800)
def test_demo_runs_end_to_end_in_the_images_and_survives_a_bundle_round_trip(built, env, docker_demo, tmp_path):
    lock, lock_path = built
    first, _ = docker_demo
    for check in (("verify", "--campaign", str(first)), ("status", "--campaign", str(first), "--fail-if-incomplete")):
        res = _cli(*check, env=env)
        assert res.returncode == 0, (check, res.stdout[-1500:], res.stderr[-1500:])
    scores = _scores(first, env)
    assert scores, "the demo recorded no score"
    # generate and the judge ran on vLLM's CPU build, the cpu images' default backend
    gens = sorted(first.rglob("generate.receipt.json"))
    extracts = sorted(first.rglob("extract.receipt.json"))
    assert gens and extracts
    for path in gens:
        receipt = json.loads(path.read_text())
        assert receipt["content"]["backend"] == "vllm", path
        assert receipt["circumstance"]["versions"]["vllm"].startswith("0.10.2"), path
    for path in extracts:
        receipt = json.loads(path.read_text())
        assert receipt["content"]["judge"]["backend"] == "vllm", path
        if receipt["circumstance"]["judge_calls"]:
            assert receipt["circumstance"]["versions"]["vllm"].startswith("0.10.2"), path

    bundle_dir = tmp_path / "bundle"
    assert _cli("keys", "init", env=env).returncode == 0  # a bundle's images enter a site only signed
    done = _cli("bundle", "export", str(bundle_dir), "--recipe", "demo", env=env)
    assert done.returncode == 0, done.stderr[-2000:]

    client = images.docker_client()
    for img in lock.images.values():
        client.images.remove(img.id, force=True)
    shutil.rmtree(Path(env["TRACE_TUI_HOME"]) / "store")
    site_lock = tmp_path / "site-images.lock.json"
    site_env = {**env, "TRACE_TUI_IMAGES_LOCK": str(site_lock)}
    done = _cli("bundle", "import", str(bundle_dir), env=site_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {n: i["id"] for n, i in json.loads(site_lock.read_text())["images"].items()} == \
        {n: i.id for n, i in lock.images.items()}

    second = tmp_path / "second"
    done = _cli("--recipe", "demo", "--yes", "--runtime", "docker", "--offline", "--campaign", str(second),
                env=site_env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert _scores(second, site_env) == scores


def _events_completed(campaign: Path, step: str) -> int:
    """How many of STEP's slices the campaign's event log says completed."""
    path = campaign / "events.jsonl"
    if not path.exists():
        return 0
    done = 0
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # the line being written
            continue
        done += (event.get("step") == step and event.get("type") == "slice_state" and event.get("state") == "completed")
    return done


@pytest.mark.timeout(1800)
def test_the_demo_through_rootless_podman_as_a_user_is_killed_resumes_and_matches_docker(built, docker_demo):
    """`--runtime podman` as an unprivileged user (rootless Podman, its own storage, the images loaded from a
    `docker save`): the runner is killed with SIGKILL once generate has finished a slice, the same command
    resumes the campaign to the end, it verifies, every slice's score equals the Docker run's, and the
    receipts say where each step ran. See tests/podman_support.py for how the user is made."""
    from podman_support import ROOT as CHECKOUT
    from podman_support import load_images, podman_user, remove_folder, remove_images, traversable

    lock, lock_path = built
    user = podman_user()
    ids = [img.id for img in lock.images.values()]
    load_images(user, [img.tag for img in lock.images.values()])
    work = user.folder("trace-tui-podman-")
    try:
        with traversable(CHECKOUT, Path(user.pythonpath.split(":")[1])):
            _demo_as(user, work, lock_path, docker_demo)
    finally:
        remove_folder(work)
        remove_images(user, ids)


def _demo_as(user, work: Path, lock_path: Path, docker_demo: tuple[Path, dict[str, float]],  # noqa: ANN001
             runtime: str = "podman") -> None:
    """The demo through RUNTIME as USER in WORK: killed with SIGKILL once generate has finished a slice,
    resumed by the same command, verified; its scores and its receipts' content are the Docker run's."""
    docker_campaign, docker_scores = docker_demo
    site_lock = work / "images.lock.json"
    shutil.copy(lock_path, site_lock)
    os.chmod(site_lock, 0o644)
    env = {"TRACE_TUI_IMAGES_LOCK": str(site_lock), "TRACE_TUI_HOME": str(work / "home")}
    campaign = work / "campaign"
    run = user.trace_tui("--recipe", "demo", "--yes", "--runtime", runtime, "--campaign", str(campaign), env=env)
    output = work / "first-run.log"  # a file, not a pipe nobody reads while it runs
    with open(output, "w") as out:
        first = subprocess.Popen(run, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while _events_completed(campaign, "generate") < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert first.poll() is None, f"the run ended before it could be killed: {output.read_text()[-2000:]}"
    runner = subprocess.run(["pgrep", "-u", str(user.uid), "-f", "--", f"-m trace_tui --recipe demo .*{campaign}"],
                            capture_output=True, text=True).stdout.split()
    assert runner, "the runner's process was not found"
    for pid in runner:  # the runner itself (runuser's child), not only the runuser wrapper
        os.kill(int(pid), signal.SIGKILL)
    first.wait(timeout=60)
    if runtime != "podman":  # a stage process of the killed runner must not go on writing into the campaign
        deadline = time.monotonic() + 30
        while _stage_processes(user.uid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _stage_processes(user.uid), "a stage outlived its killed runner"
    again = subprocess.run(run, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, (again.stdout[-2000:], again.stderr[-2000:])
    check = subprocess.run(user.trace_tui("verify", "--campaign", str(campaign), env=env), capture_output=True,
                           text=True, timeout=600)
    assert check.returncode == 0 and "VERIFIED" in check.stdout, (check.stdout[-1500:], check.stderr[-1500:])
    status = subprocess.run(user.trace_tui("status", "--campaign", str(campaign), "--json", env=env),
                            capture_output=True, text=True, timeout=300)
    scores = {f"{s['step']}/{s['slice']}": s["score"] for s in json.loads(status.stdout)["slices"]
              if s["score"] is not None}
    assert scores == docker_scores
    receipts = [json.loads(p.read_text()) for p in (campaign / "receipts" / "generate").rglob("*.json")]
    assert receipts and {r["circumstance"]["runtime"] for r in receipts} == {runtime}
    differences = _differences(_receipt_contents(campaign), _receipt_contents(docker_campaign))
    assert not differences, differences
    owners = {p.stat().st_uid for p in campaign.rglob("*")}
    assert owners == {user.uid}, f"files owned by {owners}: the stage writes as the user"
    if runtime == "podman":
        leftover = subprocess.run(user.command("podman", "ps", "--all", "--quiet", "--filter",
                                               "label=org.trace-tui.step"), capture_output=True, text=True)
        assert leftover.stdout.strip() == "", "the killed run's containers were not cleaned up"


def _stage_processes(uid: int) -> list[str]:
    return subprocess.run(["pgrep", "-u", str(uid), "-f", "trace_tui.stages"], capture_output=True,
                          text=True).stdout.split()


# Files a step writes about how it ran (when, where, how long), not what it computed: their hashes in a receipt's
# outputs differ from run to run on any runtime. TRL's trainer_state.json carries the step's time; TRL's model
# card (README.md beside the checkpoint) describes the run and differs under rootless Podman while the weights,
# the optimizer and the RNG state it describes are the same bytes.
RUN_RECORDS = ("receipt.json", "trainer_state.json", "train-smoke/_step/README.md")


def _receipt_contents(campaign: Path) -> dict[str, object]:
    """What every receipt says was computed, from what: each campaign receipt's content less the hashes of the
    files that record how the run went (RUN_RECORDS), and the content of each worker's own receipt (its
    circumstance, like the campaign receipt's, differs by design)."""
    out: dict[str, object] = {}
    for path in sorted((campaign / "receipts").rglob("*.json")):
        content = json.loads(path.read_text())["content"]
        content["outputs"] = {k: v for k, v in (content.get("outputs") or {}).items() if not k.endswith(RUN_RECORDS)}
        out[path.relative_to(campaign).as_posix()] = content
    for path in sorted((campaign / "outputs").rglob("*receipt.json")):
        out[path.relative_to(campaign).as_posix()] = json.loads(path.read_text()).get("content")
    return out


def _differences(ours: dict[str, object], docker: dict[str, object]) -> list[str]:
    """Each receipt field (an output file, for outputs) that differs from the Docker run's, by name."""
    out = [f"{key}: only in one run" for key in sorted(set(ours) ^ set(docker))]
    for key in sorted(set(ours) & set(docker)):
        a, b = ours[key], docker[key]
        if a == b:
            continue
        if not (isinstance(a, dict) and isinstance(b, dict)):
            out.append(f"{key}: {str(a)[:200]} != {str(b)[:200]}")
            continue
        for field in sorted(set(a) | set(b)):
            x, y = a.get(field), b.get(field)
            if field == "outputs" and isinstance(x, dict) and isinstance(y, dict):
                out += [f"{key}: output {name}" for name in sorted(set(x) | set(y)) if x.get(name) != y.get(name)]
            elif x != y:
                out.append(f"{key}: {field}: {str(x)[:200]} != {str(y)[:200]}")
    return out


@pytest.fixture(scope="module")
def charliecloud_lock(built):
    """The three stage images exported for Charliecloud by `trace-tui images export` (as root: readable by all,
    as an administrator would give them to users), recorded in a lock of their own; removed afterwards."""
    from podman_support import remove_folder

    _, lock_path = built
    out = Path(tempfile.mkdtemp(prefix="trace-tui-ch-images-", dir="/tmp"))  # a user may enter it
    os.chmod(out, 0o755)
    site_lock = out / "images.lock.json"
    shutil.copy(lock_path, site_lock)
    try:
        done = _cli("images", "export", "--runtime", "charliecloud", "--out", str(out / "images"),
                    env={**os.environ, "TRACE_TUI_IMAGES_LOCK": str(site_lock)}, timeout=1800)
        assert done.returncode == 0, done.stderr[-2000:]
        os.chmod(site_lock, 0o644)
        yield site_lock
    finally:
        remove_folder(out)


@pytest.mark.timeout(1800)
def test_the_demo_through_charliecloud_as_a_user_is_killed_resumes_and_matches_docker(docker_demo,
                                                                                       charliecloud_lock):
    """`--runtime charliecloud` as an unprivileged user, from the directory images `images export` wrote: the
    runner is killed with SIGKILL once generate has finished a slice (its stages die with it), the same
    command resumes it to the end, it verifies, and every score and receipt's content is the Docker run's."""
    from podman_support import ROOT as CHECKOUT
    from podman_support import podman_user, remove_folder, traversable

    user = podman_user()
    work = user.folder("trace-tui-charliecloud-")
    try:
        with traversable(CHECKOUT, Path(user.pythonpath.split(":")[1])):
            _demo_as(user, work, charliecloud_lock, docker_demo, runtime="charliecloud")
    finally:
        remove_folder(work)


@pytest.mark.slurm
@pytest.mark.timeout(1800)
def test_a_slurm_demo_shard_runs_through_charliecloud_and_merges(docker_demo, charliecloud_lock, cluster, tmp_path):
    """The demo's first seed as a Slurm job array on the real one-node cluster (.ci/slurm-cluster), each step of
    the shard in ch-run on the compute node (`--runtime charliecloud`, passed to the shard's command line):
    it completes, merges and verifies, its receipts say charliecloud, and its scores are the Docker run's."""
    _, docker_scores = docker_demo
    seed = sorted({key.split("/")[2] for key in docker_scores if key.startswith("score/")})[0]  # step/model/seed/..
    env = {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(charliecloud_lock), "TRACE_TUI_HOME": str(tmp_path / "home"),
           "TRACE_TUI_SLURM_POLL_S": "2"}
    campaign = tmp_path / "sharded"
    done = _cli("--recipe", "demo", "--seeds", seed, "--runtime", "charliecloud", "--scheduler", "slurm", "--yes",
                "--campaign", str(campaign), env=env, timeout=1700)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    subs = json.loads((campaign / "slurm" / "submissions.json").read_text())
    assert subs[0]["options"]["runtime"] == "charliecloud"
    status = json.loads(_cli("status", "--campaign", str(campaign), "--json", env=env).stdout)
    assert status["complete"]
    check = _cli("verify", "--campaign", str(campaign), env=env)
    assert check.returncode == 0 and "VERIFIED" in check.stdout, check.stdout[-1500:]
    receipts = [json.loads(p.read_text()) for p in campaign.rglob("receipts/generate/**/*.json")]
    assert receipts and {r["circumstance"]["runtime"] for r in receipts} == {"charliecloud"}
    scores = {f"{s['step']}/{s['slice']}": s["score"] for s in status["slices"] if s["score"] is not None}
    assert scores and scores == {k: v for k, v in docker_scores.items() if k in scores}

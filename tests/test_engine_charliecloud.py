"""The engine against real Charliecloud (ch-run 0.31, Debian's charliecloud-runtime): the small test image
(tests/docker_image) exported from Docker's storage by `images export`'s own code (ch-convert, the mount
points, the marker, the tree digest), run through CharliecloudRuntime. The stage contract where
Charliecloud can give it: not root, no capabilities, the job spec and the store read-only (bound through
a user namespace of the runtime's own), the image's root read-only, a private /tmp, no network, the
image's environment and not the host's; what it cannot give (memory and process limits) is in every
receipt. As root (CI) the stage runs as nobody inside, as Docker's does. The whole demo through it as an
unprivileged user is test_appliance_demo's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_engine_docker import docker_image, report  # noqa: F401 - the fixture
from test_engine_support import make_recipe, resolved_for, selftest_step

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.errors import RequirementsError
from trace_tui.runtime.exports import export_charliecloud, tree_digest
from trace_tui.images import ImagesLock, LockedImage
from trace_tui.runtime.base import Launch
from trace_tui.runtime.charliecloud import GAPS, MARKER, CharliecloudRuntime, charliecloud_command
from trace_tui.runtime.docker import container_user
from trace_tui.verify.campaign import verify_campaign

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def small_lock(tag: str) -> ImagesLock:
    image_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                              text=True, check=True).stdout.strip()
    locked = LockedImage(name="infer", tag=tag, id=image_id, base_image="test", base_id="test", build_args={},
                         requirement_locks={})
    return ImagesLock(flavor="cpu", version="test", images={"infer": locked})


@pytest.fixture(scope="module")
def ch_image(docker_image: str, tmp_path_factory) -> tuple[Path, ImagesLock]:  # noqa: F811 - the fixture
    lock = small_lock(docker_image)
    out = tmp_path_factory.mktemp("charliecloud")
    exported = export_charliecloud(lock, ["infer"], out, say=lambda _: None)
    return Path(exported["infer"].path), lock.model_copy(update={"exports": {"charliecloud": exported}})


def test_an_export_is_a_directory_image_with_the_contracts_mount_points_and_its_digest(ch_image) -> None:
    image, lock = ch_image
    exported = lock.exports["charliecloud"]["infer"]
    assert exported.format == "ch-dir" and exported.source_id == lock.images["infer"].id
    for mount in ("job", "campaign", "store"):
        assert (image / mount).is_dir()
    marker = json.loads((image / MARKER).read_text())
    assert marker["source_id"] == lock.images["infer"].id and marker["nvidia"] is False
    assert (image / "ch" / "environment").is_file(), "ch-convert keeps the image's environment for --set-env"
    assert tree_digest(image) == exported.sha256


def test_a_stage_in_charliecloud_gets_the_contract_it_can_and_receipts_name_the_rest(ch_image, tmp_path: Path,
                                                                                    monkeypatch) -> None:
    image, _ = ch_image
    monkeypatch.setenv("TRACE_TUI_HOST_ONLY_SECRET", "must-not-reach-the-stage")
    recipe = make_recipe([selftest_step("gen", "rows"), selftest_step("who", "whoami", per_slice=False),
                          selftest_step("store", "store-write", per_slice=False),
                          selftest_step("net", "network", per_slice=False)])
    runtime = CharliecloudRuntime(images={"infer": str(image)})
    with Campaign(tmp_path / "c") as c:
        result = Runner(resolved_for(recipe, seeds=[42]), c, runtime, store=tmp_path / "store").run(lambda e: None)
    assert result.exit_code == 0, result.message
    c = tmp_path / "c"
    who = report(c, "who", "whoami")
    uid, gid = container_user()
    assert (who["uid"], who["gid"]) == (uid, gid) and who["uid"] != 0
    assert int(who["cap_eff"], 16) == 0
    assert who["job_write"] == "error 30" and who["root_write"] == "error 30" and who["tmp_write"] == "ok"
    assert who["cwd"] == "/"
    assert report(c, "store", "store-write")["errno"] == 30
    net = report(c, "net", "network")
    assert net["interfaces"] == ["lo"] and net["connect"].startswith("error")
    logs = "".join(p.read_text() for p in (c / "logs").rglob("*") if p.is_file())
    assert "must-not-reach-the-stage" not in logs
    receipts = [json.loads(p.read_text()) for p in (c / "receipts").rglob("*.json")]
    assert receipts and {r["circumstance"]["runtime"] for r in receipts} == {"charliecloud"}
    assert all(r["circumstance"]["isolation_gaps"] == list(GAPS) for r in receipts)
    assert verify_campaign(c).ok()


def test_the_host_environment_does_not_reach_the_stage(ch_image, tmp_path: Path) -> None:
    """The command line the runtime runs, run as it is: the image's own variables, ours, nothing of the host's."""
    image, _ = ch_image
    job = tmp_path / "job"
    job.mkdir()
    launch = Launch(step="s", slice="x", module="trace_tui", args=[], job_dir=job, campaign=tmp_path / "c",
                    store=tmp_path / "store", log_path=tmp_path / "log", image="infer")
    for folder in (launch.campaign, launch.store):
        folder.mkdir()
    argv = charliecloud_command(launch, image, uid=os.getuid(), gid=os.getgid())
    argv = argv[:argv.index("python3")] + ["env"]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"], "USER": "x",
                                                                      "HOST_ONLY": "1"}, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert "HOST_ONLY" not in seen and seen["PYTHONPATH"] == "/opt/trace-tui"  # the image's ENV
    assert seen["TRACE_TUI_STORE"] == "/store" and seen["HF_HUB_OFFLINE"] == "1"
    # the loopback of the stage's own network namespace is up: local sockets (torch's, vLLM's) connect
    loop = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
            "socket.create_connection(s.getsockname(), timeout=5); print('loopback ok')")
    argv[-1:] = ["python3", "-c", loop]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"], "USER": "x"},
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "loopback ok", done.stderr


def test_an_image_exported_from_another_build_is_refused(ch_image, tmp_path: Path, monkeypatch) -> None:
    image, lock = ch_image
    other = lock.model_copy(update={"images": {"infer": lock.images["infer"].model_copy(
        update={"id": "sha256:" + "1" * 64})}})
    path = tmp_path / "images.lock.json"
    path.write_text(other.model_dump_json())
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(path))
    runtime = CharliecloudRuntime()
    problems = runtime.check({"infer"}, gpus=False)
    assert len(problems) == 1 and "was exported from" in problems[0] and "images export --runtime charliecloud" \
        in problems[0]
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(tmp_path / "none.json"))
    with pytest.raises(RequirementsError, match="names no Charliecloud image for infer"):
        CharliecloudRuntime().image_id("infer")
    assert any("no NVIDIA libraries" in p for p in CharliecloudRuntime(images={"infer": str(image)}).check(
        {"infer"}, gpus=True))


def test_gpus_are_chosen_by_cuda_visible_devices_and_recorded_as_asked(tmp_path: Path) -> None:
    """No GPU here: the command line a GPU step gets, and what its receipt records of the request."""
    launch = Launch(step="s", slice="x", module="trace_tui.stages.generate", args=[], job_dir=tmp_path / "j",
                    campaign=tmp_path / "c", store=tmp_path / "s", log_path=tmp_path / "l", image="infer", gpus=[1, 3])
    argv = charliecloud_command(launch, tmp_path / "img", uid=1000, gid=1000)
    assert "--set-env=CUDA_VISIBLE_DEVICES=1,3" in argv and "--set-env=CUDA_DEVICE_ORDER=PCI_BUS_ID" in argv
    assert CharliecloudRuntime().gpu_settings([1, 3]) == {"CUDA_VISIBLE_DEVICES": "1,3",
                                                          "libraries": "ch-fromhost --nvidia"}

"""The engine against real Podman: the small test image (tests/docker_image), loaded into Podman's storage
from Docker's (`docker save | podman load`, as a site loads a bundle's archive), run through PodmanRuntime
on Podman's Docker-compatible API. The same stage contract as the Docker runtime's (test_engine_docker):
the invoking user (never root), every capability dropped, the job spec and the store read-only, no
network, the memory and pids limits, a read-only root. The whole demo through rootless Podman as a user
is test_appliance_demo's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_engine_docker import docker_image, report  # noqa: F401 - the fixture
from test_engine_support import TEST_IMAGE, make_recipe, resolved_for, selftest_step

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.errors import RequirementsError
from trace_tui.runtime.docker import PIDS_LIMIT, container_user
from trace_tui.runtime.podman import LOAD_HINT, PodmanRuntime, stage_ulimits
from trace_tui.verify.campaign import verify_campaign

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def podman_image(docker_image: str) -> str:  # noqa: F811 - the fixture
    """The test image in this user's Podman storage, by id (Podman keeps the id a `docker save` carries)."""
    save = subprocess.Popen(["docker", "save", docker_image], stdout=subprocess.PIPE)
    done = subprocess.run(["podman", "load"], stdin=save.stdout, capture_output=True, text=True, timeout=600)
    save.stdout.close()
    assert save.wait() == 0 and done.returncode == 0, done.stderr
    image_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", docker_image],
                              capture_output=True, text=True, check=True).stdout.strip()
    podman_id = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", docker_image],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert image_id.removeprefix("sha256:") == podman_id.removeprefix("sha256:")
    return image_id


def _run(tmp: Path, resolved, image: str, name: str = "c", **runtime_kw):
    events: list = []
    runtime = PodmanRuntime(images={"infer": image, "score": image, "train": image}, **runtime_kw)
    with Campaign(tmp / name) as c:
        result = Runner(resolved, c, runtime, store=tmp / "store").run(events.append)
    return result, events


def test_a_stage_in_podman_gets_the_docker_runtimes_confinement(podman_image: str, tmp_path: Path) -> None:
    recipe = make_recipe([selftest_step("gen", "rows"), selftest_step("who", "whoami", per_slice=False),
                          selftest_step("store", "store-write", per_slice=False),
                          selftest_step("net", "network", per_slice=False)])
    result, _ = _run(tmp_path, resolved_for(recipe, seeds=[42]), podman_image, mem_limit="256m")
    assert result.exit_code == 0, result.message
    c = tmp_path / "c"
    who = report(c, "who", "whoami")
    uid, gid = container_user()
    assert (who["uid"], who["gid"]) == (uid, gid) and who["uid"] != 0
    assert int(who["cap_eff"], 16) == 0 and who["no_new_privs"] == "1"
    assert who["job_write"] == "error 30" and who["root_write"] == "error 30" and who["tmp_write"] == "ok"
    assert who["pids_max"] == str(PIDS_LIMIT) and who["memory_max"] == str(256 << 20)
    assert report(c, "store", "store-write")["errno"] == 30
    net = report(c, "net", "network")
    assert net["interfaces"] == ["lo"] and net["connect"].startswith("error")
    for p in (c / "outputs" / "gen").rglob("*"):
        if p.is_file():
            assert (p.stat().st_uid, p.stat().st_gid) == (uid, gid), p
    receipts = list((c / "receipts" / "gen").rglob("*.json"))
    assert receipts and all('"runtime": "podman"' in p.read_text() for p in receipts)
    assert verify_campaign(c).ok()


def test_an_image_podman_does_not_have_is_refused_before_anything_starts(tmp_path: Path) -> None:
    missing = "sha256:" + "0" * 64
    runtime = PodmanRuntime(images={"infer": missing})
    problems = runtime.check({"infer"}, gpus=False)
    assert len(problems) == 1 and "from Podman's storage" in problems[0] and "podman load -i" in problems[0]
    with pytest.raises(RequirementsError) as err:
        runtime.image_id("infer")
    assert err.value.hint == LOAD_HINT


def test_gpus_through_podman_need_a_cdi_spec(tmp_path: Path, monkeypatch) -> None:
    """No GPU here: the refusal when the host has no CDI spec (what `--device nvidia.com/gpu=N` needs)."""
    import trace_tui.runtime.podman as podman

    monkeypatch.setattr(podman, "CDI_DIRS", (tmp_path / "no-cdi",))
    problems = PodmanRuntime(images={}).check(set(), gpus=True)
    assert problems == [f"Podman gives GPUs through CDI and this host has no CDI spec ({podman.CDI_HINT})"]
    spec = tmp_path / "cdi" / "nvidia.yaml"
    spec.parent.mkdir()
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    monkeypatch.setattr(podman, "CDI_DIRS", (spec.parent,))
    assert PodmanRuntime(images={}).check(set(), gpus=True) == []
    assert PodmanRuntime(images={}).gpu_settings([0, 2]) == {"devices": ["nvidia.com/gpu=0", "nvidia.com/gpu=2"]}


def test_the_limits_podman_is_asked_for_are_ones_the_host_grants() -> None:
    import resource

    nofile, nproc = stage_ulimits()
    assert (nofile["Name"], nofile["Soft"], nofile["Hard"]) == ("nofile", *resource.getrlimit(resource.RLIMIT_NOFILE))
    assert (nproc["Name"], nproc["Soft"], nproc["Hard"]) == ("nproc", PIDS_LIMIT, PIDS_LIMIT)

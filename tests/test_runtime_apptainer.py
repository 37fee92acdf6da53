"""The Apptainer runtime's command lines against Apptainer's documented flags, and its image checks.

Apptainer cannot be installed here (Debian packages neither Apptainer nor SingularityCE, and nothing can be
fetched): it has not run here, and the README says so. What is checked instead, on the same code that runs:

- `apptainer exec`'s command line for a stage, with and without network and GPUs, flag by flag against the
  flags Apptainer 1.3.6 and 1.4.5 define (cmd/internal/cli/action_flags.go at tags v1.3.6 and v1.4.5, the
  same in both for every flag below; usage texts quoted), their value syntax (bind specs
  `src[:dest[:opts]]` with opts `ro`/`rw`, `--env KEY=VAL`, `--network none`), flags before the image
  (Apptainer stops reading flags at the image: SetInterspersed(false));
- `apptainer build --force OUT.sif docker-archive:ARCHIVE` from an archive holding one image (Apptainer 1.4
  reads no image selector in a docker-archive reference), cut from a real multi-image `docker save` and
  loaded back by real Podman to the same image id;
- the runtime's refusals (no executable, no SIF in the lock, a SIF whose sha256 is not the lock's).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from trace_tui.errors import RequirementsError
from trace_tui.runtime.exports import apptainer_build_command, single_image_archive
from trace_tui.runtime.apptainer import GAPS, ApptainerRuntime, apptainer_command
from trace_tui.runtime.base import Launch

from tests.images_fixtures import docker_client, tiny_lock  # noqa: F401 - fixtures

# exec's flags as action_flags.go defines them: name -> the kind of value (None: a boolean flag)
EXEC_FLAGS: dict[str, str | None] = {
    "--containall": None,  # "contain not only file systems, but also PID, IPC, and environment"
    "--contain": None,  # "use minimal /dev and empty other directories (e.g. /tmp and $HOME) instead of ..."
    "--cleanenv": None,  # "clean environment before running container"
    "--no-home": None,
    "--cwd": "path",  # "initial working directory for payload process inside the container (synonym for --pwd)"
    "--bind": "bind",  # "a user-bind path specification.  spec has the format src[:dest[:opts]] ... 'ro' ... 'rw'"
    "--env": "env",  # "pass environment variable to contained process"
    "--net": None,  # "run container in a new network namespace (sets up a bridge network interface by default)"
    "--network": "network",  # "specify desired network type separated by commas, each network will bring up a ..."
    "--nv": None,  # "enable Nvidia support"
    "--ipc": None,
    "--pid": None,
    "--writable-tmpfs": None,
    "--no-privs": None,
    "--no-init": None,
    "--memory": "size",
    "--pids-limit": "int",
}


def _launch(tmp_path: Path, *, network: bool = False, gpus: list[int] | None = None) -> Launch:
    return Launch(step="generate", slice="m/42/counting", module="trace_tui.stages.generate",
                  args=["--out", "{campaign}/outputs"], job_dir=tmp_path / "jobs" / "1", campaign=tmp_path / "c",
                  store=tmp_path / "store", log_path=tmp_path / "log", image="infer", network=network,
                  gpus=gpus or [])


def _parse(argv: list[str]) -> tuple[list[tuple[str, str | None]], str, list[str]]:
    """(flags with their values, the image, the command) as Apptainer reads `exec`'s arguments."""
    assert argv[1] == "exec"
    flags, i = [], 2
    while argv[i].startswith("-"):
        name, _, inline = argv[i].partition("=")
        assert name in EXEC_FLAGS, f"{name} is not one of exec's documented flags"
        if EXEC_FLAGS[name] is None:
            assert not inline, f"{name} is a boolean flag: `{argv[i]}`"
            flags.append((name, None))
            i += 1
        else:
            flags.append((name, inline or argv[i + 1]))
            i += 1 if inline else 2
    return flags, argv[i], argv[i + 1:]


@pytest.mark.parametrize("network,gpus", [(False, []), (True, []), (False, [0, 3])])
def test_exec_uses_documented_flags_with_documented_values(tmp_path, network, gpus):
    launch = _launch(tmp_path, network=network, gpus=gpus)
    sif = tmp_path / "infer.sif"
    flags, image, command = _parse(apptainer_command(launch, sif))
    assert image == str(sif) and command == ["python3", "-m", "trace_tui.stages.generate", "--out", "/campaign/outputs"]
    names = [n for n, _ in flags]
    assert {"--containall", "--cleanenv"} <= set(names) and ("--cwd", "/") in flags
    binds = {}
    for name, value in flags:
        if name == "--bind":
            parts = value.split(":")
            assert len(parts) == 3 and parts[2] in ("ro", "rw") and "," not in value, value
            binds[parts[1]] = (parts[0], parts[2])
        elif name == "--env":
            key, eq, val = value.partition("=")
            # KEY=VAL; a VAL with a comma is taken whole only while it holds no second "=" (pflag's reading)
            assert eq and key and not ("," in val and "=" in val), value
        elif name == "--network":
            assert value == "none"  # the one network an unprivileged user may ask for
    assert binds == {"/job": (str(launch.job_dir), "ro"), "/campaign": (str(launch.campaign), "rw"),
                     "/store": (str(launch.store), "ro")}
    env = dict(v.split("=", 1) for n, v in flags if n == "--env")
    assert env["TRACE_TUI_JOB"] == "/job/job.json" and env["HOME"] == "/tmp"
    if network:
        assert "--net" not in names and "HF_HUB_OFFLINE" not in env
    else:
        assert ("--net", None) in flags and ("--network", "none") in flags and env["HF_HUB_OFFLINE"] == "1"
    if gpus:
        assert "--nv" in names and env["CUDA_VISIBLE_DEVICES"] == "0,3"  # --nv alone exposes every GPU
    else:
        assert "--nv" not in names and "CUDA_VISIBLE_DEVICES" not in env


def test_a_path_with_a_comma_is_refused_not_split(tmp_path):
    launch = _launch(tmp_path)
    launch.campaign = tmp_path / "a,b"
    with pytest.raises(RequirementsError, match="a comma in it would split it in two"):
        apptainer_command(launch, tmp_path / "x.sif")


def test_build_reads_one_image_cut_from_a_multi_image_archive(tmp_path, docker_client, tiny_lock):  # noqa: F811
    """A real `docker save` of the three tiny images; the infer one cut out, as a bundle import does for a
    site without Docker, and loaded back by real Podman: the same image id."""
    archive = tmp_path / "stages.tar"
    tags = [img.tag for img in tiny_lock.images.values()]
    subprocess.run(["docker", "save", "-o", str(archive), *tags], check=True)
    infer = tiny_lock.images["infer"]
    single = tmp_path / "infer.tar"
    single_image_archive(archive, infer.tag, single)
    with tarfile.open(single) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        names = set(tar.getnames())
    assert len(manifest) == 1 and manifest[0]["RepoTags"] == [infer.tag]
    assert manifest[0]["Config"] in names and set(manifest[0]["Layers"]) <= names
    loaded = subprocess.run(["podman", "load", "-i", str(single)], capture_output=True, text=True)
    try:
        assert loaded.returncode == 0, loaded.stderr
        found = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", infer.tag], capture_output=True,
                               text=True).stdout.strip()
        assert found == infer.id.removeprefix("sha256:")
    finally:
        subprocess.run(["podman", "rmi", "--force", infer.tag], capture_output=True)
    assert apptainer_build_command("apptainer", tmp_path / "infer.sif", single) == [
        "apptainer", "build", "--force", str(tmp_path / "infer.sif"), f"docker-archive:{single}"]


def test_the_runtime_refuses_what_it_cannot_run_from(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    problems = ApptainerRuntime().check({"infer"}, gpus=False)
    assert problems == ["neither apptainer nor singularity is installed (install Apptainer "
                        "(https://apptainer.org/docs/admin/main/installation.html))"]
    lock = tmp_path / "images.lock.json"
    sif = tmp_path / "infer.sif"
    sif.write_bytes(b"a SIF stands here")
    lock.write_text(json.dumps({"flavor": "cpu", "version": "t", "images": {"infer": {"tag": "t", "id": "sha256:1"}},
                                "exports": {"apptainer": {"infer": {"format": "sif", "path": str(sif),
                                                                    "sha256": "0" * 64, "source_id": "sha256:1"}}}}))
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(lock))
    with pytest.raises(RequirementsError, match="is not the SIF the image lock records"):
        ApptainerRuntime().image_id("infer")
    with pytest.raises(RequirementsError, match="names no SIF for the train image"):
        ApptainerRuntime().image_id("train")
    import hashlib

    data = json.loads(lock.read_text())
    data["exports"]["apptainer"]["infer"]["sha256"] = hashlib.sha256(sif.read_bytes()).hexdigest()
    lock.write_text(json.dumps(data))
    assert ApptainerRuntime().image_id("infer") == "sha256:1"  # the Docker id a job's inputs hash
    assert ApptainerRuntime.gaps == GAPS and "no memory limit" in GAPS[0]

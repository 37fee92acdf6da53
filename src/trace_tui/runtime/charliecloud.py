"""Charliecloud runtime: each job in `ch-run` of the locked image's directory, as the invoking user.

Charliecloud is the smallest of the HPC runtimes: an unprivileged user namespace and a mount namespace
around a directory image, nothing else. `ch-run` (0.31) gives the image's root read-only, the image's own
environment (`--unset-env='*' --set-env`, so nothing of the host's leaks in), a private /tmp, and the
user's own uid. What it does not give, this runtime adds the same way it works itself, with util-linux's
`unshare`: a user namespace of our own, where the user may mount, in which (runtime.stage_namespace)

- the job spec and the store are bind-mounted onto themselves read-only before `ch-run` binds them in
  (a bind keeps its source's read-only flag, and a namespace made after it cannot lift it);
- a step without network gets a network namespace of its own (loopback only, brought up), as Docker's
  `network_mode=none` gives.

What it cannot give, receipts and `hw` say (``GAPS``): no memory or process limit (Charliecloud sets no
cgroups), and GPUs are chosen by CUDA_VISIBLE_DEVICES, not isolated as devices; their libraries come into
the image with `ch-fromhost --nvidia` when the image is exported on a GPU node.

The image is the locked image's export (`trace-tui images export --runtime charliecloud`): a directory the
image lock names, whose marker says which Docker image id it was written from; that id must be the
lock's, and it is what a job's inputs hash (so receipts and resume are those of the Docker run).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from trace_tui.common.images_lock import image_export, read_image_lock
from trace_tui.errors import RequirementsError
from trace_tui.runtime.base import (
    CAMPAIGN_MOUNT,
    JOB_MOUNT,
    STORE_MOUNT,
    Launch,
    contract_args,
    contract_env,
    named_image,
)
from trace_tui.runtime.docker import container_user, visible_gpus_env
from trace_tui.runtime.local import LocalHandle, spawn

MARKER = "ch/trace-tui-image.json"  # inside an exported image: {"source_id", "kind", "flavor", "nvidia"}
INSTALL_HINT = "install Charliecloud (Debian: `apt install charliecloud-runtime`)"
EXPORT_HINT = "export the locked images for it: `trace-tui images export --runtime charliecloud`"
NVIDIA_HINT = "export the images on a GPU node with `trace-tui images export --runtime charliecloud --nvidia`"
GAPS = ("no memory limit (Charliecloud sets no cgroups)", "no process limit",
        "GPUs chosen by CUDA_VISIBLE_DEVICES, not isolated as devices")


def charliecloud_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """BASE (default: this process's environment) with $USER, which Charliecloud's tools refuse to start
    without (a batch job's environment may lack it)."""
    env = dict(os.environ if base is None else base)
    env.setdefault("USER", getpass.getuser())
    return env


def image_marker(image: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((image / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def charliecloud_command(launch: Launch, image: Path, *, uid: int, gid: int, python: str = sys.executable) -> list[str]:
    """The whole command line of one stage (pure): unshare, the read-only binds and the loopback
    (runtime.stage_namespace, run by PYTHON, this trace-tui's interpreter), ch-run, the worker."""
    env = {**contract_env(launch), **visible_gpus_env(launch.gpus)}
    ch_run = ["ch-run", f"--uid={uid}", f"--gid={gid}", "--private-tmp", "--cd=/",
              # the image's environment and ours, nothing of the host's; values taken as they are
              "--unset-env=*", "--set-env", "--env-no-expand", *(f"--set-env={k}={v}" for k, v in env.items()),
              f"--bind={launch.job_dir}:{JOB_MOUNT}", f"--bind={launch.campaign}:{CAMPAIGN_MOUNT}",
              f"--bind={launch.store}:{STORE_MOUNT}", str(image), "--",
              "python3", "-m", launch.module, *contract_args(launch)]
    return ["unshare", "--user", "--map-root-user", "--mount", *([] if launch.network else ["--net"]), "--",
            python, "-P", "-m", "trace_tui.runtime.stage_namespace", *([] if launch.network else ["--net"]),
            str(launch.job_dir), str(launch.store), "--", *ch_run]


class CharliecloudRuntime:
    name = "charliecloud"
    gaps = GAPS

    def __init__(self, *, images: dict[str, str] | None = None, flavour: str = "gpu", **_: object) -> None:
        self._images = images or {}  # kind -> image directory, named explicitly
        self.flavour = flavour

    def image_dir(self, kind: str) -> Path:
        named = named_image(kind, self._images)
        if named:
            return Path(named)
        from trace_tui.images import images_lock_path

        export = image_export(images_lock_path(), self.name, kind)
        if not export.get("path"):
            raise RequirementsError(f"the image lock ({images_lock_path()}) names no Charliecloud image for "
                                    f"{kind}", hint=EXPORT_HINT)
        return Path(export["path"])

    def image_id(self, kind: str | None) -> str:
        """The Docker image id the directory was exported from (what a job's inputs hash): the lock's."""
        if kind is None:
            return "host"
        image = self.image_dir(kind)
        marker = image_marker(image)
        if marker is None:
            if not image.is_dir():
                raise RequirementsError(f"the {kind} image {image} is missing", hint=EXPORT_HINT)
            raise RequirementsError(f"{image} is not an image trace-tui exported (no {MARKER})", hint=EXPORT_HINT)
        if named_image(kind, self._images):  # named explicitly: the image it was exported from, whatever the lock says
            return str(marker.get("source_id"))
        from trace_tui.images import images_lock_path

        locked = read_image_lock(images_lock_path()).entries.get(kind) or {}
        if locked.get("id") and marker.get("source_id") != locked["id"]:
            raise RequirementsError(f"the {kind} image {image} was exported from {str(marker.get('source_id'))[:19]}, "
                                    f"the image lock names {str(locked['id'])[:19]}", hint=EXPORT_HINT)
        return str(marker.get("source_id"))

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        if shutil.which("ch-run") is None:
            return [RequirementsError("ch-run is not installed", hint=INSTALL_HINT).line()]
        if shutil.which("unshare") is None:
            return [RequirementsError("unshare is not installed", hint="install util-linux").line()]
        problems: list[str] = []
        for kind in sorted(image_kinds):
            try:
                self.image_id(kind)
            except RequirementsError as exc:
                problems.append(exc.line())
                continue
            if gpus and not (image_marker(self.image_dir(kind)) or {}).get("nvidia"):
                problems.append(RequirementsError(f"the {kind} image {self.image_dir(kind)} has no NVIDIA libraries",
                                                  hint=NVIDIA_HINT).line())
        return problems

    def gpu_settings(self, gpus: list[int]) -> dict[str, Any]:
        """What selects the GPUS (the runner records it with the step)."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus), "libraries": "ch-fromhost --nvidia"}

    def start(self, launch: Launch) -> LocalHandle:
        assert launch.image is not None, "host steps run on the local runtime"
        image = self.image_dir(launch.image)
        self.image_id(launch.image)  # the marker matches the lock, or the refusal says why
        out = launch.output_dir or launch.campaign / "outputs"
        out.mkdir(parents=True, exist_ok=True)
        launch.store.mkdir(parents=True, exist_ok=True)
        uid, gid = container_user()  # the invoking user; nobody when invoked as root, as Docker's
        argv = charliecloud_command(launch, image, uid=uid, gid=gid)
        return spawn(argv, charliecloud_env({"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                             # this trace_tui for stage_namespace, also when not installed;
                                             # ch-run's --unset-env keeps it from the stage
                                             "PYTHONPATH": str(Path(__file__).resolve().parents[2])}),
                     launch.log_path)

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        return 0  # a stage dies with its runner (PR_SET_PDEATHSIG through unshare and ch-run, which exec)

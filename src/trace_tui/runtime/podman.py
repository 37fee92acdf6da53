"""Podman runtime: the Docker runtime's stage containers, on Podman's Docker-compatible API.

Where Slurm runs, Docker is rarely installed; Podman runs the same pinned images, as root or rootless.
This runtime starts `podman system service` on a private socket for the life of the process and drives
it with the Docker SDK, so each stage gets what the Docker runtime gives it (the job spec and the store
read-only, the campaign read-write, no network unless the step needs it, every capability dropped,
no-new-privileges, a read-only root, the memory and pids limits, the image's own environment) and the
runner's receipts, resume and cancellation are the same code. Differences, and why:

- the image is the locked image's id in Podman's own storage (a bundle's archive or `docker save`
  loaded with `podman load`), never a tag;
- rootless (run as a user), the container runs with `--userns=keep-id`: the invoking user is the same
  uid inside, so what a stage writes into the campaign is the user's (without it, a uid inside maps
  to a subordinate id outside);
- the open-files and process limits are set explicitly (the invoking process's own open-files limit,
  and the stage's pids budget for processes): Podman's defaults can exceed what an unprivileged or
  nested host lets a container set ("error setting rlimit");
- GPUs go through CDI (`nvidia.com/gpu=N`, after `nvidia-ctk cdi generate`), which this machine
  has never exercised: it has no GPU.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.images_lock import read_image_lock
from trace_tui.errors import RequirementsError
from trace_tui.runtime.base import named_image
from trace_tui.runtime.docker import PIDS_LIMIT, DockerRuntime

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient
    from docker.models.containers import Container

INSTALL_HINT = "install Podman (Debian: `apt install podman uidmap`; rootless also needs subordinate ids for the user)"
LOAD_HINT = ("load the locked images into Podman: `podman load -i BUNDLE/images/stages.tar` (a bundle's archive), "
             "or `docker save IMAGE... | podman load` where Docker has them")
CDI_HINT = "generate the CDI spec for the GPUs: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
SERVICE_START_S = 30.0


def podman_version() -> str | None:
    """`podman --version`'s version, or None where Podman is not installed."""
    exe = shutil.which("podman")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip().rsplit(" ", 1)[-1] or None


def rootless() -> bool:
    return os.getuid() != 0


def stage_ulimits() -> list[Any]:
    """Open files: this process's own limits (always permitted); processes: the stage's pids budget."""
    from docker.types import Ulimit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return [Ulimit(name="nofile", soft=soft, hard=hard), Ulimit(name="nproc", soft=PIDS_LIMIT, hard=PIDS_LIMIT)]


def cdi_specs() -> list[Path]:
    """The CDI spec files on this host (what `--device nvidia.com/gpu=N` resolves through)."""
    return sorted(p for d in CDI_DIRS if d.is_dir() for p in d.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def _die_with_parent() -> None:
    """In the service's process before exec: SIGTERM when the process that started it dies (Linux)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class PodmanService:
    """`podman system service` on a socket of this process's own, stopped when the process exits."""

    _lock = threading.Lock()
    _running: PodmanService | None = None

    def __init__(self) -> None:
        exe = shutil.which("podman")
        if exe is None:
            raise RequirementsError("Podman is not installed", hint=INSTALL_HINT)
        self.folder = Path(tempfile.mkdtemp(prefix="trace-tui-podman-service-"))
        self.socket = self.folder / "podman.sock"
        # A session of its own: a Ctrl-C in the terminal must not stop the service while the runner still
        # stops its containers through it; and it ends when this process does, however it ends (kill -9).
        self.proc = subprocess.Popen([exe, "system", "service", "--time=0", f"unix://{self.socket}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        atexit.register(self.stop)
        deadline = time.monotonic() + SERVICE_START_S
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = (self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else b"")
                self.stop()
                tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no answer"]
                raise RequirementsError(f"podman system service did not start: {tail[0][:200]}", hint=INSTALL_HINT)
            time.sleep(0.05)

    @classmethod
    def shared(cls) -> PodmanService:
        with cls._lock:
            if cls._running is None or cls._running.proc.poll() is not None:
                cls._running = cls()
            return cls._running

    def client(self) -> DockerClient:
        import docker

        return docker.DockerClient(base_url=f"unix://{self.socket}", timeout=600)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


class PodmanRuntime(DockerRuntime):
    name = "podman"

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            self._client = PodmanService.shared().client()
        return self._client

    def image_name(self, kind: str) -> str | None:
        """The locked image's id (Podman keeps the id a `docker save` archive carries), unless one is named
        explicitly (TRACE_TUI_IMAGE_<KIND>, or given to this runtime)."""
        named = named_image(kind, self._images)
        if named:
            return named
        from trace_tui.images import images_lock_path

        entry = read_image_lock(images_lock_path()).entries.get(kind) or {}
        return entry.get("id") or super().image_name(kind)

    def image_id(self, kind: str | None) -> str:
        try:
            return super().image_id(kind)
        except RequirementsError as exc:
            if "is missing" in exc.message:
                raise RequirementsError(f"{exc.message} from Podman's storage", hint=LOAD_HINT) from None
            raise

    @property
    def gpu_runtime(self) -> str | None:
        return "cdi" if cdi_specs() else None

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        if gpus and not cdi_specs():
            return [*super().check(image_kinds, gpus=False),
                    f"Podman gives GPUs through CDI and this host has no CDI spec ({CDI_HINT})"]
        return super().check(image_kinds, gpus=False)

    def gpu_settings(self, gpus: list[int]) -> dict[str, Any]:
        return {"devices": [f"nvidia.com/gpu={g}" for g in gpus]}

    def create(self, image: str, command: list[str], settings: dict[str, Any]) -> Container:
        settings = {**settings, "ulimits": stage_ulimits()}
        if not rootless():
            return super().create(image, command, settings)
        # docker-py accepts only "host" as a user namespace mode; Podman's API takes keep-id
        from docker.models.containers import _create_container_args

        api = self.client.api
        args = _create_container_args({**settings, "image": image, "command": command, "version": api._version})
        args["host_config"]["UsernsMode"] = "keep-id"
        created = api.create_container(**args)
        return self.client.containers.get(created["Id"])

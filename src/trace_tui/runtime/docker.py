"""Docker runtime: each job in its own container, on the Docker SDK against the real engine.

The container gets the job spec read-only at /job, the campaign read-write at
/campaign, the store read-only at /store; it runs as the invoking user (an
unprivileged uid when invoked as root), with every capability dropped and
no-new-privileges, no network unless the step needs it and --offline is not
given, and GPUs by device id. Labels let a runner find and remove its own
containers (and a killed runner's, for the same campaign) and nobody else's.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.clients import docker_client
from trace_tui.common.images_lock import image_refs
from trace_tui.common.safe_write import open_append
from trace_tui.errors import RequirementsError
from trace_tui.runtime.base import (
    CAMPAIGN_MOUNT,
    JOB_MOUNT,
    LABEL_CAMPAIGN,
    LABEL_OWNER,
    LABEL_SLICE,
    LABEL_STEP,
    STORE_MOUNT,
    ExitInfo,
    Launch,
    Tail,
    contract_args,
    contract_env,
    named_image,
    split_lines,
)

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient
    from docker.models.containers import Container
    from docker.types import DeviceRequest

UNPRIVILEGED = (65534, 65534)  # nobody:nogroup, for runs invoked as root
IMAGE_HINT = "build the images: `make appliance`"
LOCK_HINT = ("build the images and their lock with `make appliance`, import a bundle's with `trace-tui bundle import "
             "DIR`, or run without containers: `--runtime local`")
GPU_HINT = "install the NVIDIA Container Toolkit and restart Docker (`sudo nvidia-ctk runtime configure && " \
           "sudo systemctl restart docker`)"


def owner_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def container_user() -> tuple[int, int]:
    """The uid:gid a stage container runs as: the invoking user, never root."""
    uid, gid = os.getuid(), os.getgid()
    return UNPRIVILEGED if uid == 0 else (uid, gid)


def docker_available() -> bool:
    try:
        docker_client(timeout=5).close()
        return True
    except RequirementsError:
        return False


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _images_lock() -> dict[str, str]:
    """Image names from appliance/images.lock.json (written by `make appliance`), if there is one."""
    from trace_tui.images import images_lock_path

    return image_refs(images_lock_path())


# GPU containers: the GPU ids the runner plans (nvidia-smi's order, PCI bus order) must be the
# ids CUDA numbers inside (its default is fastest-first).
GPU_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
# vLLM's workers and NCCL exchange tensors through /dev/shm; Docker's default 64 MiB fails them
# ("Bus error", NCCL "unhandled system error"). A private shm of its own size (not --ipc=host:
# the container shares no IPC namespace with the host); the tmpfs counts against the memory limit.
GPU_SHM_PER_GPU_GIB = 8
GPU_SHM_MIN_GIB = 16


def visible_gpus_env(gpus: list[int]) -> dict[str, str]:
    """For a runtime that hands a stage every GPU (Charliecloud, Apptainer's --nv): the GPUS it may use, in
    the order the runner planned them; {} without GPUs."""
    return {**GPU_ENV, "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)} if gpus else {}


def gpu_container_settings(gpus: list[int]) -> dict[str, Any]:
    """Docker settings a container given GPUS needs beyond the devices (pure)."""
    if not gpus:
        return {}
    return {"shm_size": f"{max(GPU_SHM_MIN_GIB, GPU_SHM_PER_GPU_GIB * len(gpus))}g"}


def ensure_writable(path: Path, uid: int, gid: int) -> None:
    """Make ``path`` (and what is under it) writable for the container user, when we are root."""
    if os.getuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            st = os.lstat(name)
            if st.st_uid != uid or st.st_gid != gid:
                os.lchown(name, uid, gid)


# A stage that forks without end (or leaks threads) stops at this many tasks, not at the host's limit.
PIDS_LIMIT = 8192


def default_mem_limit() -> str:
    """Without a configured limit, a stage may use at most 90% of the host's memory: the host stays usable."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - not Linux
        return "8g"
    return f"{max(total * 9 // 10 >> 20, 256)}m"


def confinement(mem_limit: str | None) -> dict[str, Any]:
    """Resource limits and a read-only root filesystem for a stage container.

    Memory without swap (over the limit is an OOM kill the runner names), a pids limit, and a
    root filesystem the stage cannot change: scratch space is a tmpfs at /tmp (HOME points there).
    """
    mem = mem_limit or default_mem_limit()
    return {"mem_limit": mem, "memswap_limit": mem, "pids_limit": PIDS_LIMIT, "read_only": True,
            "tmpfs": {"/tmp": "rw,nosuid,nodev,mode=1777"}}


class DockerHandle:
    def __init__(self, container: Container, launch: Launch) -> None:
        self.container = container
        self.launch = launch
        self._stopped = threading.Event()
        self._tail = Tail()

        self._log = open_append(launch.log_path)  # never through a link planted in its place; closed in wait()

    def lines(self) -> Iterator[str]:
        stream = self.container.logs(stream=True, follow=True, stdout=True, stderr=False)
        try:
            for line in split_lines(stream):
                if not line.startswith("{"):
                    self._tail.add(line)
                    self._log.write(line + "\n")
                yield line
        finally:
            close = getattr(stream, "close", None)
            if close:
                close()

    def wait(self) -> ExitInfo:
        from docker.errors import APIError, NotFound

        try:
            code = int(self.container.wait().get("StatusCode", -1))
            self.container.reload()
            state = self.container.attrs.get("State", {})
            oom = bool(state.get("OOMKilled"))
            err = self.container.logs(stdout=False, stderr=True, tail=40).decode("utf-8", errors="replace")
            for line in err.splitlines():
                self._tail.add(line)
            self._log.write(err)
        except NotFound:
            code, oom = 137, False
        finally:
            self._log.close()
            try:
                self.container.remove(force=True)
            except (NotFound, APIError):
                pass
        return ExitInfo(exit_code=code, oom_killed=oom, stopped=self._stopped.is_set(), tail=self._tail.lines())

    def stop(self, grace: int = 5) -> None:
        from docker.errors import APIError, NotFound

        self._stopped.set()
        try:
            self.container.stop(timeout=grace)
        except (NotFound, APIError):
            pass


class DockerRuntime:
    name = "docker"

    def __init__(self, *, images: dict[str, str] | None = None, client: DockerClient | None = None,
                 mem_limit: str | None = None,
                 user: tuple[int, int] | None = None, flavour: str = "gpu", **_: object) -> None:
        self._client = client
        self.flavour = flavour
        self._images = images or {}
        self.mem_limit = mem_limit
        self.user = user or container_user()
        self.owner = owner_id()
        self._image_ids: dict[str, str] = {}
        self._info_cache: dict[str, Any] | None = None

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            self._client = docker_client()
        return self._client

    def image_name(self, kind: str) -> str | None:
        """The image a stage of KIND runs from: one named explicitly (TRACE_TUI_IMAGE_<KIND>, or given to
        this runtime), else the one the image lock names; None when neither names one. An image that merely
        carries trace-tui's tag is never taken without the lock: its build is not the one the lock records."""
        # The image lock holds one flavour's images under their kind (train, infer, score).
        return named_image(kind, self._images) or _images_lock().get(kind)

    def image_from_lock(self, kind: str) -> bool:
        """Whether the stage image of KIND is the one the image lock names (not one named explicitly)."""
        return not named_image(kind, self._images)

    def image_id(self, kind: str | None) -> str:
        if kind is None:
            return "host"
        if kind not in self._image_ids:
            from docker.errors import ImageNotFound

            name = self.image_name(kind)
            if name is None:
                from trace_tui.images import images_lock_path

                raise RequirementsError(f"the {kind} image is not in the image lock ({images_lock_path()}): "
                                        "a stage runs only from an image the lock names", hint=LOCK_HINT)
            try:
                self._image_ids[kind] = self.client.images.get(name).id
            except ImageNotFound:
                raise RequirementsError(f"the {kind} image {name} is missing", hint=IMAGE_HINT) from None
        return self._image_ids[kind]

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        problems: list[str] = []
        try:
            self.client  # noqa: B018 - connects: an unreachable engine is the one problem worth saying
        except RequirementsError as exc:
            return [exc.line()]
        for kind in sorted(image_kinds):
            try:
                self.image_id(kind)
            except RequirementsError as exc:
                problems.append(exc.line())
        if gpus and self.gpu_runtime is None:
            runtimes = (self._info().get("Runtimes") or {})
            problems.append(f"Docker has no GPU runtime: neither an nvidia runtime (runtimes: "
                            f"{', '.join(sorted(runtimes)) or 'none'}) nor CDI specs for nvidia.com/gpu ({GPU_HINT})")
        return problems

    def _info(self) -> dict[str, Any]:
        if self._info_cache is None:
            self._info_cache = self.client.info()
        return self._info_cache

    @property
    def gpu_runtime(self) -> str | None:
        """"nvidia" or "cdi" (as trace_tui.hardware's check decides), None: the engine cannot give GPUs."""
        from trace_tui.hardware import gpu_runtime_of

        return gpu_runtime_of(self._info())

    def gpu_request(self, gpus: list[int]) -> DeviceRequest:
        """GPUs by host index: through the nvidia runtime's device driver, or as CDI devices
        (nvidia.com/gpu=N, what `docker run --device nvidia.com/gpu=N` asks for) on a CDI-only engine."""
        from docker.types import DeviceRequest

        if self.gpu_runtime == "cdi":
            return DeviceRequest(driver="cdi", device_ids=[f"nvidia.com/gpu={g}" for g in gpus])
        return DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])

    def gpu_settings(self, gpus: list[int]) -> dict[str, Any]:
        """What asks the engine for GPUS (the runner records it with the step)."""
        return {"device_requests": [self.gpu_request(gpus)]}

    def create(self, image: str, command: list[str], settings: dict[str, Any]) -> Container:
        """The stage container, created (not started) with SETTINGS (docker-py's containers.create keywords)."""
        return self.client.containers.create(image, command, **settings)

    def start(self, launch: Launch) -> DockerHandle:
        from docker.errors import APIError, ImageNotFound

        assert launch.image is not None, "host steps run on the local runtime"
        uid, gid = self.user
        out = launch.output_dir or launch.campaign / "outputs"
        out.mkdir(parents=True, exist_ok=True)
        ensure_writable(out, uid, gid)
        launch.store.mkdir(parents=True, exist_ok=True)
        launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        labels = dict(launch.labels)
        labels.update({LABEL_STEP: launch.step, LABEL_SLICE: launch.slice, LABEL_OWNER: self.owner})
        kwargs: dict[str, Any] = dict(
            command=["python3", "-m", launch.module, *contract_args(launch)],
            detach=True,
            user=f"{uid}:{gid}",
            volumes={
                str(launch.job_dir): {"bind": JOB_MOUNT, "mode": "ro"},
                str(launch.campaign): {"bind": CAMPAIGN_MOUNT, "mode": "rw"},
                str(launch.store): {"bind": STORE_MOUNT, "mode": "ro"},
            },
            environment=contract_env(launch),
            # Never the campaign: `python -m` puts the working directory first on sys.path, and a
            # json.py or trace_tui/ a campaign holds would run in place of ours.
            working_dir="/",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            labels=labels,
            network_mode=None if launch.network else "none",
        )
        kwargs.update(confinement(launch.mem_limit or self.mem_limit))
        if launch.gpus:
            kwargs.update(self.gpu_settings(list(launch.gpus)))
            kwargs.update(gpu_container_settings(launch.gpus))
            kwargs["environment"].update(GPU_ENV)
        image = self.image_name(launch.image)
        if image is None:
            self.image_id(launch.image)  # raises the refusal that names the lock
        kwargs.pop("detach")
        try:
            container = self.create(image, kwargs.pop("command"), kwargs)
        except ImageNotFound:
            raise RequirementsError(f"the {launch.image} image {image} is missing", hint=IMAGE_HINT) from None
        try:
            container.start()
        except APIError as exc:
            # Created but not started (e.g. no GPU runtime): leave nothing behind.
            try:
                container.remove(force=True)
            except APIError:
                pass
            text = str(exc)
            if "device driver" in text or "nvidia" in text.lower() or "gpu" in text.lower():
                raise RequirementsError(f"Docker cannot give GPUs to containers ({_short(exc)})",
                                        hint=GPU_HINT) from None
            raise
        return DockerHandle(container, launch)

    def own_containers(self, campaign_id: str) -> list[Container]:
        return self.client.containers.list(all=True, filters={"label": f"{LABEL_CAMPAIGN}={campaign_id}"})

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        """Remove the campaign's containers (a killed runner's leftovers, or ours on exit)."""
        from docker.errors import APIError, NotFound

        n = 0
        for c in self.own_containers(campaign_id):
            if keep_owner is not None and c.labels.get(LABEL_OWNER) == keep_owner:
                continue
            try:
                c.remove(force=True)
                n += 1
            except (NotFound, APIError):
                pass
        return n

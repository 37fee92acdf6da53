"""The probes, the only I/O of the hardware check: NVML for GPUs, docker-py for the engine and the
stage images, the disk; each behind a seam tests replace at the narrowest edge."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from trace_tui.clients import docker_from_env, load_nvml
from trace_tui.common.images_lock import read_image_lock
from trace_tui.hardware.report import (
    FIX_IMAGES,
    IMAGE_NAMES,
    DiskStatus,
    DockerStatus,
    GpuInfo,
    GpuStatus,
    HardwareReport,
    ImageStatus,
)
from trace_tui.images import images_lock_path
from trace_tui.paths import home as default_home

if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Protocol

    from docker import DockerClient

    class Nvml(Protocol):
        """What the probe reads of the pynvml module (or of a fake machine with the same functions)."""

        NVMLError: type[Exception]
        nvmlInit: Callable[[], None]
        nvmlShutdown: Callable[[], None]
        nvmlSystemGetDriverVersion: Callable[[], str | bytes]
        nvmlSystemGetCudaDriverVersion: Callable[[], int]
        nvmlDeviceGetCount: Callable[[], int]
        nvmlDeviceGetHandleByIndex: Callable[[int], object]
        nvmlDeviceGetMemoryInfo: Callable[[object], Any]
        nvmlDeviceGetCudaComputeCapability: Callable[[object], tuple[int, int]]
        nvmlDeviceGetMigMode: Callable[[object], Any]
        nvmlDeviceGetTotalEccErrors: Callable[..., int]
        nvmlDeviceGetNvLinkState: Callable[[object, int], int]
        nvmlDeviceGetName: Callable[[object], str | bytes]
        nvmlDeviceGetUUID: Callable[[object], str | bytes]

_T = TypeVar("_T")

# --------------------------------------------------------------------------- GPU probe (NVML)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_gpus(nvml: Nvml | None = None) -> GpuStatus:
    """Read the GPUs through NVML. ``nvml`` is the pynvml module or a fake with the same functions."""
    if nvml is None:
        nvml = load_nvml()
        if nvml is None:
            return GpuStatus(status="no_library", message="nvidia-ml-py (pynvml) is not installed; "
                             "install trace-tui's dependencies to read the GPUs")
    err = nvml.NVMLError
    try:
        nvml.nvmlInit()
    except getattr(nvml, "NVMLError_LibraryNotFound", ()) :
        return GpuStatus(status="no_driver", message="no NVIDIA driver: the NVML library (libnvidia-ml.so) was not "
                         "found. GPU recipes need the NVIDIA driver; CPU recipes (demo, preflight, verify) still run")
    except getattr(nvml, "NVMLError_DriverNotLoaded", ()):
        return GpuStatus(status="no_driver", message="the NVIDIA driver is installed but not loaded "
                         "(load it with `modprobe nvidia` or reboot); GPU recipes cannot run")
    except getattr(nvml, "NVMLError_LibRmVersionMismatch", ()):
        return GpuStatus(status="driver_mismatch", message="driver/library version mismatch: the loaded NVIDIA "
                         "kernel module and the user-space NVML library differ (usually after a driver upgrade); "
                         "reboot, or reload the nvidia kernel modules")
    except err as exc:
        return GpuStatus(status="error", message=f"NVML failed to initialise: {exc}")
    try:
        driver = _optional(nvml, err, nvml.nvmlSystemGetDriverVersion)
        cuda = _optional(nvml, err, nvml.nvmlSystemGetCudaDriverVersion)
        cuda_text = f"{cuda // 1000}.{(cuda % 1000) // 10}" if isinstance(cuda, int) else None
        try:
            count = nvml.nvmlDeviceGetCount()
        except err as exc:
            return GpuStatus(status="error", message=f"NVML could not count GPUs: {exc}",
                             driver_version=_text(driver) if driver else None, cuda_driver_version=cuda_text)
        gpus = []
        for index in range(count):
            try:
                gpus.append(_probe_device(nvml, err, index))
            except err as exc:
                return GpuStatus(status="error", message=f"NVML could not read GPU {index}: {exc}",
                                 driver_version=_text(driver) if driver else None, cuda_driver_version=cuda_text)
        if not gpus:
            return GpuStatus(status="no_devices", message="the NVIDIA driver is loaded but reports 0 GPUs "
                             "(check CUDA_VISIBLE_DEVICES, the container's --gpus, or `nvidia-smi`)",
                             driver_version=_text(driver) if driver else None, cuda_driver_version=cuda_text)
        return GpuStatus(status="ok", message=f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}",
                         driver_version=_text(driver) if driver else None, cuda_driver_version=cuda_text, gpus=gpus)
    finally:
        try:
            nvml.nvmlShutdown()
        except err:
            pass


def _optional(nvml: Nvml, err: type[Exception], fn: Callable[..., _T], *args: object) -> _T | None:
    """Call an NVML getter; NotSupported (and other per-feature errors) mean "not available", not failure."""
    try:
        return fn(*args)
    except err:
        return None


def _probe_device(nvml: Nvml, err: type[Exception], index: int) -> GpuInfo:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    mem = nvml.nvmlDeviceGetMemoryInfo(h)
    cc = _optional(nvml, err, nvml.nvmlDeviceGetCudaComputeCapability, h)
    mig = _optional(nvml, err, nvml.nvmlDeviceGetMigMode, h)
    mig_text: Literal["enabled", "disabled", "n/a"] = "n/a"
    if mig is not None:
        current = mig[0] if isinstance(mig, (tuple, list)) else mig
        mig_text = "enabled" if current == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1) else "disabled"
    ecc = _optional(nvml, err, nvml.nvmlDeviceGetTotalEccErrors, h,
                    getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), getattr(nvml, "NVML_VOLATILE_ECC", 0))
    links = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except err:
            # NotSupported (no NVLink) or InvalidArgument (past this GPU's last link): stop counting
            break
        if state == getattr(nvml, "NVML_FEATURE_ENABLED", 1):
            links += 1
    return GpuInfo(
        index=index,
        name=_text(nvml.nvmlDeviceGetName(h)),
        uuid=_text(nvml.nvmlDeviceGetUUID(h)),
        memory_total_bytes=int(mem.total),
        memory_free_bytes=int(mem.free),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        mig_mode=mig_text,
        ecc_volatile_uncorrected=int(ecc) if ecc is not None else None,
        nvlink_links_up=links,
    )


# --------------------------------------------------------------------------- Docker probe


def image_lock_path(home: Path | None = None) -> Path:
    """The generated image lock: $TRACE_TUI_IMAGES_LOCK, the checkout's appliance/, or HOME/appliance/ (bundles)."""
    return images_lock_path(home)


def probe_docker(client_factory: Callable[[], DockerClient] | None = None, *, lock_path: Path | None = None,
                 home: Path | None = None) -> DockerStatus:
    """Engine reachable and its version, GPU runtime (nvidia or CDI), and each stage image against the lock."""
    lock_path = lock_path or image_lock_path(home)
    lock_status, entries, lock_message, flavor = read_image_lock(lock_path)
    try:
        import docker.errors as derr
    except ImportError:
        return DockerStatus(status="no_library", message="docker-py is not installed", lock_status=lock_status,
                            lock_path=str(lock_path), lock_message=lock_message)
    try:
        client = (client_factory or (lambda: docker_from_env(timeout=10)))()
        version = client.version()
        info = client.info()
    except (derr.DockerException, OSError) as exc:
        return DockerStatus(status="unreachable", message=f"Docker engine not reachable ({_first_line(exc)}); "
                            "start it (`systemctl start docker`) or check your access to its socket",
                            lock_status=lock_status, lock_path=str(lock_path), lock_message=lock_message,
                            images=_images_unknown(entries, lock_status))
    gpu_runtime = gpu_runtime_of(info)
    images = [_image_status(client, derr, name, entries.get(name), lock_status, lock_message)
              for name in list(IMAGE_NAMES) + [n for n in entries if n not in IMAGE_NAMES]]
    return DockerStatus(status="ok", message=f"Docker {version.get('Version', '?')}",
                        version=version.get("Version"), gpu_runtime=gpu_runtime, lock_status=lock_status,
                        lock_path=str(lock_path), lock_message=lock_message, lock_flavor=flavor, images=images)


def _image_status(client: DockerClient, derr: ModuleType, name: str, entry: dict[str, Any] | None, lock_status: str,
                  lock_message: str) -> ImageStatus:
    """present: the locked id exists in the engine; different: only the tag does (rebuilt or replaced
    since the lock was written); not_built: neither (or no lock)."""
    tag = entry.get("tag") if entry else None
    locked = entry.get("id") if entry else None
    tag = tag if isinstance(tag, str) and tag else None
    locked = locked if isinstance(locked, str) and locked else None
    if not entry or not (tag or locked):
        why = lock_message if lock_status != "ok" else f"no '{name}' entry in the image lock (run `{FIX_IMAGES}`)"
        return ImageStatus(name=name, status="not_built", message=f"not built: {why}")

    def lookup(ref: str | None) -> str | None:
        if not ref:
            return None
        try:
            return client.images.get(ref).id
        except derr.ImageNotFound:
            return None

    try:
        by_id = lookup(locked)
        by_tag = lookup(tag)
        if by_id is not None and by_id == locked:
            # The locked image is what runs (by id); a moved tag is worth a note, not a failure.
            moved = f" (the tag now points to {by_tag[:19]})" if by_tag and by_tag != locked else ""
            return ImageStatus(name=name, status="present", tag=tag, locked_id=locked, found_id=by_id,
                               message=f"{tag or name} {locked[:19]} as locked{moved}")
    except (derr.DockerException, OSError) as exc:
        return ImageStatus(name=name, status="not_built", tag=tag, locked_id=locked,
                           message=f"could not inspect {tag or locked}: {_first_line(exc)}")
    if by_tag is not None:
        return ImageStatus(name=name, status="different", tag=tag, locked_id=locked, found_id=by_tag,
                           message=f"{tag} is {by_tag[:19]} but the lock records {str(locked)[:19]} "
                                   f"(rebuild with `{FIX_IMAGES}`)")
    return ImageStatus(name=name, status="not_built", tag=tag, locked_id=locked,
                       message=f"not built: {tag or locked} is not in the local engine (run `{FIX_IMAGES}`)")


def _images_unknown(entries: dict[str, Any], lock_status: str) -> list[ImageStatus]:
    return [ImageStatus(name=n, status="not_built", tag=(entries.get(n) or {}).get("tag"),
                        locked_id=(entries.get(n) or {}).get("id"), message="Docker engine not reachable")
            for n in IMAGE_NAMES]


def gpu_runtime_of(info: dict[str, Any]) -> Literal["nvidia", "cdi"] | None:
    """How this engine gives GPUs to containers, from `docker info`: the nvidia runtime, CDI specs for
    nvidia.com/gpu, or neither. The hardware check and the Docker runtime both decide by this."""
    if "nvidia" in (info.get("Runtimes") or {}):
        return "nvidia"
    if _cdi_has_nvidia(info.get("CDISpecDirs") or []):
        return "cdi"
    return None


def _cdi_has_nvidia(dirs: list[str]) -> bool:
    """CDI: a spec for nvidia.com/gpu in one of the engine's CDI directories (nvidia-ctk cdi generate)."""
    for d in dirs:
        try:
            for p in Path(d).iterdir():
                if p.suffix in (".yaml", ".yml", ".json") and "nvidia" in p.name.lower():
                    return True
        except OSError:
            continue
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


# --------------------------------------------------------------------------- disk and the whole report


def _existing(path: Path) -> Path:
    """PATH, or its nearest ancestor that exists (what a directory not made yet will live on)."""
    probe = path
    try:
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
    except OSError:  # a name too long, a link loop: the caller's statvfs says so
        pass
    return probe


def probe_disk(home: Path) -> DiskStatus:
    """Free space on the filesystem that holds HOME (store and campaigns), without creating HOME."""
    try:
        usage = shutil.disk_usage(_existing(home))
    except OSError:  # e.g. a parent we may not read: report no free space rather than fail the whole check
        return DiskStatus(path=str(home), free_bytes=0, total_bytes=0)
    return DiskStatus(path=str(home), free_bytes=usage.free, total_bytes=usage.total)


def probe_campaign_disk(home: Path, campaign: Path | None) -> DiskStatus | None:
    """Free space where CAMPAIGN's outputs go, when it is on another filesystem than HOME (None otherwise:
    the home's figure is the campaign's too)."""
    if campaign is None:
        return None
    try:
        if os.stat(_existing(Path(campaign))).st_dev == os.stat(_existing(home)).st_dev:
            return None
    except OSError:
        pass  # measured below, or reported as no space
    return probe_disk(Path(campaign))


def hardware_report(home: Path | None = None, *, nvml: Nvml | None = None,
                    docker_client_factory: Callable[[], DockerClient] | None = None,
                    image_lock: Path | None = None, campaign: Path | None = None) -> HardwareReport:
    """The machine as a run sees it; CAMPAIGN: the folder a run writes (--campaign), whose filesystem's free space
    the steps' disk needs are checked against (the home's, when it is there)."""
    home = home or default_home()
    return HardwareReport(home=str(home), gpu=probe_gpus(nvml),
                          docker=probe_docker(docker_client_factory, lock_path=image_lock, home=home),
                          disk=probe_disk(home), campaign_disk=probe_campaign_disk(home, campaign))



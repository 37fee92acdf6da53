"""What the probes found: GPUs, Docker and its images, disk (pydantic models, no I/O)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


GIB = 1024**3
MEMORY_SLACK = 0.97  # a GPU meets a nominal class when total >= 97% of it (see module docstring)
IMAGE_NAMES = ("train", "infer", "score")
FIX_IMAGES = "make appliance"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- report models


class GpuInfo(_Model):
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    memory_free_bytes: int
    compute_capability: str | None  # "9.0"
    mig_mode: Literal["enabled", "disabled", "n/a"] = "n/a"
    ecc_volatile_uncorrected: int | None = None  # None: ECC not supported/enabled
    nvlink_links_up: int = 0

    @property
    def mig_enabled(self) -> bool:
        return self.mig_mode == "enabled"

    @property
    def memory_total_gib(self) -> float:
        return self.memory_total_bytes / GIB


GpuStatusName = Literal["ok", "no_driver", "driver_mismatch", "no_devices", "no_library", "error"]


class GpuStatus(_Model):
    status: GpuStatusName
    message: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # "12.8"
    gpus: list[GpuInfo] = Field(default_factory=list)


ImageStatusName = Literal["present", "different", "not_built"]


class ImageStatus(_Model):
    name: str  # lock key: train, infer, score
    status: ImageStatusName
    tag: str | None = None
    locked_id: str | None = None
    found_id: str | None = None
    message: str


class DockerStatus(_Model):
    status: Literal["ok", "unreachable", "no_library"]
    message: str
    version: str | None = None
    gpu_runtime: Literal["nvidia", "cdi"] | None = None
    lock_status: Literal["ok", "missing", "unreadable"] = "missing"
    lock_path: str | None = None
    lock_message: str = ""
    lock_flavor: str | None = None  # "gpu" or "cpu": the flavour `make appliance` built
    images: list[ImageStatus] = Field(default_factory=list)

    def image(self, name: str) -> ImageStatus | None:
        return next((i for i in self.images if i.name == name), None)


class DiskStatus(_Model):
    path: str  # the directory whose filesystem holds store/ and campaigns/
    free_bytes: int
    total_bytes: int

    @property
    def free_gib(self) -> float:
        return self.free_bytes / GIB


class HardwareReport(_Model):
    home: str
    gpu: GpuStatus
    docker: DockerStatus
    disk: DiskStatus
    # the campaign's filesystem, where a run's outputs go, when --campaign puts it on another one than the home's
    campaign_disk: DiskStatus | None = None

    @property
    def gpus(self) -> list[GpuInfo]:
        return self.gpu.gpus



"""Hardware check: GPUs (NVML), Docker (engine, GPU runtime, stage images), disk — and per-step verdicts.

The probes are the only I/O here, each behind a small seam that tests replace
at the narrowest edge: ``probe_gpus(nvml=...)`` takes the pynvml module (or a
fake exposing the same functions and the real exception classes),
``probe_docker(client_factory=...)`` takes a callable returning a docker-py
client. Everything after the probes — :func:`check_recipe` and the
requirements it applies — is a pure function of a :class:`HardwareReport`.

A machine without a driver, with a driver/library mismatch, with zero GPUs,
without Docker or without built images is a *status* with a plain explanation
and the command that fixes it, never an exception.

GPU requirements per model size (REQUIREMENTS below) and why
------------------------------------------------------------
All model work is bf16 (the release serves and trains in bf16), so every GPU
step needs compute capability >= 8.0 (Ampere or newer: bf16 tensor cores, and
FlashAttention 2). Memory is stated per GPU for one *model endpoint* (one
vLLM server or one trainer); ``tp`` GPUs form one endpoint (tensor parallel
for inference, sharded states for training). Sizes are nominal card classes
(24, 40, 48, 80 GiB); a GPU meets a class when its total memory is within 3%
of it, because drivers report slightly less than the marketed decimal GB
(an RTX 4090 shows 23.99 GiB, an H100 80GB 79.65 GiB).

Inference, profile ``generate`` (vLLM, one endpoint per GPU group). The
longest request of trace_eval_v1 is an image at the suite's 12,845,056-pixel
bound (16,384 vision tokens after the 2x2 patch merge) plus max_tokens 4,096
of output: about 20,600 tokens of KV cache.
- 3B (Qwen2.5-VL-3B: 3.75e9 parameters, bf16 weights 7.0 GiB; KV cache
  36 KiB/token = 36 layers x 2 KV heads x 128 dims x 2 (K,V) x 2 bytes, so
  0.72 GiB per full-length request): weights + vision-encoder profiling
  (~4 GiB) + 8 concurrent full-length requests (5.8 GiB) + CUDA context and
  graphs (~2 GiB) ≈ 19 GiB → 1 GPU with >= 24 GiB (tp 1).
- 7B (Qwen2.5-VL-7B: 8.29e9 parameters, bf16 weights 15.5 GiB; KV cache
  56 KiB/token = 28 layers x 4 KV heads x 128 x 2 x 2 bytes, 1.1 GiB per
  full-length request): 15.5 + ~5 + 8 x 1.1 + ~2 ≈ 31 GiB → 1 GPU with
  >= 40 GiB (tp 1); otherwise tp 2 on two >= 24 GiB GPUs (weights split
  7.8 GiB each; 4 KV heads divide by 2).
Scoring, profile ``judge`` (Qwen3-32B, temperature 0, short outputs <= 512
tokens): bf16 weights 61 GiB, KV 256 KiB/token (64 layers x 8 KV heads x 128
x 2 x 2 bytes) → 1 GPU with >= 80 GiB (tp 1, ~11 GiB left for KV at vLLM's 0.90
memory utilisation, ~44k tokens), or tp 2 on >= 40 GiB, or tp 4 on >= 24 GiB. The run plan
(trace_tui.plan.judge_groups) derives the judge's tp from the same need on each GPU's reported
memory, among the sizes that divide its 64 attention and 8 KV heads; a test keeps the two equal.
Training, profile ``train`` (one GRPO step, TRL, in one process on one GPU —
the smoke worker does not shard): the worker's own estimate
(``trace_tui.gpu_needs.smoke_requirement``): bf16 weights, gradients
and AdamW moments at 8 bytes per parameter, the rollout KV cache for 16 prompts
x 8 rollouts x 4,096 tokens, and activations → 3B: 1 GPU with >= 55 GiB;
7B: 1 GPU with >= 98 GiB (an H200 or B200; an 80 GiB H100 cannot hold it
without sharding, which upstream did with FSDP over 8 GPUs). With room for
fp32 master weights (3B: ~83 GiB) the worker keeps them, as upstream did.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_tui.common.images_lock import read_image_lock

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe_schema import ResolvedRecipe, Step

GIB = 1024**3
MEMORY_SLACK = 0.97  # a GPU meets a nominal class when total >= 97% of it (see module docstring)
IMAGE_NAMES = ("train", "infer", "score")
FIX_IMAGES = "make appliance"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- requirements


class EndpointOption(_Model):
    tp: int  # GPUs per endpoint
    min_gib: int  # nominal memory class per GPU


class ProfileRequirement(_Model):
    what: str  # "7B model endpoint", "judge endpoint (Qwen3-32B)", ...
    options: list[EndpointOption]  # in order of preference (fewest GPUs first)
    compute_capability: str = "8.0"


# profile -> scale -> requirement. The arithmetic behind each number is in the
# module docstring; tests/test_hardware_requirements.py checks the estimates
# against these classes for both suites' settings.
REQUIREMENTS: dict[str, dict[str, ProfileRequirement]] = {
    "generate": {
        "3B": ProfileRequirement(what="3B model endpoint", options=[EndpointOption(tp=1, min_gib=24)]),
        "7B": ProfileRequirement(what="7B model endpoint",
                                 options=[EndpointOption(tp=1, min_gib=40), EndpointOption(tp=2, min_gib=24)]),
    },
    "judge": {
        "judge": ProfileRequirement(what="judge endpoint (Qwen3-32B)",
                                    options=[EndpointOption(tp=1, min_gib=80), EndpointOption(tp=2, min_gib=40),
                                             EndpointOption(tp=4, min_gib=24)]),
    },
}


def _train_requirements() -> dict[str, ProfileRequirement]:
    # The smoke step is one process on one GPU (no FSDP): its own estimate is the requirement,
    # so the check and the worker's own refusal can never disagree.
    from trace_tui.gpu_needs import smoke_requirement

    return {scale: ProfileRequirement(what=f"{scale} GRPO trainer", options=[
                EndpointOption(tp=1, min_gib=smoke_requirement(scale)["min_gpu_memory_gib"])])
            for scale in ("3B", "7B")}


REQUIREMENTS["train"] = _train_requirements()

# Constants used to *estimate* memory (GiB) per endpoint; the table above rounds
# these up to card classes. Kept as data so a test recomputes them.
MODEL_FACTS: dict[str, dict[str, float]] = {
    # params (1e9), layers, kv_heads, head_dim
    "3B": {"params_b": 3.75, "layers": 36, "kv_heads": 2, "head_dim": 128},
    "7B": {"params_b": 8.29, "layers": 28, "kv_heads": 4, "head_dim": 128},
    "judge": {"params_b": 32.8, "layers": 64, "kv_heads": 8, "head_dim": 128},
}
PIXELS_PER_VISION_TOKEN = 28 * 28  # 14x14 patches merged 2x2
CONCURRENT_FULL_LENGTH = 8  # requests of maximal length an endpoint must hold at once to make progress


def kv_bytes_per_token(scale: str) -> int:
    f = MODEL_FACTS[scale]
    return int(f["layers"] * f["kv_heads"] * f["head_dim"] * 2 * 2)  # K and V, bf16


def estimate_generate_gib(scale: str, settings: dict[str, Any]) -> float:
    """bf16 weights + vision encoder + CONCURRENT_FULL_LENGTH max-length requests + CUDA context (GiB)."""
    weights = MODEL_FACTS[scale]["params_b"] * 1e9 * 2 / GIB
    tokens = settings.get("max_image_pixels", 0) / PIXELS_PER_VISION_TOKEN + settings.get("max_tokens", 0) + 200
    kv = CONCURRENT_FULL_LENGTH * tokens * kv_bytes_per_token(scale) / GIB
    encoder = 4.0 if scale == "3B" else 5.0
    return weights + encoder + kv + 2.0


def required_tp(profile: str, scale: str, gpus: list["GpuInfo"]) -> EndpointOption | None:
    """The first endpoint option that this set of GPUs can host, or None."""
    req = REQUIREMENTS[profile][scale]
    for opt in req.options:
        if sum(1 for g in gpus if meets(g, opt.min_gib, req.compute_capability)) >= opt.tp:
            return opt
    return None


def meets(gpu: "GpuInfo", min_gib: float, compute_capability: str | None) -> bool:
    if gpu.mig_enabled:  # a MIG-partitioned GPU cannot host a whole-GPU endpoint
        return False
    if compute_capability and _cc(gpu.compute_capability) < _cc(compute_capability):
        return False
    return gpu.memory_total_bytes >= min_gib * MEMORY_SLACK * GIB


def _cc(text: str | None) -> tuple[int, int]:
    try:
        major, minor = (text or "0.0").split(".")
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


def describe_requirement(profile: str, scale: str) -> str:
    req = REQUIREMENTS[profile][scale]
    first, *rest = req.options
    text = f"needs {_gpus(first.tp)} with >= {first.min_gib} GiB per {req.what}"
    if rest:
        text += " (or " + ", or ".join(f"{_gpus(o.tp)} with >= {o.min_gib} GiB" for o in rest) + ")"
    return text


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


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

    @property
    def memory_free_gib(self) -> float:
        return self.memory_free_bytes / GIB


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

    @property
    def gpus(self) -> list[GpuInfo]:
        return self.gpu.gpus


# --------------------------------------------------------------------------- GPU probe (NVML)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe_gpus(nvml: Any = None) -> GpuStatus:
    """Read the GPUs through NVML. ``nvml`` is the pynvml module or a fake with the same functions."""
    if nvml is None:
        nvml = _default_nvml()
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


def _optional(nvml: Any, err: type[Exception], fn: Callable[..., Any], *args: Any) -> Any:
    """Call an NVML getter; NotSupported (and other per-feature errors) mean "not available", not failure."""
    try:
        return fn(*args)
    except err:
        return None


def _probe_device(nvml: Any, err: type[Exception], index: int) -> GpuInfo:
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


def _default_nvml() -> Any:
    # Tests (and the TUI's snapshot and end-to-end tests, which run the app in
    # another process) pick a fake machine from tests/fake_nvml.py by name.
    fake = os.environ.get("TRACE_TUI_FAKE_NVML")
    if fake:
        import importlib

        return importlib.import_module("fake_nvml").machine(fake)
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


# --------------------------------------------------------------------------- Docker probe


def image_lock_path(home: Path | None = None) -> Path:
    """The generated image lock: $TRACE_TUI_IMAGES_LOCK, the checkout's appliance/, or HOME/appliance/ (bundles)."""
    from trace_tui.images import images_lock_path

    return images_lock_path(home)


def _default_docker_client() -> Any:
    import docker

    return docker.from_env(timeout=10)


def probe_docker(client_factory: Callable[[], Any] | None = None, *, lock_path: Path | None = None,
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
        client = (client_factory or _default_docker_client)()
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


def _image_status(client: Any, derr: Any, name: str, entry: dict[str, Any] | None, lock_status: str,
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


def probe_disk(home: Path) -> DiskStatus:
    """Free space on the filesystem that holds HOME (store and campaigns), without creating HOME."""
    probe = home
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        usage = shutil.disk_usage(probe)
    except OSError:  # e.g. a parent we may not read: report no free space rather than fail the whole check
        return DiskStatus(path=str(home), free_bytes=0, total_bytes=0)
    return DiskStatus(path=str(home), free_bytes=usage.free, total_bytes=usage.total)


def hardware_report(home: Path | None = None, *, nvml: Any = None, docker_client_factory: Callable[[], Any] | None = None,
                    image_lock: Path | None = None) -> HardwareReport:
    from trace_tui.paths import home as default_home

    home = home or default_home()
    return HardwareReport(home=str(home), gpu=probe_gpus(nvml),
                          docker=probe_docker(docker_client_factory, lock_path=image_lock, home=home),
                          disk=probe_disk(home))


# --------------------------------------------------------------------------- per-step verdicts


Verdict = Literal["pass", "warn", "fail"]
_RANK = {"pass": 0, "warn": 1, "fail": 2}


class StepCheck(_Model):
    step: str
    verdict: Verdict
    reason: str  # one line
    notes: list[str] = Field(default_factory=list)  # every finding, worst first

    def line(self, recipe: str | None = None) -> str:
        head = f"{recipe} {self.step}" if recipe else self.step
        return f"{head}: {self.verdict}: {self.reason}"


def step_scales(step: "Step", resolved: "ResolvedRecipe") -> list[str]:
    """The model sizes whose requirement applies to a step's GPU profile."""
    profile = step.needs.gpu_profile
    if profile == "judge":
        return ["judge"]
    if profile == "train":
        return [resolved.training.scale] if resolved.training else []
    if profile == "generate":
        scales = {m.scale for m in resolved.models if m.scale in REQUIREMENTS["generate"]}
        # most demanding first, so a one-line failure names the binding requirement
        return sorted(scales, key=lambda s: -REQUIREMENTS["generate"][s].options[0].min_gib)
    return []


def check_step(step: "Step", resolved: "ResolvedRecipe", report: HardwareReport, *,
               runtime: Literal["docker", "local"] = "docker", earlier_disk_gib: float = 0) -> StepCheck:
    """One step's verdict. ``earlier_disk_gib``: what the recipe's earlier steps write first (disk adds up)."""
    findings: list[tuple[Verdict, str]] = []
    needs = step.needs
    gpus = report.gpus
    scales = step_scales(step, resolved)

    # GPUs
    # Without a profile, gpus/gpu_memory_gib are the requirement; with one, the profile's table is
    # (the step's gpus is then the floor the engine starts with, always covered by the table).
    explicit = needs.gpus > 0 and not needs.gpu_profile
    if scales or explicit:
        if report.gpu.status != "ok":
            what = (describe_requirement(needs.gpu_profile, scales[0]) if scales
                    else f"needs {_gpus(needs.gpus)} with >= {needs.gpu_memory_gib:g} GiB")
            findings.append(("fail", f"{what}; found none ({report.gpu.message.split(':')[0]})"))
        else:
            for scale in scales:
                opt = required_tp(needs.gpu_profile, scale, gpus)
                if opt is None:
                    findings.append(("fail", f"{describe_requirement(needs.gpu_profile, scale)}; found "
                                             f"{_found(gpus, needs.compute_capability)}"))
                    continue
                eligible = [g for g in gpus if meets(g, opt.min_gib, REQUIREMENTS[needs.gpu_profile][scale].compute_capability)]
                groups = len(eligible) // opt.tp
                findings.append(("pass", f"{groups} {REQUIREMENTS[needs.gpu_profile][scale].what}"
                                         f"{'s' if groups != 1 else ''} on {len(eligible)} GPU"
                                         f"{'s' if len(eligible) != 1 else ''} (tp {opt.tp})"))
                busy = [g.index for g in eligible if g.memory_free_bytes < opt.min_gib * MEMORY_SLACK * GIB * 0.9]
                if busy:
                    findings.append(("warn", f"GPU {', '.join(map(str, busy))} has less free memory than "
                                             f"{opt.min_gib} GiB now (other processes are using it)"))
            if explicit:
                ok = [g for g in gpus if meets(g, needs.gpu_memory_gib, needs.compute_capability)]
                if len(ok) < needs.gpus:
                    findings.append(("fail", f"needs {_gpus(needs.gpus)} with >= {needs.gpu_memory_gib:g} GiB; "
                                             f"found {_found(gpus, needs.compute_capability)}"))
            ecc = [g.index for g in gpus if (g.ecc_volatile_uncorrected or 0) > 0]
            if ecc:
                findings.append(("warn", f"GPU {', '.join(map(str, ecc))} reports volatile uncorrectable ECC errors "
                                         "(reset the GPU or reboot before a long run)"))
            mig = [g.index for g in gpus if g.mig_enabled]
            if mig:
                findings.append(("warn", f"GPU {', '.join(map(str, mig))} has MIG enabled and is not used "
                                         "(disable with `nvidia-smi -i N -mig 0`)"))
        if step.image and runtime == "docker" and report.docker.status == "ok" and report.docker.gpu_runtime is None:
            findings.append(("fail", "Docker has no GPU runtime (install nvidia-container-toolkit: nvidia runtime or CDI)"))

    # image
    if step.image and runtime == "docker":
        key = step.image
        flavor = report.docker.lock_flavor
        if report.docker.status != "ok":
            findings.append(("fail", f"image {key}: {report.docker.message}"))
        else:
            img = report.docker.image(key)
            if img is None or img.status == "not_built":
                why = img.message if img else f"not built (run `{FIX_IMAGES}`)"
                findings.append(("fail", f"image {key} {why}" if why.startswith("not built") else f"image {key}: {why}"))
            elif img.status == "different":
                findings.append(("warn", f"image {key}: {img.message}"))
            else:
                findings.append(("pass", f"image {key} present"))
            # A step that uses GPUs needs the gpu build; CPU steps run on either (CUDA torch runs on CPU too).
            if img is not None and img.status != "not_built" and (scales or explicit) and flavor == "cpu":
                findings.append(("fail", f"image {key} is the cpu flavour; this recipe needs the gpu build "
                                         f"(`{FIX_IMAGES}` on a host with the NVIDIA runtime)"))

    # disk
    if needs.disk_gib:
        total = needs.disk_gib + earlier_disk_gib
        with_earlier = f" ({total:g} GiB with the earlier steps)" if earlier_disk_gib else ""
        if report.disk.free_bytes < total * GIB:
            findings.append(("fail", f"needs {needs.disk_gib:g} GiB free under {report.disk.path}{with_earlier}; "
                                     f"{report.disk.free_gib:.1f} GiB free"))
        else:
            findings.append(("pass", f"{report.disk.free_gib:.0f} GiB free >= {total:g} GiB"))

    if needs.network:
        findings.append(("pass", "needs network (or a bundle import: `trace-tui bundle import DIR`)"))
    if not findings:
        findings.append(("pass", "runs on the host" if step.stage == "host" else "runs on CPU"))
    findings.sort(key=lambda f: -_RANK[f[0]])
    verdict = findings[0][0]
    if verdict == "pass":
        reason = "; ".join(r for _, r in findings)
    else:
        others = sum(1 for v, _ in findings[1:] if v != "pass")
        reason = findings[0][1] + (f" (+{others} more)" if others else "")
    return StepCheck(step=step.id, verdict=verdict, reason=reason, notes=[f"{v}: {r}" for v, r in findings])


def _found(gpus: list[GpuInfo], cc: str | None) -> str:
    if not gpus:
        return "none"
    parts = [f"{g.name} {g.memory_total_gib:.0f} GiB"
             + (" (MIG)" if g.mig_enabled else "")
             + (f" (cc {g.compute_capability} < {cc})" if cc and _cc(g.compute_capability) < _cc(cc) else "")
             for g in gpus]
    uniq = list(dict.fromkeys(parts))
    return ", ".join(f"{parts.count(p)}x {p}" for p in uniq)


def check_recipe(resolved: "ResolvedRecipe", report: HardwareReport, *,
                 runtime: Literal["docker", "local"] = "docker") -> list[StepCheck]:
    """pass/warn/fail with a one-line reason for every step of a resolved recipe on this hardware."""
    out, written = [], 0.0
    for step in resolved.recipe.steps:
        out.append(check_step(step, resolved, report, runtime=runtime, earlier_disk_gib=written))
        written += step.needs.disk_gib
    return out


def worst(checks: list[StepCheck]) -> Verdict:
    return max((c.verdict for c in checks), key=lambda v: _RANK[v], default="pass")


__all__ = [
    "DiskStatus", "DockerStatus", "EndpointOption", "GpuInfo", "GpuStatus", "HardwareReport", "ImageStatus",
    "REQUIREMENTS", "StepCheck", "check_recipe", "check_step", "describe_requirement", "estimate_generate_gib",
    "gpu_runtime_of", "hardware_report", "image_lock_path", "meets", "probe_disk", "probe_docker", "probe_gpus",
    "read_image_lock", "required_tp", "worst",
]

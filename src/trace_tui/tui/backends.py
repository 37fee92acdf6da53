"""The app's backends, received through its constructor (as Harlequin receives its adapter).

Tests pass real backends or narrow fakes (a fake NVML, a small recipe); the
command line builds :func:`default_backends` from its arguments. Every field
is a plain callable so that no screen imports Docker, NVML or the engine.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization: int  # percent
    memory_used_gib: float
    memory_total_gib: float


@dataclass
class Backends:
    # -> trace_tui.hardware.HardwareReport (or anything views.hardware_view reads)
    hardware_probe: Callable[[], Any]
    # -> list[GpuSample]; called every second or two on the run screen
    gpu_sampler: Callable[[], list[GpuSample]]
    known_recipes: Callable[[], list[str]]
    load_recipe: Callable[[str], Any]
    resolve_recipe: Callable[[Any], Any]
    # (resolved, report) -> list[StepCheck]
    check_recipe: Callable[[Any, Any], list[Any]]
    # resolved -> configuration-only preview (data with lines/fields)
    preview: Callable[[Any], Any]
    # (resolved, campaign_dir, skip_steps) -> an object with run(on_event) and cancel()
    runner_factory: Callable[..., Any]
    campaign_dir_for: Callable[[Any], Path]
    # campaign_dir -> (resolved, step states) of an existing campaign, or None
    open_campaign: Callable[[Path], Any]
    verify_release: Callable[[Path], Any]
    verify_campaign: Callable[[Path], Any]
    release_dir: Path | None = None
    home: Path | None = None
    # the run screen's clock (rates, ETAs); tests inject a fixed one for deterministic snapshots
    clock: Callable[[], float] = time.monotonic
    extra: dict[str, Any] = field(default_factory=dict)


def nvml_sampler(nvml: Any = None) -> Callable[[], list[GpuSample]]:
    """GPU utilisation and memory per GPU; an empty list when NVML has no driver."""
    state: dict[str, Any] = {"init": False, "broken": False}

    def sample() -> list[GpuSample]:
        nonlocal nvml
        if state["broken"]:
            return []
        try:
            if nvml is None:
                import pynvml as nvml_mod

                nvml = nvml_mod
            if not state["init"]:
                nvml.nvmlInit()
                state["init"] = True
            out = []
            for i in range(nvml.nvmlDeviceGetCount()):
                h = nvml.nvmlDeviceGetHandleByIndex(i)
                util = nvml.nvmlDeviceGetUtilizationRates(h)
                mem = nvml.nvmlDeviceGetMemoryInfo(h)
                out.append(GpuSample(i, int(util.gpu), mem.used / 2**30, mem.total / 2**30))
            return out
        except Exception:  # noqa: BLE001 - no driver / no GPU: the panel says so, never a traceback
            state["broken"] = True
            return []

    return sample


def default_backends(args: argparse.Namespace | None = None) -> Backends:
    """The real backends: NVML, Docker, the recipes, the engine, verify."""
    from trace_tui import paths

    home = paths.home(getattr(args, "home", None))
    release = os.environ.get("TRACE_RELEASE_DIR") or getattr(args, "release_dir", None)
    runtime_name = getattr(args, "runtime", None) or "docker"

    def hardware_probe() -> Any:
        from trace_tui import hardware

        return hardware.hardware_report(home=home) if _accepts(hardware.hardware_report, "home") \
            else hardware.hardware_report()

    def known() -> list[str]:
        from trace_tui import recipes

        return recipes.known_recipes()

    def load(name: str) -> Any:
        from trace_tui import recipes

        return recipes.load_recipe(name)

    def resolve(recipe: Any) -> Any:
        from trace_tui import recipes

        return recipes.resolve_recipe(recipe, models=getattr(args, "models", None),
                                      seeds=getattr(args, "seeds", None),
                                      benchmarks=getattr(args, "benchmarks", None))

    def check(resolved: Any, report: Any) -> list[Any]:
        from trace_tui import hardware

        return hardware.check_recipe(resolved, report)

    def preview(resolved: Any) -> Any:
        from trace_tui import preview as preview_mod

        return preview_mod.build_preview(resolved)

    def campaign_dir_for(resolved: Any) -> Path:
        if getattr(args, "campaign", None):
            return Path(args.campaign).expanduser().resolve()
        return paths.campaigns_dir(home) / resolved.run_tag

    def runner_factory(resolved: Any, campaign_dir: Path, skip: frozenset[str] = frozenset()) -> Any:
        from trace_tui import engine, runtime

        campaign = engine.Campaign.open(campaign_dir, resolved) if hasattr(engine.Campaign, "open") \
            else engine.Campaign(campaign_dir, resolved)
        rt = runtime.LocalRuntime() if runtime_name == "local" else runtime.DockerRuntime()
        kwargs: dict[str, Any] = {}
        if skip and _accepts(engine.Runner, "skip"):
            kwargs["skip"] = set(skip)
        return engine.Runner(resolved, campaign, rt, **kwargs)

    def open_campaign(campaign_dir: Path) -> Any:
        from trace_tui import engine

        return engine.Campaign.load(campaign_dir) if hasattr(engine.Campaign, "load") else None

    def verify_release(path: Path) -> Any:
        from trace_tui import verify

        return verify.verify_release(path)

    def verify_campaign(path: Path) -> Any:
        from trace_tui import verify

        return verify.verify_campaign(path)

    return Backends(
        hardware_probe=hardware_probe, gpu_sampler=nvml_sampler(), known_recipes=known,
        load_recipe=load, resolve_recipe=resolve, check_recipe=check, preview=preview,
        runner_factory=runner_factory, campaign_dir_for=campaign_dir_for, open_campaign=open_campaign,
        verify_release=verify_release, verify_campaign=verify_campaign,
        release_dir=Path(release).expanduser().resolve() if release else None, home=home,
    )


def _accepts(fn: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False

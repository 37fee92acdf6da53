"""What a run needs from this machine and the store, checked before anything starts (exit 3), and the run's one
GPU plan: the same for a headless run, a Slurm shard and the TUI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the pydantic models, loaded where a check runs
    from trace_tui.gpu_plan import RunPlan
    from trace_tui.hardware.report import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.runtime.base import Runtime
    from trace_tui.service.preflight import Preflight


def probe_hardware(home: Path, campaign: Path | None = None) -> HardwareReport:
    """GPUs, Docker, images and disk; the disk needs are those of CAMPAIGN, where the outputs go."""
    from trace_tui.hardware import hardware_report  # pydantic and NVML: only for a run

    return hardware_report(home, campaign=campaign)


def requirement_problems(resolved: ResolvedRecipe, runtime: Runtime, home: Path,
                         report: HardwareReport | None, *, offline: bool = False) -> list[str]:
    """What this machine or the store lacks for the recipe, each with the command that provides it: the failed
    items of the run's preflight (trace_tui.service.preflight).

    The runtime's own check is authoritative for Docker and images (it honours image overrides);
    the hardware check adds GPUs and disk; the store check adds missing entries that no step of
    the recipe produces itself; with OFFLINE, a step that needs the network is one.
    """
    return run_preflight(resolved, runtime, home, report, offline=offline).problems()


def run_preflight(resolved: ResolvedRecipe, runtime: Runtime, home: Path, report: HardwareReport | None, *,
                  offline: bool = False) -> Preflight:
    """Every item a run checks before it starts, by area (store, images, network, runtime, GPUs, disk)."""
    from trace_tui.service.preflight import preflight  # pydantic: only for a run

    return preflight(resolved, runtime, home, report, offline=offline)


def run_gpu_plan(resolved: ResolvedRecipe, report: HardwareReport | None) -> RunPlan | None:
    """The run's one GPU plan (trace_tui.gpu_plan.run_plan); None when there is no hardware report (the runner then
    falls back to each step's own GPU count)."""
    if report is None:
        return None
    from trace_tui.gpu_plan import run_plan  # pydantic: only for a run

    return run_plan(resolved, report)

"""What a run needs from this machine and the store, checked before anything starts (exit 3), and the run's one
GPU plan: the same for a headless run, a Slurm shard and the TUI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.engine.planner import needs_gpus

if TYPE_CHECKING:  # pragma: no cover - the pydantic models, loaded where a check runs
    from trace_tui.gpu_plan import RunPlan
    from trace_tui.hardware.report import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.runtime.base import Runtime


def probe_hardware(home: Path, campaign: Path | None = None) -> HardwareReport:
    """GPUs, Docker, images and disk; the disk needs are those of CAMPAIGN, where the outputs go."""
    from trace_tui.hardware import hardware_report  # pydantic and NVML: only for a run

    return hardware_report(home, campaign=campaign)


def requirement_problems(resolved: ResolvedRecipe, runtime: Runtime, home: Path,
                         report: HardwareReport | None) -> list[str]:
    """What this machine or the store lacks for the recipe, each with the command that provides it.

    The runtime's own check is authoritative for Docker and images (it honours image overrides);
    the hardware check adds GPUs and disk; the store check adds missing entries that no step of
    the recipe produces itself.
    """
    from trace_tui.hardware import check_recipe  # pydantic: only for a run
    from trace_tui.store.store import missing_entries

    problems = list(runtime.check({s.image for s in resolved.recipe.steps if s.image},
                                  gpus=any(needs_gpus(s) for s in resolved.recipe.steps)))
    if report is not None:
        for chk in check_recipe(resolved, report, runtime=runtime.name):
            for note in chk.notes:
                verdict, _, text = note.partition(": ")
                # images and Docker: the runtime said it above (with its image overrides)
                if verdict == "fail" and not text.startswith(("image ", "Docker has no GPU runtime")):
                    problems.append(f"{chk.step}: {text}")
    produced = {o for s in resolved.recipe.steps for o in s.outputs}
    wanted = [e for e in resolved.all_store_entries() if e not in produced]
    if wanted:
        for name, fix in missing_entries(home, wanted):
            problems.append(f"the store lacks {name} (run `{fix}`)")
        problems += untrusted_pins(home, wanted)
    return problems


def untrusted_pins(home: Path, names: list[str]) -> list[str]:
    """A pinned entry the store holds at local trust (files that vouch only for themselves, such as a copied
    Hugging Face cache of a model whose hashes the release does not publish) is not the pinned model as far
    as anyone can tell: the recipe refuses it, saying how to get one that is."""
    from trace_tui.paths import store_dir
    from trace_tui.release import release_lock
    from trace_tui.store.names import parse
    from trace_tui.store.store import Store
    from trace_tui.store.trust import LOCAL, entry_trust

    store, lock = Store(store_dir(home)), release_lock()
    out = []
    for name in names:
        record = store.record(name) if parse(name).pinned else None
        if record is not None and entry_trust(record, lock) == LOCAL:
            out.append(f"the store's {name} is local trust: nothing but its own files vouches for them (imported "
                       f"from {record.source.imported_from or 'a copy'}; the release publishes no hashes for it); "
                       f"run `trace-tui store fetch --entry {name}`, or import it from a bundle signed by a key this "
                       "site trusts")
    return out


def run_gpu_plan(resolved: ResolvedRecipe, report: HardwareReport | None) -> RunPlan | None:
    """The run's one GPU plan (trace_tui.gpu_plan.run_plan); None when there is no hardware report (the runner then
    falls back to each step's own GPU count)."""
    if report is None:
        return None
    from trace_tui.gpu_plan import run_plan  # pydantic: only for a run

    return run_plan(resolved, report)

"""The GPU plan: which slices go to which GPU group (a pure function, reused by the engine).

A *group* is the set of GPUs that hosts one model endpoint (one vLLM server):
``tp`` GPUs for tensor parallelism. The plan takes the GPUs that meet the
generation requirement of every selected model size (trace_tui.hardware.
REQUIREMENTS["generate"]), picks the tensor-parallel size the largest model
needs on them (tp 1 for 3B, and for 7B on >= 40 GiB GPUs; tp 2 for 7B on
24 GiB GPUs), forms ``groups = GPUs // tp`` groups of consecutive GPU indices
(neighbours share NVLink/PCIe switches on common servers), and deals each
model's slices across all groups (as the release evaluator's GPU_GROUPS pool
serves one model at a time on every group), balancing rows (see below).

A recipe whose generation runs on CPU (the demo) gets one group with no GPUs.
A machine that cannot host the generation gets an empty plan; the hardware
check says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from trace_tui.hardware import REQUIREMENTS, meets, required_tp
from trace_tui.recipes import SliceKey

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.hardware import HardwareReport
    from trace_tui.recipes import ResolvedRecipe


class GpuGroup(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: list[int]  # GPU indices; empty: CPU
    slices: list[SliceKey]
    rows: int = 0

    @property
    def tp(self) -> int:
        return len(self.gpus)

    @property
    def spec(self) -> str:
        """The release evaluator's GPU_GROUPS item: "0" or "0,1"; "cpu" for a CPU group."""
        return ",".join(map(str, self.gpus)) if self.gpus else "cpu"


def generation_profile(resolved: "ResolvedRecipe") -> str | None:
    """The GPU profile of the step that generates (the first infer step), or None when it runs on CPU."""
    for step in resolved.recipe.steps:
        if step.stage == "infer":
            return step.needs.gpu_profile
    return None


def gpu_plan(resolved: "ResolvedRecipe", report: "HardwareReport") -> list[GpuGroup]:
    """Slices of ``resolved`` dealt to GPU groups of ``report``; [] when the GPUs cannot host the models."""
    if not resolved.slices:
        return []
    profile = generation_profile(resolved)
    if profile is None or profile not in REQUIREMENTS:
        return [GpuGroup(gpus=[], slices=list(resolved.slices), rows=resolved.rows_total)]
    table = REQUIREMENTS[profile]
    scales = list(dict.fromkeys(resolved.model_scale(m) for m in dict.fromkeys(s.model for s in resolved.slices)))
    if any(scale not in table for scale in scales):  # e.g. a tiny local model under a GPU profile
        return [GpuGroup(gpus=[], slices=list(resolved.slices), rows=resolved.rows_total)]
    gpus = report.gpus if report.gpu.status == "ok" else []
    options = {}
    for scale in scales:
        opt = required_tp(profile, scale, gpus)
        if opt is None:
            return []
        options[scale] = opt
    tp = max(o.tp for o in options.values())
    eligible = [g.index for g in gpus
                if all(meets(g, o.min_gib, table[s].compute_capability) for s, o in options.items())]
    n_groups = len(eligible) // tp
    if n_groups == 0:
        return []
    members = [eligible[i * tp:(i + 1) * tp] for i in range(n_groups)]
    dealt: list[list[SliceKey]] = [[] for _ in members]
    order = {m: i for i, m in enumerate(dict.fromkeys(s.model for s in resolved.slices))}
    rows = {b.key: b.rows for b in resolved.benchmarks}
    # Model by model, largest slice first, each to the group with the fewest
    # rows so far (ties: lowest group). Plain round-robin over the suite's
    # order would pin a benchmark to the same group for every seed (24
    # benchmarks x 3 seeds over 8 groups): 3.6x between the busiest and the
    # idlest group on the paper matrix; this deal keeps it within a few percent,
    # still spreads every model over every group, and still gives TRACE
    # validation's one slice per model a group each.
    load = [0] * n_groups
    for model in order:
        mine = [s for s in resolved.slices if s.model == model]
        for s in sorted(mine, key=lambda k: -rows[k.benchmark]):
            g = min(range(n_groups), key=lambda i: (load[i], i))
            dealt[g].append(s)
            load[g] += rows[s.benchmark]
    return [GpuGroup(gpus=m, slices=d, rows=sum(rows[s.benchmark] for s in d)) for m, d in zip(members, dealt)]


def gpu_groups_env(plan: list[GpuGroup]) -> str:
    """GPU_GROUPS for the release evaluator: space-separated groups ("0 1 2 3" or "0,1 2,3")."""
    return " ".join(g.spec for g in plan if g.gpus)


__all__ = ["GpuGroup", "generation_profile", "gpu_groups_env", "gpu_plan"]

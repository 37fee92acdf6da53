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

:func:`run_plan` is the run's one plan, for every step: the generation groups
above, the judge's own groups (:func:`judge_groups`: its tensor-parallel size
from its own memory need and head counts, never the generation groups), a
trainer's GPU, or a refusal with the hardware check's reason. Headless runs,
the TUI, ``preview`` and ``status`` all read it; the runner gives each step's
containers exactly its groups (a per-slice container one group, a whole-step
container all of them, numbered from 0 inside, as the release launcher's
GPU_GROUPS). A ``keep_loaded`` step (the judge's extraction) runs one container
per group, which loads its model once and serves that group's slices in turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from trace_tui.hardware import REQUIREMENTS, check_step, kv_bytes_per_token, meets, required_tp, step_scales
from trace_tui.recipe.schema import SliceKey, Step

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.hardware import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe


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


# --------------------------------------------------------------------------- the judge's own plan

# Qwen3-32B (config.json of Qwen/Qwen3-32B): 64 layers, 64 attention heads, 8 KV heads of 128 dims,
# 32.8e9 parameters. vLLM shards attention heads over tensor-parallel ranks (heads % tp == 0) and
# partitions the KV heads when kv_heads >= tp, so tp is a power of two up to 8.
JUDGE_ATTENTION_HEADS = 64
JUDGE_KV_HEADS = 8
JUDGE_WEIGHTS_GIB = 32.8e9 * 2 / 1024**3  # bf16: 61.1 GiB
JUDGE_GPU_MEMORY_UTILIZATION = 0.90  # the release launcher's JUDGE_GPU_MEMORY_UTILIZATION
JUDGE_OVERHEAD_GIB = 2.0  # per GPU: CUDA context, activations, sampler, CUDA graphs
JUDGE_MAX_MODEL_LEN = 8192  # the release launcher's JUDGE_MAX_MODEL_LEN
JUDGE_MIN_KV_TOKENS = 2 * JUDGE_MAX_MODEL_LEN  # at least two full-length judge contexts in the KV cache


def judge_tp_sizes() -> list[int]:
    """Tensor-parallel sizes vLLM accepts for the judge: they divide both head counts (1, 2, 4, 8)."""
    return [tp for tp in range(1, JUDGE_KV_HEADS + 1)
            if JUDGE_ATTENTION_HEADS % tp == 0 and JUDGE_KV_HEADS % tp == 0]


def judge_kv_gib(tp: int, gpu_gib: float) -> float:
    """KV cache left for the judge on ``tp`` GPUs of ``gpu_gib`` each (negative: the weights do not fit)."""
    return tp * (JUDGE_GPU_MEMORY_UTILIZATION * gpu_gib - JUDGE_OVERHEAD_GIB) - JUDGE_WEIGHTS_GIB


def judge_fits(tp: int, gpu_gib: float) -> bool:
    return judge_kv_gib(tp, gpu_gib) * 1024**3 >= JUDGE_MIN_KV_TOKENS * kv_bytes_per_token("judge")


def judge_groups(report: "HardwareReport") -> list[list[int]]:
    """The judge's endpoints: the smallest tp (dividing its heads) at which it fits on enough GPUs,
    as many groups of tp consecutive eligible GPUs as there are; [] when no tp fits."""
    gpus = report.gpus if report.gpu.status == "ok" else []
    cc = REQUIREMENTS["judge"]["judge"].compute_capability
    for tp in judge_tp_sizes():
        eligible = [g.index for g in gpus if meets(g, 0, cc) and judge_fits(tp, g.memory_total_gib)]
        if len(eligible) >= tp:
            return [eligible[i * tp:(i + 1) * tp] for i in range(len(eligible) // tp)]
    return []


# --------------------------------------------------------------------------- the run's plan: every step


class StepGpus(BaseModel):
    """What one step's containers are given: GPU groups (host indices, one endpoint each), or why it cannot run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str
    role: str  # "generation", "judge", "trainer", "gpus", "cpu", "host"
    per_slice: bool
    keep_loaded: bool = False  # per slice, but one container per group serves its share of the slices in turn
    groups: list[list[int]] = []
    refusal: str | None = None

    @property
    def tp(self) -> int:
        return len(self.groups[0]) if self.groups else 0

    @property
    def devices(self) -> list[int]:
        """Every host GPU the step uses (a whole-step container gets them all; a per-slice one, one group)."""
        return sorted({g for grp in self.groups for g in grp})

    def container_groups(self, given: list[int]) -> list[list[int]]:
        """The step's groups among host GPUs ``given``, as the container sees them (numbered 0..n-1 inside)."""
        index = {g: i for i, g in enumerate(given)}
        return [[index[g] for g in grp] for grp in self.groups if grp and all(g in index for g in grp)]

    def gpu_groups_env(self) -> str:
        """GPU_GROUPS inside one of the step's containers ("0 1", "0,1 2,3"; a per-slice one: "0" or "0,1")."""
        if not self.groups:
            return ""
        if self.per_slice:
            return ",".join(str(i) for i in range(self.tp))
        return " ".join(",".join(map(str, grp)) for grp in self.container_groups(self.devices))

    def line(self) -> str:
        if self.refusal:
            return f"{self.step}: refused: {self.refusal}"
        if not self.groups:
            return f"{self.step}: {'host' if self.role == 'host' else 'CPU'}"
        groups = " ".join(",".join(map(str, g)) for g in self.groups)
        n = len(self.groups)
        where = ("one container per group, its share of the slices in turn" if self.per_slice and self.keep_loaded
                 else "one container per slice on one group" if self.per_slice
                 else f"one container with GPU {','.join(map(str, self.devices))}")
        return (f"{self.step}: {self.role}, {n} group{'s' if n != 1 else ''} of tp {self.tp} (GPU {groups}); "
                f"{where}, GPU_GROUPS=\"{self.gpu_groups_env()}\"")


class RunPlan(BaseModel):
    """One GPU plan for a run (headless, the TUI, preview and status read this same object)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generation: list[GpuGroup] = []
    steps: list[StepGpus] = []

    def step(self, step_id: str) -> StepGpus | None:
        return next((s for s in self.steps if s.step == step_id), None)

    def slice_groups(self) -> dict[str, int]:
        """slice id -> index of the generation group it was dealt to."""
        out: dict[str, int] = {}
        for i, g in enumerate([g for g in self.generation if g.gpus]):
            for s in g.slices:
                out[s.id] = i
        return out

    def lines(self) -> list[str]:
        """One line per step: its groups, tp and the GPU_GROUPS a container gets, or the refusal."""
        return [s.line() for s in self.steps]


def _step_needs_gpus(step: Step) -> bool:
    return bool(step.image) and (step.needs.gpus > 0 or step.needs.gpu_profile is not None)


def run_plan(resolved: "ResolvedRecipe", report: "HardwareReport") -> RunPlan:
    """Every step's GPU groups on this machine: generation from :func:`gpu_plan`, the judge from
    :func:`judge_groups`, a trainer on its first eligible GPU. A step this machine cannot host gets a
    refusal (the hardware check's reason), never a guess."""
    generation = gpu_plan(resolved, report)
    steps: list[StepGpus] = []
    for step in resolved.recipe.steps:
        profile = step.needs.gpu_profile
        base = {"step": step.id, "per_slice": step.per_slice, "keep_loaded": step.keep_loaded}
        if not _step_needs_gpus(step):
            steps.append(StepGpus(**base, role="host" if step.stage == "host" else "cpu"))
            continue
        scales = step_scales(step, resolved)
        if profile in REQUIREMENTS and not all(s in REQUIREMENTS[profile] for s in scales):
            steps.append(StepGpus(**base, role="cpu"))  # a tiny local model under a GPU profile
            continue
        groups: list[list[int]] = []
        role = {"generate": "generation", "judge": "judge", "train": "trainer"}.get(profile or "", "gpus")
        if profile == "generate":
            if generation and not generation[0].gpus:
                steps.append(StepGpus(**base, role="cpu"))
                continue
            groups = [list(g.gpus) for g in generation]
        elif profile == "judge":
            groups = judge_groups(report)
        elif profile == "train" and scales:
            gpus = report.gpus if report.gpu.status == "ok" else []
            opt = required_tp("train", scales[0], gpus)
            if opt is not None:
                req = REQUIREMENTS["train"][scales[0]]
                groups = [[g.index for g in gpus if meets(g, opt.min_gib, req.compute_capability)][:opt.tp]]
        elif profile is None:
            gpus = report.gpus if report.gpu.status == "ok" else []
            ok = [g.index for g in gpus if meets(g, step.needs.gpu_memory_gib, step.needs.compute_capability)]
            if len(ok) >= step.needs.gpus:
                groups = [ok[:step.needs.gpus]]
        if not groups:
            chk = check_step(step, resolved, report)
            reason = next((n.split(": ", 1)[1] for n in chk.notes if n.startswith("fail: ")
                           and not n.startswith(("fail: image ", "fail: Docker"))), None)
            steps.append(StepGpus(**base, role=role, refusal=reason or "no GPU on this machine can host it"))
            continue
        steps.append(StepGpus(**base, role=role, groups=groups))
    return RunPlan(generation=generation, steps=steps)


__all__ = ["GpuGroup", "JUDGE_ATTENTION_HEADS", "JUDGE_KV_HEADS", "RunPlan", "StepGpus", "generation_profile",
           "gpu_groups_env", "gpu_plan", "judge_fits", "judge_groups", "judge_kv_gib", "judge_tp_sizes", "run_plan"]

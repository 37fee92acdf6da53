"""The planner: which jobs a run has, their pinned inputs and hashes, and what each must do (pure).

A job's record is keyed by the hash of its pinned inputs, so resume is a lookup: a completed job
with the same key is skipped, a partial one resumed, one whose key changed invalidated. Also here:
how a step's slices are dealt over GPU groups (single-slice queues and keep_loaded batches) and the
spec each job's worker is given. Nothing here starts a container or writes a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from trace_tui.campaign_files.state import STEP_SLICE, slice_name
from trace_tui.common.digest import canonical_json, sha256_json

if TYPE_CHECKING:  # the recipe schema (pydantic) is imported by whoever builds a Runner, not here
    from trace_tui.campaign_files.state import JobRecord, SliceRecord
    from trace_tui.engine.campaign import Campaign
    from trace_tui.recipe.schema import Recipe, ResolvedRecipe, Step


class StepGpuPlan(Protocol):
    """What the planner reads of a step's entry in the run's GPU plan (trace_tui.gpu_plan.StepGpus, a pydantic
    model this module does not import)."""

    @property
    def groups(self) -> list[list[int]]: ...

    @property
    def devices(self) -> list[int]: ...

    def container_groups(self, given: list[int]) -> list[list[int]]: ...


def needs_gpus(step: Step) -> bool:
    """A step that runs in an image and needs GPUs (a count, or a profile whose count depends on the model)."""
    return bool(step.image) and (step.needs.gpus > 0 or getattr(step.needs, "gpu_profile", None) is not None)


def dump(obj: object) -> object:
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {str(k): dump(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [dump(v) for v in obj]
    if hasattr(obj, "__dict__"):
        return {k: dump(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return str(obj)


def get_field(obj: object, key: str, default: object = None) -> Any:
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def diff_inputs(old: object, new: object, prefix: str = "") -> list[str]:
    """What changed between two pinned-input records, as 'path: old -> new' (short values)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            out += diff_inputs(old.get(k), new.get(k), f"{prefix}.{k}" if prefix else k)
        return out
    if old == new:
        return []

    def full(v: object) -> str:
        # Whole values: two image ids that differ only after their first characters must not look equal.
        return v if isinstance(v, str) else canonical_json(v)

    return [f"{prefix or 'inputs'}: {full(old)} -> {full(new)}"]


@dataclass
class PlannedJob:
    step: Step
    position: int
    slice: str
    model: str | None
    seed: int | None
    benchmark: str | None
    inputs: dict[str, Any]
    input_hash: str
    total: int
    action: str = "run"  # run | resume | skip | invalidate | repair
    reason: str = ""
    done: int = 0
    # A whole-step job that works through the slice matrix in one container: its slices, each with
    # its own pinned inputs, so resume and invalidation stay per slice.
    subs: list[PlannedJob] = field(default_factory=list)


@dataclass
class Plan:
    jobs: list[PlannedJob]

    def count(self, action: str) -> int:
        return sum(1 for j in self.jobs if j.action == action)

    def summary(self) -> str:
        text = (f"{len(self.jobs)} jobs: {self.count('skip')} complete, {self.count('resume')} to resume, "
                f"{self.count('invalidate')} invalidated, {self.count('run')} to run")
        if self.count("repair"):
            text += f", {self.count('repair')} to redo (outputs missing or damaged)"
        subs = [x for j in self.jobs for x in j.subs]
        if subs:
            n = lambda a: sum(1 for x in subs if x.action == a)
            text += (f"; {len(subs)} slices in whole-step jobs: {n('skip')} complete, {n('resume')} partial, "
                     f"{n('invalidate')} invalidated, {n('run')} to run")
        return text


def decide(job: PlannedJob, record: SliceRecord | None,
           sub_records: dict[str, SliceRecord | None] | None = None) -> PlannedJob:
    """The resume decision for one job and its slices (pure)."""
    for sub in job.subs:
        decide(sub, (sub_records or {}).get(sub.slice))
    if record is None:
        job.action, job.reason = "run", "new"
    elif record.input_hash != job.input_hash:
        changes = diff_inputs(record.inputs, job.inputs)
        job.action, job.reason = "invalidate", "pinned inputs changed: " + "; ".join(changes[:4])
    elif job.subs and any(x.action != "skip" for x in job.subs):
        todo = [x for x in job.subs if x.action != "skip"]
        inv = [x for x in todo if x.action == "invalidate"]
        job.action, job.done = "resume", record.done
        job.reason = f"{len(todo)} of {len(job.subs)} slices to do" + (f", {len(inv)} invalidated" if inv else "")
    elif record.state == "completed" and getattr(record, "receipt", "slice"):
        job.action, job.reason, job.done = "skip", "complete", record.done
    elif record.done > 0 or record.state in ("running", "failed", "cancelled"):
        job.action, job.reason, job.done = "resume", f"partial ({record.done}/{record.total})", record.done
    else:
        job.action, job.reason = "run", "pending"
    return job



def repair_damaged(plan: Plan, damaged: dict[tuple[str, str], str]) -> Plan:
    """Jobs the plan would skip whose receipt or outputs are missing or damaged (``damaged``: (step, slice) ->
    why, from campaign_files.presence) are redone ("repair": what is left of them is moved aside first), and
    with each the jobs after it on the same slice (and whole-step jobs after it), which read its outputs."""
    first: dict[str, int] = {}  # slice -> the earliest position repaired on it
    for j in plan.jobs:
        why = damaged.get((j.step.id, j.slice))
        if why is not None and j.action == "skip":
            j.action, j.reason = "repair", f"outputs damaged: {why}"
            first[j.slice] = min(first.get(j.slice, j.position), j.position)
    if first:
        earliest = min(first.values())
        for j in plan.jobs:
            at = first.get(j.slice, earliest if j.slice == STEP_SLICE else None)
            if j.action == "skip" and at is not None and j.position > at:
                j.action, j.reason = "repair", "reads outputs that are being redone"
    return plan


def deal_batches(todo: list[PlannedJob], n_groups: int) -> list[list[PlannedJob]]:
    """A keep_loaded step's slices over its groups' workers (pure): largest first, each to the worker
    with the fewest rows so far (ties: the lowest), then each batch in the plan's order. A worker
    keeps its model, so slices are not stolen between groups as single-slice jobs are."""
    batches: list[list[PlannedJob]] = [[] for _ in range(max(1, n_groups))]
    load = [0] * len(batches)
    for j in sorted(todo, key=lambda j: -max(0, j.total - j.done)):
        g = min(range(len(batches)), key=lambda i: (load[i], i))
        batches[g].append(j)
        load[g] += max(0, j.total - j.done)
    order = {id(j): i for i, j in enumerate(todo)}
    return [sorted(b, key=lambda j: order[id(j)]) for b in batches]



def tracks_slices(step: Step) -> bool:
    """Whether a whole-step job works through the slice matrix (generation and scoring do)."""
    return not step.per_slice and step.stage in ("infer", "score")


def expected_jobs(resolved: ResolvedRecipe, steps: list[Step], image_ids: dict[Any, str]) -> list[PlannedJob]:
    """Every job of the resolved recipe with its pinned inputs and their hash (``image_ids``: each step
    image's id, as its runtime reports it). A step's inputs name the previous step's hashes, so a change
    upstream reaches every job downstream."""
    settings = dump(get_field(resolved, "settings", {}) or {})
    settings_sha = sha256_json(settings)
    models = {get_field(m, "id"): dump(m) for m in (get_field(resolved, "models", []) or [])}
    benches = {get_field(b, "key"): dump(b) for b in (get_field(resolved, "benchmarks", []) or [])}
    slices = [(get_field(s, "model"), int(get_field(s, "seed")), get_field(s, "benchmark"))
              for s in get_field(resolved, "slices", [])]
    jobs: list[PlannedJob] = []
    prev: dict[str, str] | None = None  # slice (or _step) -> input hash in the previous step
    prev_step: str | None = None
    for pos, step in enumerate(steps):
        base = {"step": {"id": step.id, "run": list(step.run), "stage": step.stage},
                "image_id": image_ids[step.image], "settings_sha256": settings_sha}
        here: dict[str, str] = {}

        def slice_job(model: str, seed: int, bench: str) -> PlannedJob:
            name = slice_name(model, seed, bench)
            inputs = dict(base, model=models.get(model, {"id": model}), seed=seed,
                          benchmark=benches.get(bench, {"key": bench}))
            if prev is not None:
                inputs["upstream"] = {prev_step: prev.get(name) or prev.get(STEP_SLICE)}
            total = int((benches.get(bench) or {}).get("rows") or 0)
            return PlannedJob(step, pos, name, model, seed, bench, inputs, sha256_json(inputs), total)

        if step.per_slice:
            for model, seed, bench in slices:
                jobs.append(slice_job(model, seed, bench))
                here[jobs[-1].slice] = jobs[-1].input_hash
        elif tracks_slices(step) and slices:
            inputs = dict(base)
            if prev is not None and STEP_SLICE in prev:
                inputs["upstream"] = {prev_step: prev[STEP_SLICE]}
            subs = [slice_job(*sl) for sl in slices]
            job = PlannedJob(step, pos, STEP_SLICE, None, None, None, inputs, sha256_json(inputs),
                             sum(x.total for x in subs), subs=subs)
            jobs.append(job)
            here.update({x.slice: x.input_hash for x in subs})
            here[STEP_SLICE] = job.input_hash
        else:
            inputs = dict(base, models=sorted(models.values(), key=lambda m: str(m.get("id"))),
                          seeds=sorted({s for _, s, _ in slices}), benchmarks=sorted(benches))
            if prev is not None:
                inputs["upstream"] = {prev_step: sha256_json(sorted(prev.items()))}
            jobs.append(PlannedJob(step, pos, STEP_SLICE, None, None, None, inputs, sha256_json(inputs), 0))
            here[STEP_SLICE] = jobs[-1].input_hash
        prev, prev_step = here, step.id
    return jobs


def plan_against(expected: list[PlannedJob], records: dict[tuple[str, str], JobRecord],
                 sub_records: dict[tuple[str, str], SliceRecord]) -> Plan:
    """The plan: each expected job decided against the campaign's records of jobs and slices."""
    plan = []
    for j in expected:
        subs = {x.slice: sub_records.get((j.step.id, x.slice)) for x in j.subs}
        plan.append(decide(j, records.get((j.step.id, j.slice)), subs))
    return Plan(plan)


def plan_rows(plan: Plan, now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan as the campaign records it: one row per job, one per slice of a whole-step job."""
    jobs = [{"step": j.step.id, "slice": j.slice, "model": j.model, "seed": j.seed,
             "benchmark": j.benchmark, "input_hash": j.input_hash, "inputs": canonical_json(j.inputs),
             "state": "pending", "total": j.total,
             "message": j.reason if j.action in ("invalidate", "repair") else "",
             "now": now} for j in plan.jobs]
    subs = [{"step": j.step.id, "slice": x.slice, "model": x.model, "seed": x.seed,
             "benchmark": x.benchmark, "input_hash": x.input_hash,
             "inputs": canonical_json(x.inputs), "total": x.total,
             "message": x.reason if x.action == "invalidate" else "", "now": now}
            for j in plan.jobs for x in j.subs]
    return jobs, subs


# -- GPUs: which groups a step runs on, and the deal of its jobs over them -------------------
def step_groups(step: Step, planned: StepGpuPlan | None, gpu_groups: list[list[int]]) -> list[list[int]]:
    """The host GPUs of each container the step runs at a time (one list per GPU group; [[]]: no GPUs).

    ``planned``: the run's GPU plan for this step (trace_tui.gpu_plan.run_plan), or None; without one,
    ``gpu_groups`` (the caller's groups) decide.
    """
    if not needs_gpus(step):
        return [[]]
    if planned is not None:
        if not planned.groups:
            return [[]]
        # per slice: one container per group at a time; whole step: one container serves every group
        return [list(g) for g in planned.groups] if step.per_slice else [planned.devices]
    if gpu_groups:
        if not step.per_slice:  # one container serves every group (e.g. the release evaluator's GPU_GROUPS)
            return [sorted({g for grp in gpu_groups for g in grp})]
        return gpu_groups
    return [list(range(max(1, step.needs.gpus)))]


def visible_groups(step: Step, gpus: list[int], planned: StepGpuPlan | None,
                   gpu_groups: list[list[int]]) -> list[list[int]]:
    """The groups a container given host GPUs ``gpus`` sees, numbered as it sees them (0..n-1)."""
    index = {g: i for i, g in enumerate(gpus)}
    if not gpus:
        return []
    if planned is not None:
        return planned.container_groups(gpus)
    if step.per_slice or not gpu_groups:
        return [list(range(len(gpus)))]
    return [[index[g] for g in grp] for grp in gpu_groups if all(g in index for g in grp)]


def deal_queues(todo: list[PlannedJob], n_groups: int, dealt: dict[str, int]) -> list[list[PlannedJob]]:
    """Single-slice jobs to each group's queue: the slice's dealt group where it has one, else in turn.
    (A group that runs out of its own takes others' at run time.)"""
    queues: list[list[PlannedJob]] = [[] for _ in range(n_groups)]
    for i, j in enumerate(todo):
        g = dealt.get(j.slice)
        queues[g if g is not None and 0 <= g < n_groups else i % n_groups].append(j)
    return queues


# -- what each job's worker is given ------------------------------------------------------------
def job_inputs(resolved: ResolvedRecipe, steps: list[Step], campaign: Campaign, job: PlannedJob,
               extra_inputs: Callable[[Any, PlannedJob, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Named inputs in the workers' input form ({"entry": store entry} / {"campaign": path}).

    The slice's model as a store entry; the previous step's outputs for the same slice.
    Stage-specific inputs (dataset, system prompt) are added by ``extra_inputs``.
    """
    step = job.step
    out: dict[str, Any] = {}
    model = job.inputs.get("model") if (step.per_slice or job.subs) and job.model else None
    if model is None and not step.per_slice:
        # A whole-step job of a one-model recipe (demo, smoke): that model; a smoke run: its base model.
        training = get_field(resolved, "training")
        models = job.inputs.get("models") or []
        if training is not None and get_field(training, "base"):
            out["model"] = {"entry": f"model/{get_field(training, 'base')}"}
        elif len(models) == 1:
            model = models[0]
    if isinstance(model, dict):
        if model.get("store_entry"):
            out["model"] = {"entry": model["store_entry"]}
        elif model.get("repo_id") and model.get("revision"):
            out["model"] = {"entry": f"model/{model['repo_id']}@{model['revision']}"}
    if job.position > 0:
        prev = steps[job.position - 1]
        out["upstream"] = {"campaign": campaign.output_rel(prev.id, job.slice if prev.per_slice else STEP_SLICE)}
    if extra_inputs is not None:
        out.update(extra_inputs(step, job, resolved))
    return out


def job_spec(resolved: ResolvedRecipe, recipe: Recipe, campaign: Campaign, job: PlannedJob, gpus: list[int], *,
             planned: StepGpuPlan | None, gpu_groups: list[list[int]], offline: bool,
             extra_inputs: Callable[[Any, PlannedJob, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The job's spec (its job.json) on host GPUs ``gpus``; ``planned``: the GPU plan's entry for its step."""
    r = resolved
    step = job.step
    groups = visible_groups(step, gpus, planned, gpu_groups)
    spec: dict[str, Any] = {
        "step": step.id,
        "recipe": recipe.name,
        "run_tag": get_field(r, "run_tag"),
        "slice": None if job.slice == STEP_SLICE else
        {"model": job.model, "seed": job.seed, "benchmark": job.benchmark},
        "settings": dump(get_field(r, "settings", {}) or {}),
        "pins": job.inputs,
        "input_hash": job.input_hash,
        "inputs": job_inputs(r, recipe.steps, campaign, job, extra_inputs),
        "store_entries": list((get_field(r, "store_entries", {}) or {}).get(step.id, [])),
        "args": list(step.run[1:]),
        "output_dir": campaign.output_rel(step.id, job.slice),
        # Inside the container (or under CUDA_VISIBLE_DEVICES) the given GPUs are numbered 0..n-1.
        "gpus": list(range(len(gpus))),
        "host_gpus": gpus,
        "gpu_groups": groups,
        "tensor_parallel": len(groups[0]) if gpus else 0,
        "offline": offline or not step.needs.network,
        "upstream_outputs": {},
    }
    if step.per_slice:
        spec["model"] = job.inputs.get("model")
        spec["benchmark"] = job.inputs.get("benchmark")
        spec["total"] = job.total
    else:
        spec["models"] = job.inputs.get("models")
        spec["seeds"] = job.inputs.get("seeds")
        spec["benchmarks"] = [dump(b) for b in (get_field(r, "benchmarks", []) or [])]
        spec["slices"] = [{"model": get_field(s, "model"), "seed": get_field(s, "seed"),
                           "benchmark": get_field(s, "benchmark")} for s in get_field(r, "slices", [])]
        if job.subs:
            # Per slice: its pinned-input hash, what the engine knows of it, and whether it must be redone
            # from scratch (invalidated: its outputs under OUTPUT_DIR/slices/SLICE were removed).
            spec["slices"] = [{"model": x.model, "seed": x.seed, "benchmark": x.benchmark, "id": x.slice,
                               "input_hash": x.input_hash, "total": x.total, "state": x.action}
                              for x in job.subs]
            spec["invalidated_slices"] = [x.slice for x in job.subs if x.action == "invalidate"]
    if job.position > 0:
        prev = recipe.steps[job.position - 1]
        spec["upstream_outputs"] = {prev.id: campaign.output_rel(prev.id, job.slice if prev.per_slice
                                                                 else STEP_SLICE)}
    return spec

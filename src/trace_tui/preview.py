"""The configuration-only preview (the release guide's step): everything a run would use, nothing started.

:func:`build_preview` resolves what a run of a recipe would read and produce
— suite and its hash, run tag and campaign directory, seeds, models at their
revisions, benchmarks and rows, slices, generation settings, each step's image
and locked id, the store entries it needs and whether they are present, the
hardware verdicts and the GPU plan — and returns it as data. It only *reads*:
NVML, the Docker engine's image list, the image lock and the store's
manifests. It creates no campaign, no log, no store entry and no container
(tests/test_preview_writes_nothing.py proves it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from trace_tui import paths
from trace_tui.gpu_plan import GpuGroup, RunPlan, StepGpus, gpu_groups_env, run_plan
from trace_tui.hardware import HardwareReport, StepCheck, check_recipe, hardware_report
from trace_tui.release import release_lock
from trace_tui.store.store import Store
from trace_tui.store.trust import trust_levels

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe

PAPER_MATRIX = "8 models x 3 seeds x 32,805 rows = 787,320"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelLine(_Model):
    id: str
    ref: str  # owner/repo@revision (local:model/NAME for the demo)
    label: str
    scale: str


class BenchmarkLine(_Model):
    key: str
    display: str
    category: str
    rows: int


class StoreEntryLine(_Model):
    name: str
    present: bool | None  # None: unknown (store not available)
    trust: str | None = None  # the entry's trust level when present (store.trust): published, hub-stated, local


class StepLine(_Model):
    id: str
    title: str
    stage: str
    run: list[str]
    image: str | None  # train/infer/score; None: host
    image_tag: str | None = None
    image_id: str | None = None  # the locked id, or None
    image_state: str  # "present", "different", "not built", "host"
    confirm: bool
    per_slice: bool
    store: list[StoreEntryLine]
    check: StepCheck


class GroupLine(_Model):
    gpus: list[int]
    spec: str
    slices: list[str]
    rows: int
    models: list[str]


class Preview(_Model):
    recipe: str
    title: str
    purpose: str
    canonical: bool
    suite: str | None
    suite_sha256: str | None
    suite_hash_note: str
    run_tag: str
    campaign_dir: str
    campaign_exists: bool
    config_sha256: str
    seeds: list[int]
    models: list[ModelLine]
    benchmarks: list[BenchmarkLine]
    slices: int
    rows_total: int
    settings: dict[str, Any]
    training: dict[str, Any] | None
    steps: list[StepLine]
    store_available: bool
    store_note: str
    hardware: dict[str, str]
    gpu_plan: list[GroupLine]
    gpu_groups: str  # GPU_GROUPS for the release evaluator
    gpu_plan_note: str
    step_gpus: list[StepGpus] = []  # what each step's containers are given (trace_tui.gpu_plan.run_plan)
    # where the steps run: "docker" (each stage's image) or "local" (processes with this host's Python)
    runtime: str = "docker"
    starts_nothing: bool = Field(True, description="a preview never starts or writes anything")

    def lines(self) -> list[str]:
        return render_preview(self)

    def render_text(self) -> str:
        return "\n".join(self.lines())


def _store_checker(home: Path) -> tuple[Callable[[list[str]], dict[str, bool]] | None, str]:
    try:
        import trace_tui.store as store_mod
    except ImportError:
        return None, "unknown (store not available)"
    fn = getattr(store_mod, "store_status", None)
    if fn is None:
        return None, "unknown (store not available)"
    return (lambda names: fn(home, names)), f"store at {home / 'store'}"


def build_preview(resolved: "ResolvedRecipe", report: HardwareReport | None = None, *, home: Path | None = None,
                  campaign_dir: Path | None = None, runtime: str = "docker") -> Preview:
    """Everything a run of ``resolved`` would use. Reads only; starts and writes nothing."""
    home = Path(home) if home else paths.home()
    campaign = Path(campaign_dir) if campaign_dir else paths.campaigns_dir(home) / resolved.run_tag
    if report is None:
        report = hardware_report(home, campaign=campaign)
    checks = {c.step: c for c in check_recipe(resolved, report, runtime=runtime)}

    checker, store_note = _store_checker(home)
    needed = resolved.all_store_entries()
    present: dict[str, bool] = {}
    if checker is not None and needed:
        try:
            present = checker(needed)
        except Exception as exc:  # noqa: BLE001 - a broken store is reported, never a traceback in a preview
            checker, store_note = None, f"unknown (store unreadable: {type(exc).__name__}: {exc})"
    trust = trust_levels(Store(paths.store_dir(home)), [n for n in needed if present.get(n)], release_lock()) \
        if checker is not None else {}

    steps = []
    for step in resolved.recipe.steps:
        img = report.docker.image(step.image) if step.image else None
        if step.image is None:
            state = "host"
        elif runtime == "local":  # no image is used: the stage's worker runs as a process on this host
            state = "local"
        elif runtime != "docker":  # the probe reads Docker's images; this runtime checks its own at the start
            state = f"{runtime}: checked when the run starts"
        elif img is None or img.status == "not_built":
            state = "not built"
        else:
            state = img.status
        steps.append(StepLine(
            id=step.id, title=step.title, stage=step.stage, run=list(step.run), image=step.image,
            image_tag=img.tag if img else None,
            image_id=img.locked_id if img and img.status != "not_built" and runtime == "docker" else None,
            image_state=state, confirm=step.confirm, per_slice=step.per_slice,
            store=[StoreEntryLine(name=n, present=present.get(n) if checker else None, trust=trust.get(n))
                   for n in resolved.store_entries.get(step.id, [])],
            check=checks[step.id]))

    run = run_plan(resolved, report)  # the same plan the runner gives the containers
    plan = run.generation
    if not resolved.slices:
        plan_note = "no slices: this recipe generates nothing"
    elif not plan:
        gen = next((checks[s.id] for s in resolved.recipe.steps if s.stage == "infer"), None)
        plan_note = f"no GPU plan on this machine: {gen.reason if gen else 'no generation step'}"
    elif not plan[0].gpus:
        plan_note = "runs on CPU: one group"
    else:
        plan_note = f"{len(plan)} group{'s' if len(plan) != 1 else ''} of {plan[0].tp} GPU{'s' if plan[0].tp != 1 else ''}"

    suite_note = ""
    if resolved.suite_sha256:
        suite_note = "published hash, pinned in the release lock"
    elif resolved.suite and resolved.suite != "demo":
        suite_note = "pinned through rlvr/release_files.v1.json (checked by `trace-tui verify`)"
    elif resolved.suite == "demo":
        suite_note = "local synthetic tasks (not a release suite)"

    return Preview(
        recipe=resolved.recipe.name, title=resolved.recipe.title, purpose=resolved.recipe.purpose,
        canonical=resolved.recipe.canonical, suite=resolved.suite, suite_sha256=resolved.suite_sha256,
        suite_hash_note=suite_note, run_tag=resolved.run_tag, campaign_dir=str(campaign),
        campaign_exists=campaign.is_dir(), config_sha256=resolved.config_sha256, seeds=list(resolved.seeds),
        models=[ModelLine(id=m.id, ref=m.ref, label=m.label, scale=m.scale) for m in resolved.models],
        benchmarks=[BenchmarkLine(key=b.key, display=b.display or b.key, category=b.category, rows=b.rows)
                    for b in resolved.benchmarks],
        slices=len(resolved.slices), rows_total=resolved.rows_total, settings=dict(resolved.settings),
        training=resolved.training.model_dump() if resolved.training else None,
        steps=steps, store_available=checker is not None, store_note=store_note,
        hardware={"gpu": report.gpu.message, "docker": report.docker.message,
                  "images": report.docker.lock_message, "disk": "; ".join(f"{d.free_gib:.1f} GiB free at {d.path}"
                                                                for d in (report.disk, report.campaign_disk) if d)},
        gpu_plan=[GroupLine(gpus=g.gpus, spec=g.spec, slices=[s.id for s in g.slices], rows=g.rows,
                            models=list(dict.fromkeys(s.model for s in g.slices))) for g in plan],
        gpu_groups=_launcher_groups(run, plan), gpu_plan_note=plan_note, step_gpus=list(run.steps),
        runtime=runtime)


def _launcher_groups(run: RunPlan, plan: list[GpuGroup]) -> str:
    """GPU_GROUPS as the generation step's container receives it (a whole-step job: the release launcher)."""
    gen = next((s for s in run.steps if s.role == "generation" and s.groups), None)
    if gen is not None and not gen.per_slice:
        return gen.gpu_groups_env()
    return gpu_groups_env(plan)


# --------------------------------------------------------------------------- text


def _n(x: int) -> str:
    return f"{x:,}"


def render_preview(p: Preview) -> list[str]:
    out = [f"Preview: {p.recipe} - {p.title} (configuration only: starts nothing, writes nothing)",
           f"  {p.purpose}" + ("" if p.canonical else " [noncanonical]")]
    if p.suite:
        sha = f"sha256 {p.suite_sha256}" if p.suite_sha256 else "sha256 -"
        out.append(f"Suite       {p.suite}  {sha}" + (f"  ({p.suite_hash_note})" if p.suite_hash_note else ""))
    out.append(f"Run tag     {p.run_tag}")
    out.append(f"Campaign    {p.campaign_dir}" + ("  (exists: a run resumes it)" if p.campaign_exists else "  (not created)"))
    out.append(f"Config      sha256 {p.config_sha256}")
    if p.training:
        out.append(f"Training    {p.training['scale']} base {p.training['base']}  config {p.training['config']}")
    if p.seeds:
        out.append(f"Seeds       {', '.join(map(str, p.seeds))}")
    if p.models:
        out.append(f"Models      {len(p.models)}")
        width = max(len(m.id) for m in p.models)
        for m in p.models:
            out.append(f"  {m.id:<{width}}  {m.ref}  \"{m.label}\" ({m.scale})")
    if p.benchmarks:
        per = sum(b.rows for b in p.benchmarks)
        out.append(f"Benchmarks  {len(p.benchmarks)} ({_n(per)} rows per model and seed)")
        width = max(len(b.key) for b in p.benchmarks)
        for b in p.benchmarks:
            out.append(f"  {b.key:<{width}}  {_n(b.rows):>6} rows  {b.display}" + (f"  [{b.category}]" if b.category else ""))
    if p.suite:
        out.append(f"Slices      {_n(p.slices)} = {len(p.models)} model{'s' if len(p.models) != 1 else ''} x "
                   f"{len(p.seeds)} seed{'s' if len(p.seeds) != 1 else ''} x {len(p.benchmarks)} benchmark"
                   f"{'s' if len(p.benchmarks) != 1 else ''}; rows to generate {_n(p.rows_total)}"
                   + (f"  (the paper matrix: {PAPER_MATRIX})" if p.suite == "trace_eval_v1" else ""))
    if p.settings:
        out.append("Generation  " + ", ".join(f"{k} {v}" for k, v in p.settings.items()))
    out.append("Steps")
    for i, s in enumerate(p.steps, 1):
        flags = "".join([" [confirm]" if s.confirm else "", " [per slice]" if s.per_slice else ""])
        if s.image is None:
            where = "host"
        elif s.image_state == "local":
            where = f"process with this host's Python ({s.image} stage, no image)"
        else:
            where = f"image {s.image}: " + (
                f"{s.image_id}" + (" (tag now differs)" if s.image_state == "different" else "")
                if s.image_id else s.image_state)
        out.append(f"  {i}. {s.id} ({s.stage}) {where}{flags}")
        out.append(f"       runs   {' '.join(s.run)}")
        for e in s.store:
            state = "unknown" if e.present is None else ("present" if e.present else "missing")
            if e.present and e.trust:
                state += f", {e.trust}" + (" (refused: a pinned entry that vouches only for itself)"
                                           if e.trust == "local" and not e.name.startswith("local:") else "")
            out.append(f"       store  {e.name}: {state}")
        out.append(f"       check  {s.check.verdict}: {s.check.reason}")
        # the one line ends in "(+N more)" when there is more: each of those follows, whole
        if s.check.verdict != "pass" and s.check.reason.endswith(" more)"):
            out += [f"              {note}" for note in s.check.notes[1:] if not note.startswith("pass: ")]
    if not p.store_available:
        out.append(f"Store       {p.store_note}")
    else:
        needed = [e for s in p.steps for e in s.store]
        missing = len({e.name for e in needed if e.present is False})
        out.append(f"Store       {p.store_note}: {len({e.name for e in needed})} entries needed, {missing} missing")
    out.append(f"Hardware    {p.hardware['gpu']}")
    if p.runtime == "local":
        out.append("            runtime local: each step runs as a process with this host's Python; no image is used")
    elif p.runtime != "docker":
        out.append(f"            runtime {p.runtime}: the locked images, from {p.runtime}'s own storage")
    else:
        out.append(f"            {p.hardware['docker']}; {p.hardware['images']}")
    out.append(f"            {p.hardware['disk']}")
    out.append(f"GPU plan    {p.gpu_plan_note}" + (f"  (GPU_GROUPS=\"{p.gpu_groups}\")" if p.gpu_groups else ""))
    for g in p.gpu_plan:
        who = "CPU" if not g.gpus else f"GPU {g.spec}"
        out.append(f"  {who}: {_n(len(g.slices))} slices, {_n(g.rows)} rows, {len(g.models)} model"
                   f"{'s' if len(g.models) != 1 else ''}")
    if any(s.groups or s.refusal for s in p.step_gpus):
        out.append("Processes   what each step's processes are given (the same plan a run uses)" if p.runtime == "local"
                   else "Containers  what each step's containers are given (the same plan a run uses)")
        out += [f"  {s.line()}" for s in p.step_gpus]
    return out


__all__ = ["PAPER_MATRIX", "Preview", "build_preview", "render_preview"]

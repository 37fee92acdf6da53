"""A recipe's schema: the steps, selection and local models a recipe file holds, and the resolved
configuration a run uses (pure pydantic models; loading and resolving are in trace_tui.recipe.catalog)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trace_tui.errors import UsageError
from trace_tui.workers import registry

Stage = Literal["train", "infer", "score", "host"]
ImageName = Literal["train", "infer", "score"]
Suite = Literal["trace_eval", "trace_validation", "demo"]
Scale = Literal["3B", "7B"]

# What a step's GPUs are for. The memory each one needs depends on the model
# size and is derived in trace_tui.hardware (see REQUIREMENTS there, with the
# arithmetic); a recipe names the purpose instead of retyping numbers that
# would drift from the models it selects.
GpuProfile = Literal["generate", "judge", "train"]

# Store entries a step reads: full entry names (``model:owner/repo@rev``, see
# trace_tui.store.names) or these symbolic names, which the resolver expands for
# the resolved selection (trace_tui.store.names.expand_needs) — so a recipe
# never retypes a revision.
SYMBOLIC_NEEDS: tuple[str, ...] = (
    "release",  # the release's rlvr/ files at the pinned upstream commit
    "paper",  # paper.pdf, pinned by its published sha256
    "models",  # the selected models at their pinned revisions (demo: its local models)
    "judge",  # Qwen3-32B at its pinned revision
    "base-models", "base-model:3B", "base-model:7B",  # training base models
    "dataset:train", "dataset:validation",  # maveryn/trace dataset-v1 splits
    "benchmarks",  # the selected trace_eval benchmarks' evaluation files
)
_FULL_NEED_RE = r"^(release|paper|model|dataset|benchmark|local):\S+$"

VALIDATION_BENCHMARK = "trace-validation"  # the one pseudo-benchmark of the TRACE validation suite


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StepNeeds(_Strict):
    gpus: int = Field(0, ge=0, le=64, description="GPUs per model endpoint (0: runs on CPU); a floor when gpu_profile is set")
    gpu_memory_gib: float = Field(0, ge=0, le=4096, description="memory per GPU; a floor when gpu_profile is set")
    gpu_profile: GpuProfile | None = Field(
        None, description="derive GPUs and memory per model size (trace_tui.hardware.REQUIREMENTS)")
    compute_capability: str | None = Field(None, pattern=r"^\d{1,2}\.\d$", description="minimum, e.g. '8.0' for bf16")
    disk_gib: float = Field(0, ge=0, le=1_000_000)
    network: bool = False
    store: list[str] = Field(default_factory=list, description="store entries the step reads (SYMBOLIC_NEEDS or full names)")

    @model_validator(mode="after")
    def _profile_uses_gpus(self) -> "StepNeeds":
        if self.gpu_profile is not None and self.gpus < 1:
            raise ValueError(f"gpu_profile {self.gpu_profile!r} runs on GPUs: set gpus to at least 1 "
                             "(GPUs per endpoint; the hardware check raises it per model size)")
        return self

    @field_validator("store")
    @classmethod
    def _known_needs(cls, store: list[str]) -> list[str]:
        import re

        for need in store:
            if need in SYMBOLIC_NEEDS:
                continue
            if not re.match(_FULL_NEED_RE, need):
                raise ValueError(f"unknown store entry {need!r}; allowed: {', '.join(SYMBOLIC_NEEDS)}, "
                                 "or a full entry name (model:OWNER/REPO@COMMIT, local:model/NAME, ...)")
            try:
                from trace_tui.store.names import parse
            except ImportError:  # pragma: no cover - the store package ships with trace_tui
                continue
            try:
                parse(need)
            except UsageError as exc:
                raise ValueError(exc.line()) from None
        return store


# Workers that accept a batch job (one per-slice spec per slice, served in turn; trace_tui.stages.jobs.run_slices).
BATCH_WORKERS = registry.BATCH_WORKERS

# What a step's `run` may start: trace-tui's own stage workers, or trace-tui itself with one of the
# commands that only check, preview, fetch into the store or build tables. A recipe (and so a campaign's
# recipe.json) is data: a `run` naming any other module (`timeit -s ...`, `runpy`, a site package) would
# run code of its choosing as the user.
STAGE_WORKERS = registry.WORKER_NAMES
HOST_COMMANDS = (("verify",), ("hw",), ("preview",), ("report",), ("store", "fetch"))
# Options of those commands that would write outside the campaign and the store (a log file anywhere,
# another home); no shipped step uses them.
HOST_FORBIDDEN_OPTIONS = ("--log-file", "--home")


def entry_point_problem(run: list[str] | tuple[str, ...]) -> str | None:
    """Why ``run`` (a step's module and arguments) is not one of trace-tui's own entry points; None when it is."""
    if not run:
        return "names no worker"
    module, args = run[0], list(run[1:])
    if module in STAGE_WORKERS:
        return None
    allowed = ", ".join([*STAGE_WORKERS, *("trace_tui " + " ".join(c) for c in HOST_COMMANDS)])
    if module != "trace_tui":
        return f"{module!r} is not a trace-tui stage worker; allowed: {allowed}"
    if not any(args[:len(c)] == list(c) for c in HOST_COMMANDS):
        return f"'trace_tui {' '.join(args[:2])}' is not a command a step may run; allowed: {allowed}"
    # argparse takes any unambiguous prefix of an option (--log-fi for --log-file)
    bad = next((a for a in args if a.startswith("--") and len(a.split("=", 1)[0]) > 2
                and any(o.startswith(a.split("=", 1)[0]) for o in HOST_FORBIDDEN_OPTIONS)), None)
    if bad is not None:
        return f"{bad.split('=', 1)[0]} would write outside the campaign; a step may not give it"
    return None


class Step(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)
    title: str
    description: str = ""
    stage: Stage
    image: ImageName | None = None  # None: runs on the host
    run: list[str] = Field(min_length=1, description="module and arguments of the worker, e.g. ['trace_tui.stages.generate']")
    env: dict[str, str] = Field(default_factory=dict, description="environment toggles, e.g. RUN_GENERATION=1")
    needs: StepNeeds = StepNeeds()
    inputs: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    confirm: bool = False
    per_slice: bool = Field(False, description="one job per (model, seed, benchmark) slice")
    keep_loaded: bool = Field(
        False, description="per-slice step whose worker keeps its model (the judge) loaded: one container per GPU "
                           "group serves its share of the slices in turn; each slice keeps its own job, receipt "
                           "and resume")

    @field_validator("run")
    @classmethod
    def _own_entry_point(cls, run: list[str]) -> list[str]:
        problem = entry_point_problem(run)
        if problem is not None:
            raise ValueError(problem)
        return run

    @model_validator(mode="after")
    def _stage_and_image(self) -> "Step":
        if self.keep_loaded and not self.per_slice:
            raise ValueError("keep_loaded serves a per-slice step's slices in one worker: set per_slice: true")
        if self.keep_loaded and self.run[0] not in BATCH_WORKERS:
            raise ValueError(f"keep_loaded needs a worker that serves a batch of slices ({', '.join(BATCH_WORKERS)}); "
                             f"{self.run[0]} runs one slice per job: leave keep_loaded out")
        if self.stage == "host" and self.image is not None:
            raise ValueError("a host step runs on the host: leave out 'image'")
        if self.stage != "host" and self.image is None:
            raise ValueError(f"a {self.stage} step runs in an image: set 'image' to one of train, infer, score")
        return self


class Selection(_Strict):
    suite: Suite | None = None
    models: list[str] | Literal["all"] = Field(default_factory=list)
    seeds: list[int] | Literal["all"] = Field(default_factory=list)
    benchmarks: list[str] | Literal["all"] = Field(default_factory=list)
    train_scale: Scale | None = Field(None, description="smoke recipes: the release training profile of this size")


class LocalModel(_Strict):
    """A model that is not a release pin: the demo's tiny random Qwen2.5-VL, built locally, or a
    user's own checkpoint evaluated by `full` (`--local-model ID=PATH[@REVISION]`)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    label: str
    store_entry: str = Field(pattern=r"^local:model/[A-Za-z0-9][A-Za-z0-9._-]*$",
                             description="its store entry, e.g. local:model/tiny-qwen2.5-vl (demo_prepare imports it)")
    scale: Literal["tiny", "3B", "7B"] = "tiny"
    revision: str | None = Field(None, description="the user's immutable revision; else its files' sha256set")

    @property
    def ref(self) -> str:
        return self.store_entry


class DemoTask(_Strict):
    key: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    rows: int = Field(ge=1, le=10_000)
    display: str = ""


class Recipe(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)
    title: str
    purpose: str
    canonical: bool = True
    image_flavor: Literal["gpu", "cpu"] = Field(
        "gpu", description="the image build it needs (trace_tui.images flavours); cpu recipes also run on gpu images")
    selection: Selection = Selection()
    settings: dict[str, float | int | str | bool] = Field(
        default_factory=dict, description="overrides of the suite's generation settings (demo profile only)")
    local_models: list[LocalModel] = Field(default_factory=list, description="demo only")
    demo_tasks: list[DemoTask] = Field(default_factory=list, description="demo only: its task groups and rows")
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "Recipe":
        ids = [s.id for s in self.steps]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"step ids must be unique; repeated: {', '.join(dupes)}")
        demo = self.selection.suite == "demo"
        if self.settings and not demo:
            raise ValueError("'settings' overrides are for the demo profile only: "
                             "release recipes take their generation settings from the release lock")
        if (self.local_models or self.demo_tasks) and not demo:
            raise ValueError("'local_models' and 'demo_tasks' are for suite 'demo' only")
        if demo and self.selection.models != []:
            raise ValueError("suite 'demo' uses 'local_models', not release 'models'")
        return self


class SliceKey(BaseModel):
    """One model x seed x benchmark: the unit of generation, scoring and resume."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    seed: int
    benchmark: str

    @property
    def id(self) -> str:
        return f"{self.model}/{self.seed}/{self.benchmark}"


class BenchmarkRef(_Strict):
    key: str
    rows: int
    display: str = ""
    category: str = ""
    route: str = ""


class TrainingTarget(_Strict):
    scale: Scale
    base: str  # repo@revision from the lock
    config: str  # release training config path (relative to the repository root)


class ResolvedRecipe(BaseModel):
    """A recipe with its selection turned into pins: what a run (or a preview) uses."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    recipe: Recipe
    suite: str | None  # suite id (trace_eval_v1, trace-validation-2000-seed42-v1, demo) or None
    suite_sha256: str | None = None  # the published hash, where the release lock pins one
    models: list[Any]  # ModelPin | LocalModel (both have .id, .label, .ref)
    seeds: list[int]
    benchmarks: list[BenchmarkRef]
    settings: dict[str, Any]
    slices: list[SliceKey]
    rows_total: int
    training: TrainingTarget | None = None
    store_entries: dict[str, list[str]] = Field(default_factory=dict, description="step id -> concrete store entries")
    config_sha256: str
    run_tag: str

    def model_scale(self, model_id: str) -> str:
        for m in self.models:
            if m.id == model_id:
                return m.scale
        raise KeyError(model_id)

    def rows_of(self, benchmark: str) -> int:
        return next(b.rows for b in self.benchmarks if b.key == benchmark)

    def all_store_entries(self) -> list[str]:
        return list(dict.fromkeys(e for entries in self.store_entries.values() for e in entries))


def config_data(recipe: Recipe, suite: str | None, suite_sha256: str | None, models: list[Any], seeds: list[int],
                 benchmarks: list[BenchmarkRef], settings: dict[str, Any], training: TrainingTarget | None,
                 store_entries: dict[str, list[str]]) -> dict[str, Any]:
    # Image ids are deliberately not part of the configuration: a rebuilt image
    # must resume the same campaign (the engine invalidates the affected slices).
    return {
        "recipe": recipe.name,
        "suite": suite,
        "suite_sha256": suite_sha256,
        "models": [{"id": m.id, "ref": m.ref, "label": m.label,
                    **({"revision": m.revision} if getattr(m, "revision", None) and isinstance(m, LocalModel) else {})}
                   for m in models],
        "seeds": seeds,
        "benchmarks": [b.model_dump() for b in benchmarks],
        "settings": settings,
        "training": training.model_dump() if training else None,
        "steps": [{"id": s.id, "stage": s.stage, "image": s.image, "run": s.run, "env": s.env,
                   "per_slice": s.per_slice} for s in recipe.steps],
        "image_flavor": recipe.image_flavor,
        "store": store_entries,
    }



"""Recipes: the steps of the release guide, as validated data.

A recipe is an ordered list of steps (``recipes/<name>.yaml``). Models, seeds,
suites and generation settings are never retyped in a recipe: it *selects*
from the release lock (``models: all`` or lock model ids, ``seeds: all`` or a
subset of the suite's seeds, ``benchmarks: all`` or suite keys), and
:func:`resolve_recipe` turns the selection into concrete pins, slices and a run
tag. Only the ``demo`` profile (suite ``demo``) carries its own settings and
local models, because nothing of it is part of the release.

Everything here is pure: loading reads one YAML file, resolving reads the lock
object it is given. Errors are :class:`~trace_tui.errors.UsageError` with the
file, line and field, and the allowed values.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trace_tui.common.digest import sha256_json
from trace_tui.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

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
    model_config = ConfigDict(extra="forbid", frozen=True)


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
BATCH_WORKERS = ("trace_tui.stages.extract", "trace_tui.stages.selftest")


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

    @property
    def generates(self) -> bool:
        """Whether a step generates responses (an infer step). Slices exist whenever a suite is selected."""
        return any(s.stage == "infer" for s in self.steps)


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

    def to_data(self) -> dict[str, Any]:
        """The resolved configuration as plain JSON data (what config_sha256 hashes, plus the hash)."""
        return {**_config_data(self.recipe, self.suite, self.suite_sha256, self.models, self.seeds,
                               self.benchmarks, self.settings, self.training, self.store_entries),
                "slices": len(self.slices), "rows_total": self.rows_total,
                "config_sha256": self.config_sha256, "run_tag": self.run_tag}


# --------------------------------------------------------------------------- loading


def recipes_dir() -> Path:
    from trace_tui.resources import recipes_dir as _dir

    return _dir()


def known_recipes() -> list[str]:
    """Names of the recipes shipped with the package, in the release guide's order."""
    found = {p.stem for p in recipes_dir().glob("*.yaml")}
    ordered = [n for n in GUIDE_ORDER if n in found]
    return ordered + sorted(found - set(ordered))


GUIDE_ORDER = ("preflight", "smoke-3b", "smoke-7b", "validation", "eval-setup", "eval-preview",
               "full", "verify", "demo")


def load_recipe(name_or_path: str | Path, *, lock: "ReleaseLock | None" = None) -> Recipe:
    """A shipped recipe by name, or a recipe file by path. UsageError on anything wrong."""
    text_name = str(name_or_path)
    path = Path(text_name)
    looks_like_path = text_name.endswith((".yaml", ".yml")) or "/" in text_name
    if text_name in known_recipes():
        path = recipes_dir() / f"{text_name}.yaml"
    elif not looks_like_path:
        raise UsageError(f"unknown recipe {_short(text_name)}", hint=f"known recipes: {', '.join(known_recipes())}")
    else:
        try:
            is_file = path.is_file()
        except (OSError, ValueError):  # a name too long, or with a NUL byte
            is_file = False
        if not is_file:
            raise UsageError(f"recipe file {_short(text_name)} not found (no such regular file)",
                             hint=f"or name a known recipe: {', '.join(known_recipes())}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read recipe file {path}: {exc}") from None
    recipe = parse_recipe(text, source=str(path), lock=lock)
    if path.parent == recipes_dir() and recipe.name != path.stem:
        raise UsageError(f"{path}: name: {recipe.name!r} differs from the file name", hint=f"set name: {path.stem}")
    return recipe


def parse_recipe(text: str, *, source: str = "<recipe>", lock: "ReleaseLock | None" = None) -> Recipe:
    """Validate recipe YAML text. Every failure is one UsageError naming source:line, field, allowed values."""
    import yaml
    import yaml.reader

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise UsageError(_one_line(f"{where}: not valid YAML: {exc.problem or exc}")) from None
    except yaml.reader.ReaderError as exc:  # a control character or bad encoding
        line = text[: max(exc.position, 0)].count("\n") + 1
        raise UsageError(f"{source}:{line}: not valid YAML: character {exc.character!r} is not allowed") from None
    except RecursionError:
        raise UsageError(f"{source}: not valid YAML: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - yaml constructors raise ValueError/TypeError etc. on odd scalars
        raise UsageError(_one_line(f"{source}: not valid YAML: {type(exc).__name__}: {exc}")) from None
    dup = _duplicate_key(root)
    if dup is not None:
        raise UsageError(f"{source}:{dup[1]}: key {_short(dup[0])} appears twice in the same mapping",
                         hint="keep one; YAML would silently use the last")
    if not isinstance(data, dict):
        raise UsageError(f"{source}:1: a recipe is a mapping with name, title, purpose, steps "
                         f"(got {type(data).__name__})")
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_one_line(_describe_validation_error(exc, root, source, Recipe))) from None
    except RecursionError:  # self-referencing YAML anchors
        raise UsageError(f"{source}: recipe nests too deeply (self-referencing anchors?)") from None
    _check_against_lock(recipe, root, source, lock)
    return recipe


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _node_line(root: Any, loc: tuple[Any, ...]) -> int:
    """1-based line of the deepest YAML node on the path ``loc`` (pydantic error location)."""
    import yaml

    node, line = root, (root.start_mark.line + 1 if root is not None else 1)
    for key in loc:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    nxt, line = v, k.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            nxt = node.value[key]
            line = nxt.start_mark.line + 1
        if nxt is None:
            break
        node = nxt
    return line


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at ``loc`` (to list allowed field names)."""
    import typing

    current: Any = model
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or key not in current.model_fields:
            return None
        ann = current.model_fields[key].annotation
        # unwrap list[X] / X | None to X
        for _ in range(3):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if args and not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                ann = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), args[0])
        current = ann
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _describe_validation_error(exc: ValidationError, root: Any, source: str, model: type[BaseModel]) -> str:
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p in ("list", "literal"))))
    field = ".".join(str(p) for p in loc) or "(top level)"
    line = _node_line(root, loc)
    msg = err["msg"].removeprefix("Value error, ")
    allowed = ""
    if err["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        if owner is not None:
            allowed = f"; allowed fields: {', '.join(owner.model_fields)}"
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "required field is missing"
    elif "expected" in (err.get("ctx") or {}):
        allowed = f"; allowed values: {err['ctx']['expected']}"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    value = err.get("input")
    shown = "" if err["type"] in ("missing",) or isinstance(value, (dict, list)) else f" (got {_short(value)})"
    return f"{source}:{line}: {field}: {msg}{shown}{allowed}{tail}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_against_lock(recipe: Recipe, root: Any, source: str, lock: "ReleaseLock | None") -> None:
    """Model ids, seeds and benchmark keys a recipe names must exist in the release lock."""
    sel = recipe.selection
    _check_selection(recipe, root, source)
    if sel.suite in (None, "demo"):
        if sel.suite is None and (sel.seeds or sel.benchmarks):
            line = _node_line(root, ("selection",))
            raise UsageError(f"{source}:{line}: selection: seeds and benchmarks need a suite; "
                             "allowed values of selection.suite: trace_eval, trace_validation, demo")
        if sel.suite == "demo" and isinstance(sel.benchmarks, list) and sel.benchmarks:
            keys = [t.key for t in recipe.demo_tasks]
            _subset(sel.benchmarks, keys, source, _node_line(root, ("selection", "benchmarks")), "selection.benchmarks")
        if sel.suite is None and isinstance(sel.models, list) and not sel.models and not recipe.settings:
            return
    lock = lock or _lock()
    if recipe.settings:
        allowed = list(type(lock.trace_validation.generation).model_fields)
        for key in recipe.settings:
            if key not in allowed:
                raise UsageError(f"{source}:{_node_line(root, ('settings', key))}: settings.{key}: unknown setting; "
                                 f"allowed values: {', '.join(allowed)}")
        _check_settings(recipe, root, source, lock.trace_validation.generation.model_dump())
    if isinstance(sel.models, list) and sel.models:
        _subset(sel.models, [m.id for m in lock.models], source,
                _node_line(root, ("selection", "models")), "selection.models")
    if sel.suite in ("trace_eval", "trace_validation"):
        if isinstance(sel.seeds, list) and sel.seeds:
            _subset(sel.seeds, _suite_seeds(sel.suite, lock), source,
                    _node_line(root, ("selection", "seeds")), "selection.seeds")
        if isinstance(sel.benchmarks, list) and sel.benchmarks:
            _subset(sel.benchmarks, [b.key for b in _suite_benchmarks(recipe, lock)], source,
                    _node_line(root, ("selection", "benchmarks")), "selection.benchmarks")


# Each generation setting a demo recipe may override: its type and the range a backend accepts.
# (kind, lowest, highest); bounds included, except top_p's lower one.
SETTING_RANGES: dict[str, tuple[type, float, float]] = {
    "seed": (int, 0, 2**32 - 1),
    "temperature": (float, 0, 100),
    "top_p": (float, 0, 1),
    "top_k": (int, -1, 1_000_000),  # -1: no top-k (vLLM's spelling)
    "presence_penalty": (float, -2, 2),
    "frequency_penalty": (float, -2, 2),
    "repetition_penalty": (float, 0.01, 10),
    "max_tokens": (int, 1, 1_048_576),
    "min_image_pixels": (int, 1, 10**9),
    "max_image_pixels": (int, 1, 10**9),
}
SEED_RANGE = (0, 2**32 - 1)


def _check_settings(recipe: Recipe, root: Any, source: str, base: dict[str, Any]) -> None:
    """Types, ranges and the min/max pixel order of a recipe's generation settings."""
    import math

    for key, value in recipe.settings.items():
        line = _node_line(root, ("settings", key))
        kind, low, high = SETTING_RANGES.get(key, (float, -math.inf, math.inf))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)):
            raise UsageError(f"{source}:{line}: settings.{key}: {_short(value)} is not "
                             f"{'an integer' if kind is int else 'a number'}")
        bad_top_p = key == "top_p" and value <= 0
        if not math.isfinite(value) or not low <= value <= high or bad_top_p:
            raise UsageError(f"{source}:{line}: settings.{key}: {_short(value)} is out of range; "
                             f"allowed values: {'above' if key == 'top_p' else 'from'} {low} to {high}")
    merged = {**base, **recipe.settings}
    lo, hi = merged.get("min_image_pixels"), merged.get("max_image_pixels")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        key = "min_image_pixels" if "min_image_pixels" in recipe.settings else "max_image_pixels"
        raise UsageError(f"{source}:{_node_line(root, ('settings', key))}: settings: min_image_pixels {lo} is "
                         f"above max_image_pixels {hi}", hint="the smallest image size must not exceed the largest")


def _check_selection(recipe: Recipe, root: Any, source: str) -> None:
    """No repeated keys or seeds, seeds in range, task keys unique."""
    sel = recipe.selection
    for field in ("models", "seeds", "benchmarks"):
        values = getattr(sel, field)
        if isinstance(values, list):
            dupes = [v for i, v in enumerate(values) if v in values[:i]]
            if dupes:
                raise UsageError(f"{source}:{_node_line(root, ('selection', field))}: selection.{field}: "
                                 f"{_short(dupes[0])} is listed twice")
    if isinstance(sel.seeds, list):
        for seed in sel.seeds:
            if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
                raise UsageError(f"{source}:{_node_line(root, ('selection', 'seeds'))}: selection.seeds: "
                                 f"{_short(seed)} is out of range; allowed values: {SEED_RANGE[0]} to {SEED_RANGE[1]}")
    keys = [t.key for t in recipe.demo_tasks]
    dupes = [k for i, k in enumerate(keys) if k in keys[:i]]
    if dupes:
        raise UsageError(f"{source}:{_node_line(root, ('demo_tasks',))}: demo_tasks: key {dupes[0]!r} "
                         f"is used twice", hint="each task group has its own key")


def _duplicate_key(node: Any) -> tuple[str, int] | None:
    """The first key a YAML mapping repeats (PyYAML keeps the last silently), with its line."""
    import yaml

    stack = [node]
    seen_nodes: set[int] = set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            keys: set[str] = set()
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in keys:
                        return k.value, k.start_mark.line + 1
                    keys.add(k.value)
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return None


def _subset(values: list[Any], allowed: list[Any], source: str, line: int, field: str) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UsageError(f"{source}:{line}: {field}: unknown value {_short(bad[0])}; "
                         f"allowed values: {', '.join(str(a) for a in allowed)}")


def _lock() -> "ReleaseLock":
    from trace_tui.release import release_lock

    return release_lock()


# --------------------------------------------------------------------------- resolving


def _suite_seeds(suite: str | None, lock: "ReleaseLock") -> list[int]:
    if suite == "trace_eval":
        return list(lock.trace_eval.seeds)
    if suite in ("trace_validation", "demo"):
        # The validation suite is one seed (42); the demo reuses it.
        return [lock.trace_validation.generation.seed]
    return []


def _suite_benchmarks(recipe: Recipe, lock: "ReleaseLock") -> list[BenchmarkRef]:
    suite = recipe.selection.suite
    if suite == "trace_eval":
        return [BenchmarkRef(key=b.key, rows=b.rows, display=b.display, category=b.category, route=b.route)
                for b in lock.trace_eval.benchmarks]
    if suite == "trace_validation":
        return [BenchmarkRef(key=VALIDATION_BENCHMARK, rows=lock.trace_validation.rows,
                             display="TRACE validation", category="TRACE", route="trace_validation")]
    if suite == "demo":
        return [BenchmarkRef(key=t.key, rows=t.rows, display=t.display or t.key, category="demo", route="demo")
                for t in recipe.demo_tasks]
    return []


def _suite_settings(recipe: Recipe, lock: "ReleaseLock") -> dict[str, Any]:
    suite = recipe.selection.suite
    if suite == "trace_eval":
        return lock.trace_eval.generation.model_dump()
    if suite in ("trace_validation", "demo"):
        base = lock.trace_validation.generation.model_dump()
        if suite == "demo":
            unknown = sorted(set(recipe.settings) - set(base))
            if unknown:
                raise UsageError(f"recipe {recipe.name}: settings: unknown setting {unknown[0]!r}",
                                 hint=f"allowed: {', '.join(base)}")
            base.update(recipe.settings)
        return base
    return {}


def _narrow(kind: str, recipe: Recipe, available: list[Any], wanted: list[Any] | None) -> list[Any]:
    if wanted is None:
        return available
    if not available:
        raise UsageError(f"recipe {recipe.name} selects no {kind}, so --{kind} cannot narrow it")
    bad = [w for w in wanted if w not in available]
    if bad:
        raise UsageError(f"--{kind}: {bad[0]!r} is not in recipe {recipe.name}",
                         hint=f"allowed: {', '.join(str(a) for a in available)}")
    wanted_set = set(wanted)
    return [a for a in available if a in wanted_set]  # keep the lock's order, drop repeats


def _store_entries(recipe: Recipe, models: list[Any], benchmarks: list[BenchmarkRef],
                   lock: "ReleaseLock") -> dict[str, list[str]]:
    """Expand each step's store needs into full entry names (derived from the lock, never retyped)."""
    from trace_tui.store.names import expand_needs

    model_names = [m.store_entry if isinstance(m, LocalModel) else m.id for m in models]
    # Only trace_eval benchmarks are store entries; validation and demo rows live in their datasets.
    bench_keys = [b.key for b in benchmarks] if recipe.selection.suite == "trace_eval" else []
    return {step.id: expand_needs(step.needs.store, lock, models=model_names, benchmarks=bench_keys)
            for step in recipe.steps}


def _config_data(recipe: Recipe, suite: str | None, suite_sha256: str | None, models: list[Any], seeds: list[int],
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


# The release evaluator's stage: its launcher runs the whole trace_eval suite (EXTERNAL-SUITE.md).
WHOLE_SUITE_STAGE = "trace_tui.stages.release_eval"


def _runs_the_release_evaluator(recipe: Recipe) -> bool:
    """A step runs the release evaluator, or a command on `--recipe full` (eval-preview previews it)."""
    for step in recipe.steps:
        run = list(step.run)
        if run and run[0] == WHOLE_SUITE_STAGE:
            return True
        if "--recipe" in run[:-1] and run[run.index("--recipe") + 1] == "full":
            return True
    return False


def resolve_recipe(recipe: Recipe | str, *, models: list[str] | None = None, seeds: list[int] | None = None,
                   benchmarks: list[str] | None = None, lock: "ReleaseLock | None" = None,
                   local_models: list[LocalModel] | None = None) -> ResolvedRecipe:
    """Turn a recipe's selection (narrowed by --models/--seeds/--benchmarks) into pins, slices and a run tag.

    ``local_models``: a user's own checkpoints, evaluated beside the selected release models (trace_eval only;
    with ``--models`` narrowing the release models, the user's are still included).
    """
    if isinstance(recipe, str):
        recipe = load_recipe(recipe, lock=lock)
    lock = lock or _lock()
    sel = recipe.selection
    if local_models and sel.suite != "trace_eval":
        raise UsageError(f"--local-model is for the external evaluation (recipe full), not {recipe.name!r}")

    # models
    training: TrainingTarget | None = None
    chosen: list[Any]
    if sel.suite == "demo":
        chosen = list(recipe.local_models)
    elif sel.train_scale is not None:
        base = lock.training_base_models[sel.train_scale]
        training = TrainingTarget(scale=sel.train_scale, base=base.ref, config=lock.training.configs[sel.train_scale])
        chosen = [m for m in lock.models if m.ref == base.ref]
    elif sel.models == "all":
        chosen = list(lock.models)
    else:
        by_id = {m.id: m for m in lock.models}
        chosen = [by_id[i] for i in dict.fromkeys(sel.models) if i in by_id]
    if local_models and models is None:
        ids = []  # the user's own checkpoints, plus only the release models they name with --models
    else:
        ids = _narrow("models", recipe, [m.id for m in chosen], models)
    chosen = [m for m in chosen if m.id in ids]
    for own in local_models or ():
        if any(m.id == own.id for m in chosen) or any(m.id == own.id for m in lock.models):
            raise UsageError(f"--local-model {own.id}: the id is taken by a release model", hint="choose another id")
        chosen.append(own)

    # seeds
    suite_seeds = _suite_seeds(sel.suite, lock)
    if sel.seeds == "all":
        avail_seeds = suite_seeds
    else:
        avail_seeds = [s for s in suite_seeds if s in set(sel.seeds)]
    if sel.suite == "demo" and not sel.seeds:
        avail_seeds = suite_seeds
    if sel.suite == "demo" and seeds:
        # The demo's tasks are synthetic and every row is seeded per request: any seed is a valid demo run.
        avail_seeds = list(dict.fromkeys(seeds))
    chosen_seeds = _narrow("seeds", recipe, avail_seeds, seeds)

    # benchmarks
    suite_benchmarks = _suite_benchmarks(recipe, lock)
    if sel.benchmarks == "all" or (sel.suite in ("trace_validation", "demo") and not sel.benchmarks):
        avail_b = suite_benchmarks
    else:
        wanted = set(sel.benchmarks)
        avail_b = [b for b in suite_benchmarks if b.key in wanted]
    keys = _narrow("benchmarks", recipe, [b.key for b in avail_b], benchmarks)
    chosen_b = [b for b in avail_b if b.key in set(keys)]
    if len(chosen_b) < len(suite_benchmarks) and _runs_the_release_evaluator(recipe):
        # Refused here, so preview, headless and the TUI refuse alike before anything starts.
        raise UsageError(f"recipe {recipe.name} runs the release evaluator, which takes no benchmark filter: "
                         f"it evaluates all {len(suite_benchmarks)} benchmarks "
                         f"({'--benchmarks ' + ','.join(keys) if benchmarks is not None else 'selection.benchmarks'}"
                         f" selects {len(chosen_b)})", hint="run it without --benchmarks")

    settings = _suite_settings(recipe, lock)
    suite_id, suite_sha = None, None
    if sel.suite == "trace_eval":
        suite_id, suite_sha = lock.trace_eval.suite_id, lock.published_hash("suite").sha256
    elif sel.suite == "trace_validation":
        # The lock pins this suite through rlvr/release_files.v1.json, not by a published hash.
        suite_id = lock.trace_validation.suite_id
    elif sel.suite == "demo":
        suite_id = "demo"

    slices: list[SliceKey] = []
    if sel.suite is not None:  # a suite selection defines the slice matrix
        slices = [SliceKey(model=m.id, seed=s, benchmark=b.key) for m in chosen for s in chosen_seeds for b in chosen_b]
    if sel.suite is not None and not slices:
        empty = next((k for k, v in (("models", chosen), ("seeds", chosen_seeds), ("benchmarks", chosen_b)) if not v),
                     "models")
        raise UsageError(f"recipe {recipe.name}: its selection gives 0 slices (no {empty} selected)",
                         hint=f"select at least one of selection.{empty}, or `all`")
    rows = {b.key: b.rows for b in chosen_b}
    rows_total = sum(rows[s.benchmark] for s in slices)
    store = _store_entries(recipe, chosen, chosen_b, lock)
    data = _config_data(recipe, suite_id, suite_sha, chosen, chosen_seeds, chosen_b, settings, training, store)
    sha = sha256_json(data)
    return ResolvedRecipe(recipe=recipe, suite=suite_id, suite_sha256=suite_sha, models=chosen, seeds=chosen_seeds,
                          benchmarks=chosen_b, settings=settings, slices=slices, rows_total=rows_total,
                          training=training, store_entries=store, config_sha256=sha,
                          run_tag=f"{recipe.name}-{sha[:12]}")


__all__ = [
    "BenchmarkRef", "DemoTask", "LocalModel", "Recipe", "ResolvedRecipe", "Selection", "SliceKey", "Step",
    "StepNeeds", "SYMBOLIC_NEEDS", "TrainingTarget", "VALIDATION_BENCHMARK", "known_recipes",
    "load_recipe", "parse_recipe", "resolve_recipe",
]

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
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trace_tui.common.digest import sha256_json
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.recipe.schema import (
    SYMBOLIC_NEEDS,
    VALIDATION_BENCHMARK,
    BenchmarkRef,
    DemoTask,
    LocalModel,
    Recipe,
    ResolvedRecipe,
    Selection,
    SliceKey,
    Step,
    StepNeeds,
    TrainingTarget,
    config_data,
)
from trace_tui.recipe.yaml_lines import (
    describe_validation_error,
    duplicate_key,
    node_line,
    one_line,
    short_value,
    too_long_integer,
)
from trace_tui.release import release_lock
from trace_tui.resources import recipes_dir as _dir
from trace_tui.stages.demo_tasks import GROUPS
from trace_tui.store.names import expand_needs
from trace_tui.workers import registry

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock


# --------------------------------------------------------------------------- loading


def recipes_dir() -> Path:
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
        raise UsageError(f"unknown recipe {short_value(text_name)}", hint=f"known recipes: {', '.join(known_recipes())}")
    else:
        try:
            is_file = path.is_file()
        except (OSError, ValueError):  # a name too long, or with a NUL byte
            is_file = False
        if not is_file:
            raise UsageError(f"recipe file {short_value(text_name)} not found (no such regular file)",
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

    # One parse (libyaml's where PyYAML has it): the node tree gives lines and repeated keys, and the
    # data is constructed from that same tree. A 2 MB file took 4.5 s parsed twice in pure Python.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        huge = too_long_integer(root)
        if huge is not None:
            raise UsageError(f"{source}:{huge[1]}: an integer of {huge[0]:,} digits is outside every allowed range")
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise UsageError(one_line(f"{where}: not valid YAML: {exc.problem or exc}")) from None
    except yaml.reader.ReaderError as exc:  # a control character or bad encoding
        line = text[: max(exc.position, 0)].count("\n") + 1
        raise UsageError(f"{source}:{line}: not valid YAML: character {exc.character!r} is not allowed") from None
    except RecursionError:
        raise UsageError(f"{source}: not valid YAML: nested too deeply") from None
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - yaml constructors raise ValueError/TypeError etc. on odd scalars
        raise UsageError(one_line(f"{source}: not valid YAML: {type(exc).__name__}: {exc}")) from None
    finally:
        loader.dispose()
    dup = duplicate_key(root)
    if dup is not None:
        raise UsageError(f"{source}:{dup[1]}: key {short_value(dup[0])} appears twice in the same mapping",
                         hint="keep one; YAML would silently use the last")
    if not isinstance(data, dict):
        raise UsageError(f"{source}:1: a recipe is a mapping with name, title, purpose, steps "
                         f"(got {type(data).__name__})")
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise UsageError(one_line(describe_validation_error(exc, root, source, Recipe))) from None
    except RecursionError:  # self-referencing YAML anchors
        raise UsageError(f"{source}: recipe nests too deeply (self-referencing anchors?)") from None
    _check_against_lock(recipe, root, source, lock)
    return recipe


def _check_against_lock(recipe: Recipe, root: Any, source: str, lock: "ReleaseLock | None") -> None:
    """Model ids, seeds and benchmark keys a recipe names must exist in the release lock."""
    sel = recipe.selection
    _check_selection(recipe, root, source)
    if sel.suite in (None, "demo"):
        if sel.suite is None and (sel.seeds or sel.benchmarks):
            line = node_line(root, ("selection",))
            raise UsageError(f"{source}:{line}: selection: seeds and benchmarks need a suite; "
                             "allowed values of selection.suite: trace_eval, trace_validation, demo")
        if sel.suite == "demo" and isinstance(sel.benchmarks, list) and sel.benchmarks:
            keys = [t.key for t in recipe.demo_tasks]
            _subset(sel.benchmarks, keys, source, node_line(root, ("selection", "benchmarks")), "selection.benchmarks")
        if sel.suite is None and isinstance(sel.models, list) and not sel.models and not recipe.settings:
            return
    lock = lock or _lock()
    if recipe.settings:
        allowed = list(type(lock.trace_validation.generation).model_fields)
        for key in recipe.settings:
            if key not in allowed:
                raise UsageError(f"{source}:{node_line(root, ('settings', key))}: settings.{key}: unknown setting; "
                                 f"allowed values: {', '.join(allowed)}")
        _check_settings(recipe, root, source, lock.trace_validation.generation.model_dump())
    if isinstance(sel.models, list) and sel.models:
        _subset(sel.models, [m.id for m in lock.models], source,
                node_line(root, ("selection", "models")), "selection.models")
    if sel.suite in ("trace_eval", "trace_validation"):
        if isinstance(sel.seeds, list) and sel.seeds:
            _subset(sel.seeds, _suite_seeds(sel.suite, lock), source,
                    node_line(root, ("selection", "seeds")), "selection.seeds")
        if isinstance(sel.benchmarks, list) and sel.benchmarks:
            _subset(sel.benchmarks, [b.key for b in _suite_benchmarks(recipe, lock)], source,
                    node_line(root, ("selection", "benchmarks")), "selection.benchmarks")


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
        line = node_line(root, ("settings", key))
        kind, low, high = SETTING_RANGES.get(key, (float, -math.inf, math.inf))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)):
            raise UsageError(f"{source}:{line}: settings.{key}: {short_value(value)} is not "
                             f"{'an integer' if kind is int else 'a number'}")
        bad_top_p = key == "top_p" and value <= 0
        if not math.isfinite(value) or not low <= value <= high or bad_top_p:
            raise UsageError(f"{source}:{line}: settings.{key}: {short_value(value)} is out of range; "
                             f"allowed values: {'above' if key == 'top_p' else 'from'} {low} to {high}")
    merged = {**base, **recipe.settings}
    lo, hi = merged.get("min_image_pixels"), merged.get("max_image_pixels")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        key = "min_image_pixels" if "min_image_pixels" in recipe.settings else "max_image_pixels"
        raise UsageError(f"{source}:{node_line(root, ('settings', key))}: settings: min_image_pixels {lo} is "
                         f"above max_image_pixels {hi}", hint="the smallest image size must not exceed the largest")


def _check_selection(recipe: Recipe, root: Any, source: str) -> None:
    """No empty lists, no repeated keys or seeds, seeds in range, task keys unique."""
    sel = recipe.selection
    for field in ("models", "seeds", "benchmarks"):
        values = getattr(sel, field)
        # Written out, an empty list would select nothing, yet some suites read an absent field as
        # "all": the two must not look alike.
        if values == [] and field in sel.model_fields_set:
            raise UsageError(f"{source}:{node_line(root, ('selection', field))}: selection.{field}: "
                             "an empty list selects nothing",
                             hint=f"list the {field} to run, write `all`, or leave the field out")
        if isinstance(values, list):
            dupes = [v for i, v in enumerate(values) if v in values[:i]]
            if dupes:
                raise UsageError(f"{source}:{node_line(root, ('selection', field))}: selection.{field}: "
                                 f"{short_value(dupes[0])} is listed twice")
    if isinstance(sel.seeds, list):
        for seed in sel.seeds:
            if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
                raise UsageError(f"{source}:{node_line(root, ('selection', 'seeds'))}: selection.seeds: "
                                 f"{short_value(seed)} is out of range; allowed values: {SEED_RANGE[0]} to {SEED_RANGE[1]}")
    keys = [t.key for t in recipe.demo_tasks]
    dupes = [k for i, k in enumerate(keys) if k in keys[:i]]
    if dupes:
        raise UsageError(f"{source}:{node_line(root, ('demo_tasks',))}: demo_tasks: key {dupes[0]!r} "
                         f"is used twice", hint="each task group has its own key")
    if keys and any(step.run[0] == registry.DEMO_PREPARE for step in recipe.steps):
        # demo_prepare writes rows for its own groups only: another key would be a benchmark with no rows
        # (a recipe with steps of its own may name its tasks as it likes)
        known = [g[0] for g in GROUPS]
        _subset(keys, known, source, node_line(root, ("demo_tasks",)), "demo_tasks.key")


def _subset(values: list[Any], allowed: list[Any], source: str, line: int, field: str) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UsageError(f"{source}:{line}: {field}: unknown value {short_value(bad[0])}; "
                         f"allowed values: {', '.join(str(a) for a in allowed)}")


def _lock() -> "ReleaseLock":
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
    model_names = [m.store_entry if isinstance(m, LocalModel) else m.id for m in models]
    # Only trace_eval benchmarks are store entries; validation and demo rows live in their datasets.
    bench_keys = [b.key for b in benchmarks] if recipe.selection.suite == "trace_eval" else []
    return {step.id: expand_needs(step.needs.store, lock, models=model_names, benchmarks=bench_keys)
            for step in recipe.steps}


# The release evaluator's stage: its launcher runs the whole trace_eval suite (EXTERNAL-SUITE.md).
WHOLE_SUITE_STAGE = registry.WHOLE_SUITE_STAGE


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
    data = config_data(recipe, suite_id, suite_sha, chosen, chosen_seeds, chosen_b, settings, training, store)
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


# --------------------------------------------------------------------------- resuming


def recorded_recipe(data: dict[str, Any], *, source: str) -> ResolvedRecipe:
    """A resolved recipe as a campaign recorded it (recipe.json's content), validated: a field that is not
    one a recipe may hold (a step whose run is not trace-tui's own, ...) is one CheckFailed line naming
    ``source`` and the field. What it says is shown, never run: a run takes trusted_resolved's recipe."""
    try:
        return ResolvedRecipe.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        more = len(exc.errors()) - 1
        raise CheckFailed(one_line(f"{source}: {field}: {err['msg'].removeprefix('Value error, ')}"
                                   + (f" (and {more} more)" if more else "")),
                          hint="the runner writes it from the recipe it ran; a campaign handed over is data") from None


def _model_field(model: Any, key: str) -> Any:
    """A resolved model's field, whether it is a pin or local model, or the dict recipe.json gave back."""
    return model.get(key) if isinstance(model, dict) else getattr(model, key, None)


def trusted_resolved(recorded: ResolvedRecipe, *, source: str, recipe_file: str | Path | None = None) -> ResolvedRecipe:
    """The recipe a resume runs: RECORDED's recipe as trace-tui ships it (or as the user's own recipe
    file says), resolved for RECORDED's selection, never the steps RECORDED carries.

    RECORDED may come from a campaign's recipe.json, which is data: a step added or changed there
    (a `run` of its own) must not run. Its steps may be fewer than the recipe's (steps skipped in the
    TUI), each equal to the recipe's step of that id. ``recipe_file``: the recipe file the user named
    (`--recipe FILE`), trusted like a shipped recipe when its name is RECORDED's. Raises UsageError,
    one line naming ``source``, when the recipe is neither, when a step is not the recipe's, or when
    the configuration is not RECORDED's (the recipe changed since, or RECORDED was edited).
    """
    name = recorded.recipe.name
    given = load_recipe(recipe_file) if recipe_file is not None else None
    if given is not None and given.name == name:
        recipe, whose = given, "the recipe file"  # the user's own choice on the command line
    elif name in known_recipes():
        recipe, whose = load_recipe(name), "trace-tui's"
    else:
        raise UsageError(f"{source}: recipe {short_value(name)} is not a recipe trace-tui ships, so it is not "
                         "resumed from what the campaign says",
                         hint="resume it with the recipe file it was made from: `trace-tui --recipe FILE --campaign DIR`")
    hint = f"run `trace-tui --recipe {name}` with the same selection: changed inputs are listed, `--redo` redoes them"
    ours = {s.id: s for s in recipe.steps}
    for step in recorded.recipe.steps:
        if step.id not in ours:
            raise UsageError(f"{source}: step {short_value(step.id)} is not a step of {whose} recipe {name}; "
                             "it is not run", hint=hint)
        if step != ours[step.id]:
            raise UsageError(f"{source}: step {step.id} differs from {whose} recipe {name} (run "
                             f"{short_value(' '.join(step.run))}); it is not run", hint=hint)
    kept = {s.id for s in recorded.recipe.steps}
    shipped_local = {m.id for m in recipe.local_models}
    # the user's own checkpoints (`--local-model`) are part of the selection; the demo's are the recipe's
    own = [m if isinstance(m, LocalModel) else LocalModel.model_validate(m) for m in recorded.models
           if _model_field(m, "store_entry") and _model_field(m, "id") not in shipped_local]
    own_ids = {m.id for m in own}
    named = [str(_model_field(m, "id")) for m in recorded.models if _model_field(m, "id") not in own_ids]
    selection = dict(models=named or None, seeds=list(recorded.seeds) or None,
                     benchmarks=[b.key for b in recorded.benchmarks] or None, local_models=own or None)
    try:
        full = resolve_recipe(recipe, **selection)
        again = full
        if kept != set(ours):  # steps skipped: the configuration of the steps that ran, in the campaign's folder
            fewer = recipe.model_copy(update={"steps": [s for s in recipe.steps if s.id in kept]})
            again = resolve_recipe(fewer, **selection).model_copy(update={"run_tag": full.run_tag})
    except (UsageError, ValidationError) as exc:
        why = exc.line() if isinstance(exc, UsageError) else one_line(str(exc))
        raise UsageError(f"{source}: its selection is not one recipe {name} can run ({why})", hint=hint) from None
    if recorded.config_sha256 not in (again.config_sha256, full.config_sha256):
        raise UsageError(f"{source}: records recipe {name} with another configuration than {whose} "
                         f"(configuration {short_value(recorded.config_sha256)[:12]}, the recipe's "
                         f"{again.config_sha256[:12]}): a setting or pin differs", hint=hint)
    return again

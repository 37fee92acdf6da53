"""Fuzzing the recipe loader: no input, however broken, produces a traceback — only a UsageError line.

Three generators: arbitrary text; YAML documents built from arbitrary
JSON-like values (so the schema, not the YAML parser, meets the garbage);
and single-field mutations of a valid recipe (the most realistic mistakes).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recipes_load import VALID

from trace_tui.errors import UsageError
from trace_tui.recipe.catalog import load_recipe, parse_recipe, resolve_recipe
from trace_tui.recipe.schema import Recipe

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=20)


def _parse(text: str) -> None:
    try:
        recipe = parse_recipe(text, source="fuzz.yaml")
    except UsageError as exc:
        line = exc.line()
        assert line.startswith("fuzz.yaml:") or line.startswith("fuzz.yaml "), line  # names the file
        assert "\n" not in line, line  # one line
        return
    assert isinstance(recipe, Recipe)
    try:
        resolve_recipe(recipe)
    except UsageError:
        pass


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text):
    _parse(text)


@FUZZ
@given(st.sampled_from(["{", "[", "&a [*a]", "!!python/object:os.system x", "a: !!binary zz", "? [a]\n: b",
                        "a: 2001-13-45", "- &x {a: *x}", "%YAML 9.9\n---\na", "\t- x", "a: b: c", "'"]),
       st.text(max_size=40))
def test_yaml_edge_cases(prefix, tail):
    _parse(prefix + tail)


@FUZZ
@given(values)
def test_arbitrary_documents(doc):
    _parse(yaml.safe_dump(doc, allow_unicode=True))


BASE = yaml.safe_load(VALID)
PATHS = [("name",), ("title",), ("selection",), ("selection", "suite"), ("selection", "models"),
         ("selection", "seeds"), ("selection", "benchmarks"), ("steps",), ("steps", 0), ("steps", 0, "stage"),
         ("steps", 0, "image"), ("steps", 0, "run"), ("steps", 0, "needs"), ("steps", 0, "needs", "gpus"),
         ("steps", 0, "needs", "store"), ("steps", 0, "needs", "gpu_profile"), ("steps", 0, "id"),
         ("settings",), ("local_models",), ("demo_tasks",), ("unknown",), ("steps", 0, "env")]


@FUZZ
@given(st.sampled_from(PATHS), values)
def test_single_field_mutations(path, value):
    doc = copy.deepcopy(BASE)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    _parse(yaml.safe_dump(doc, allow_unicode=True))


@FUZZ
@given(st.lists(st.text(max_size=15), max_size=3), st.lists(st.integers(-5, 100), max_size=3),
       st.lists(st.text(max_size=15), max_size=3))
def test_arbitrary_narrowing(models, seeds, benchmarks):
    try:
        resolve_recipe("full", models=models or None, seeds=seeds or None, benchmarks=benchmarks or None)
    except UsageError:
        pass


@FUZZ
@given(st.one_of(st.text(max_size=300), st.text(max_size=20).map(lambda t: t + ".yaml"),
                 st.sampled_from(["/", ".", "/dev/null", "/tmp", "x" * 5000 + ".yaml", "a\x00b.yaml"])))
def test_arbitrary_recipe_names(name):
    try:
        load_recipe(name)
    except UsageError as exc:
        assert "\n" not in exc.line()


# -- the bad values a user actually writes: each must be refused (exit 2), never accepted --------

DEMO = yaml.safe_load((Path(__file__).resolve().parents[1] / "recipes" / "demo.yaml").read_text())


def _refused(doc_or_text) -> str:
    """The one line a bad recipe gets; fails the test when the recipe (and its resolution) is accepted."""
    text = doc_or_text if isinstance(doc_or_text, str) else yaml.safe_dump(doc_or_text, allow_unicode=True)
    try:
        recipe = parse_recipe(text, source="fuzz.yaml")
        resolve_recipe(recipe)
    except UsageError as exc:
        line = exc.line()
        assert "\n" not in line and line.startswith(("fuzz.yaml", "recipe ")), line
        return line
    raise AssertionError(f"accepted: {text[:200]!r}")


def _with(doc: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


BAD_SETTINGS = [("max_tokens", 10**100), ("max_tokens", -1), ("max_tokens", "abc"), ("max_tokens", 0),
                ("max_tokens", 2.5), ("max_tokens", True), ("temperature", -3), ("temperature", float("inf")),
                ("temperature", float("nan")), ("top_p", 0), ("top_p", 1.5), ("seed", 10**40), ("seed", -1),
                ("min_image_pixels", 0), ("max_image_pixels", -5), ("top_k", -2), ("repetition_penalty", 0)]


@pytest.mark.parametrize(("key", "value"), BAD_SETTINGS)
def test_out_of_range_or_mistyped_settings_are_refused(key, value):
    line = _refused(_with(DEMO, ("settings", key), value))
    assert f"settings.{key}" in line


def test_min_pixels_above_max_pixels_is_refused():
    doc = _with(DEMO, ("settings", "min_image_pixels"), 60_000)
    assert "min_image_pixels" in _refused(_with(doc, ("settings", "max_image_pixels"), 50_000))


def test_duplicate_and_unknown_task_keys_are_refused():
    tasks = DEMO["demo_tasks"]
    assert "used twice" in _refused(_with(DEMO, ("demo_tasks",), tasks + [dict(tasks[0])]))
    assert "unknown value" in _refused(_with(DEMO, ("selection", "benchmarks"), ["counting", "nope"]))
    assert "listed twice" in _refused(_with(DEMO, ("selection", "benchmarks"), ["counting", "counting"]))
    assert "listed twice" in _refused(_with(BASE, ("selection", "benchmarks"), ["mmstar", "mmstar"]))
    assert "demo_tasks.key: unknown value 'abc'" in _refused(
        _with(DEMO, ("demo_tasks",), [dict(tasks[0], key="abc")] + tasks[1:]))


@pytest.mark.parametrize(("path", "value"), [(("demo_tasks", 0, "rows"), True), (("canonical",), 0),
                                             (("steps", 0, "needs"), {"gpus": True}),
                                             (("steps", 0, "needs"), {"disk_gib": True})])
def test_a_boolean_for_a_number_or_a_number_for_a_boolean_is_refused(path, value):
    _refused(_with(DEMO, path, value))


@pytest.mark.parametrize("seed", [10**40, -1, 2**32])
def test_seeds_out_of_range_are_refused(seed):
    assert "selection.seeds" in _refused(_with(BASE, ("selection", "seeds"), [seed]))
    assert "selection.seeds" in _refused(_with(DEMO, ("selection", "seeds"), [seed]))


@pytest.mark.parametrize("suite", ["trace_eval", "demo"])
@pytest.mark.parametrize("path", [("selection", "models"), ("selection", "seeds"), ("selection", "benchmarks")])
def test_empty_selection_lists_are_refused(path, suite):
    """An empty list is refused in every suite: the demo read `seeds: []` as all seeds (an absent field)."""
    err = _refused(_with(BASE if suite == "trace_eval" else DEMO, path, []))
    assert f"selection.{path[1]}: an empty list selects nothing" in err
    assert "leave the field out" in err


def test_a_demo_without_tasks_gives_no_slices_and_is_refused():
    assert "0 slices" in _refused(_with(DEMO, ("demo_tasks",), []))


@pytest.mark.parametrize("dup", ["name: mini\nname: other\n", "selection:\n  suite: demo\n  suite: trace_eval\n"])
def test_duplicate_yaml_keys_are_refused(dup):
    text = VALID.replace("name: mini\n", dup) if dup.startswith("name") else VALID.replace(
        "selection:\n  suite: trace_eval\n", dup)
    assert "appears twice" in _refused(text)


@FUZZ
@given(st.sampled_from(sorted({k for k, _ in BAD_SETTINGS} | {"min_image_pixels", "max_image_pixels"})),
       st.one_of(st.integers(min_value=10**10), st.integers(max_value=-2), st.text(max_size=8),
                 # floats outside every key's range: negative (below top_k's -1 too) or not finite; a float
                 # such as 2.0 is a valid temperature or repetition penalty, so it is no bad value here
                 st.floats(max_value=-2.0), st.sampled_from([float("nan"), float("inf"), float("-inf")]),
                 st.booleans()))
def test_fuzzed_bad_settings_are_refused(key, value):
    if key == "top_k" and isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 1_000_000:
        return
    _refused(_with(DEMO, ("settings", key), value))


@FUZZ
@given(st.lists(st.one_of(st.integers(min_value=2**32), st.integers(max_value=-1)), min_size=1, max_size=3))
def test_fuzzed_bad_seeds_are_refused(seeds):
    _refused(_with(BASE, ("selection", "seeds"), seeds))


@FUZZ
@given(st.sampled_from(["name", "title", "purpose", "selection", "steps"]), st.data())
def test_fuzzed_duplicate_top_level_keys_are_refused(key, data):
    lines = VALID.splitlines(keepends=True)
    i = next(n for n, ln in enumerate(lines) if ln.startswith(f"{key}:"))
    block = [lines[i]] + [ln for ln in lines[i + 1:] if ln.startswith(" ")][:0]
    at = data.draw(st.integers(0, len(lines)))
    while at < len(lines) and lines[at].startswith(" "):
        at += 1
    _refused("".join(lines[:at] + block + lines[at:]))


def test_an_integer_too_long_for_python_is_one_line_with_its_line():
    text = yaml.safe_dump(DEMO).replace("max_tokens: 32", "max_tokens: " + "9" * 5000)
    line = _refused(text)
    assert line.startswith("fuzz.yaml:") and "5,000 digits" in line and "sys.set_int_max_str_digits" not in line

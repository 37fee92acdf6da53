"""Fuzzing the recipe loader: no input, however broken, produces a traceback — only a UsageError line.

Three generators: arbitrary text; YAML documents built from arbitrary
JSON-like values (so the schema, not the YAML parser, meets the garbage);
and single-field mutations of a valid recipe (the most realistic mistakes).
"""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_tui.errors import UsageError
from trace_tui.recipes import Recipe, load_recipe, parse_recipe, resolve_recipe

from test_recipes_load import VALID

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

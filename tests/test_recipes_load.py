"""Recipes: the shipped files load and resolve against the real release lock; errors name file:line and field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trace_tui.errors import UsageError
from trace_tui.recipe.catalog import (
    SYMBOLIC_NEEDS,
    SliceKey,
    known_recipes,
    load_recipe,
    parse_recipe,
    recipes_dir,
    resolve_recipe,
)
from trace_tui.release import release_lock

GUIDE = ["preflight", "smoke-3b", "smoke-7b", "validation", "eval-setup", "eval-preview", "full", "verify", "demo"]

VALID = """\
name: mini
title: Mini
purpose: a small valid recipe
selection:
  suite: trace_eval
  models: [trace-qwen2.5-vl-3b]
  seeds: [42]
  benchmarks: [mmstar]
steps:
  - id: generate
    title: Generate
    stage: infer
    image: infer
    run: [trace_tui.stages.generate]
    per_slice: true
    needs:
      gpu_profile: generate
      store: [models, benchmarks]
      gpus: 1
"""


def test_every_recipe_of_the_release_guide_ships_and_loads():
    assert known_recipes() == GUIDE
    for name in GUIDE:
        r = load_recipe(name)
        assert r.name == name and r.steps and r.purpose


def test_full_is_the_paper_matrix():
    r = resolve_recipe("full")
    assert r.suite == "trace_eval_v1"
    assert r.suite_sha256 == release_lock().published_hash("suite").sha256
    assert len(r.models) == 8 and r.seeds == [42, 43, 44] and len(r.benchmarks) == 24
    assert len(r.slices) == 8 * 3 * 24 == 576
    assert r.rows_total == 787_320
    assert r.settings == release_lock().trace_eval.generation.model_dump()
    assert r.run_tag == f"full-{r.config_sha256[:12]}"
    steps = {s.id: s for s in r.recipe.steps}
    assert steps["generate"].image == "infer" and steps["generate"].env["RUN_GENERATION"] == "1"
    assert steps["score"].image == "score" and steps["score"].env["RUN_SCORING"] == "1"
    assert steps["summary"].stage == "host"


def test_validation_is_2000_rows_per_model_at_seed_42():
    r = resolve_recipe("validation")
    lock = release_lock()
    assert r.suite == lock.trace_validation.suite_id
    assert r.seeds == [lock.trace_validation.generation.seed] == [42]
    assert [b.key for b in r.benchmarks] == ["trace-validation"] and r.benchmarks[0].rows == 2000
    assert len(r.slices) == 8 and r.rows_total == 16_000
    assert [s.id for s in r.recipe.steps] == ["generate", "extract", "score"]
    assert r.recipe.steps[0].per_slice


def test_smoke_recipes_train_the_release_base_of_their_size():
    lock = release_lock()
    for scale in ("3B", "7B"):
        r = resolve_recipe(f"smoke-{scale.lower()}")
        assert r.training.scale == scale and r.training.base == lock.training_base_models[scale].ref
        assert r.training.config == lock.training.configs[scale]
        assert [m.ref for m in r.models] == [lock.training_base_models[scale].ref]
        assert not r.recipe.canonical and r.slices == []
        assert r.recipe.steps[0].stage == "train" and r.recipe.steps[0].confirm


def test_demo_profile_matches_the_demo_task_groups():
    from trace_tui.stages import demo_tasks

    r = resolve_recipe("demo")
    assert r.recipe.image_flavor == "cpu"
    assert [(b.key, b.rows) for b in r.benchmarks] == [(k, demo_tasks.ROWS_PER_GROUP) for k, _, _ in demo_tasks.GROUPS]
    assert r.settings["max_tokens"] == 32 and r.settings["max_image_pixels"] <= 50176
    assert all(s.needs.gpus == 0 and s.needs.gpu_profile is None for s in r.recipe.steps)
    assert [s.id for s in r.recipe.steps] == ["prepare", "train-smoke", "generate", "extract", "score", "verify"]
    assert r.rows_total == len(r.slices) * demo_tasks.ROWS_PER_GROUP


def test_recipe_files_never_retype_a_pinned_identity():
    """Revisions and hashes come from the release lock, never from a recipe file."""
    for path in Path(recipes_dir()).glob("*.yaml"):
        text = path.read_text()
        assert not re.search(r"\b[0-9a-f]{40}\b", text), path
        assert "@" not in text.replace("{", ""), path  # no owner/repo@revision
        for m in release_lock().models:
            assert m.repo_id not in text, (path, m.repo_id)


def test_store_needs_expand_through_the_lock():
    r = resolve_recipe("full", models=["trace-qwen2.5-vl-7b"])
    lock = release_lock()
    assert r.store_entries["generate"] == [f"model:{lock.model('trace-qwen2.5-vl-7b').ref}",
                                           *[f"benchmark:{b.key}" for b in lock.trace_eval.benchmarks],
                                           f"release:{lock.upstream.repository}@{lock.upstream.commit}"]
    assert r.store_entries["score"][0] == f"model:{lock.judge.ref}"
    assert set(SYMBOLIC_NEEDS) >= {"models", "judge", "release"}


def test_narrowing_keeps_the_lock_order_and_changes_the_run_tag():
    full = resolve_recipe("full")
    r = resolve_recipe("full", models=["trace-qwen2.5-vl-7b", "qwen2.5-vl-7b-base"], seeds=[44, 42])
    assert [m.id for m in r.models] == ["qwen2.5-vl-7b-base", "trace-qwen2.5-vl-7b"]
    assert r.seeds == [42, 44]
    first = full.benchmarks[0].key  # the suite's order
    assert len(r.slices) == 2 * 2 * 24 and r.rows_total == 2 * 2 * 32_805
    assert SliceKey(model="qwen2.5-vl-7b-base", seed=42, benchmark="mmstar") in r.slices
    assert r.slices[0].id == f"qwen2.5-vl-7b-base/42/{first}"
    assert r.run_tag != full.run_tag
    # the same command resolves to the same run tag (a rerun finds and resumes the campaign)
    again = resolve_recipe("full", models=["qwen2.5-vl-7b-base", "trace-qwen2.5-vl-7b"], seeds=[42, 44])
    assert again.run_tag == r.run_tag


@pytest.mark.parametrize("kwargs, needle", [
    ({"models": ["gpt-5"]}, "--models: 'gpt-5' is not in recipe full"),
    ({"seeds": [7]}, "--seeds: 7 is not in recipe full"),
    ({"benchmarks": ["mmlu"]}, "--benchmarks: 'mmlu' is not in recipe full"),
])
def test_narrowing_outside_the_recipe_lists_the_allowed_values(kwargs, needle):
    with pytest.raises(UsageError) as err:
        resolve_recipe("full", **kwargs)
    assert needle in err.value.line() and "allowed:" in err.value.line()


def test_narrowing_a_recipe_without_seeds_is_a_usage_error():
    with pytest.raises(UsageError, match="selects no seeds"):
        resolve_recipe("smoke-3b", seeds=[42])


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(UsageError) as err:
        load_recipe("fulll")
    line = err.value.line()
    assert "unknown recipe 'fulll'" in line and all(n in line for n in GUIDE)


def test_missing_recipe_file():
    with pytest.raises(UsageError, match="not found"):
        load_recipe("/nonexistent/x.yaml")


def test_a_recipe_file_by_path(tmp_path):
    p = tmp_path / "mini.yaml"
    p.write_text(VALID)
    r = resolve_recipe(load_recipe(str(p)))
    assert len(r.slices) == 1 and r.rows_total == 1500


def _err(text: str) -> str:
    with pytest.raises(UsageError) as err:
        parse_recipe(text, source="my.yaml")
    return err.value.line()


def test_error_names_file_line_field_and_allowed_values_for_a_literal():
    line = _err(VALID.replace("stage: infer", "stage: inference"))
    assert line.startswith("my.yaml:12: steps.0.stage: ")
    assert "'train', 'infer', 'score' or 'host'" in line and "inference" in line


def test_error_for_an_unknown_field_lists_the_allowed_fields():
    line = _err(VALID.replace("      gpu_profile: generate\n", "      gpu_profile: generate\n      gpu: 2\n"))
    assert line.startswith("my.yaml:18: steps.0.needs.gpu: unknown field")
    assert "allowed fields: gpus, gpu_memory_gib, gpu_profile" in line


def test_error_for_an_unknown_model_lists_the_lock_models():
    line = _err(VALID.replace("models: [trace-qwen2.5-vl-3b]", "models: [trace-3b]"))
    assert line.startswith("my.yaml:6: selection.models: unknown value 'trace-3b'; allowed values: ")
    assert all(m.id in line for m in release_lock().models)


def test_error_for_a_seed_outside_the_suite():
    line = _err(VALID.replace("seeds: [42]", "seeds: [41]"))
    assert line.startswith("my.yaml:7: selection.seeds: unknown value 41; allowed values: 42, 43, 44")


def test_error_for_an_unknown_benchmark():
    line = _err(VALID.replace("benchmarks: [mmstar]", "benchmarks: [mmstarr]"))
    assert line.startswith("my.yaml:8: selection.benchmarks: unknown value 'mmstarr'") and "erqa" in line


def test_error_for_an_unknown_store_need_lists_the_symbolic_names():
    line = _err(VALID.replace("store: [models, benchmarks]", "store: [modelz]"))
    assert line.startswith("my.yaml:18: steps.0.needs.store: unknown store entry") and "models, judge" in line


def test_error_for_a_missing_field_and_a_host_step_with_an_image():
    assert _err(VALID.replace("title: Mini\n", "")).startswith("my.yaml:1: title: required field is missing")
    line = _err(VALID.replace("stage: infer", "stage: host"))
    assert line.startswith("my.yaml:10: steps.0: ") and "leave out 'image'" in line


def test_error_for_release_recipes_that_retype_settings():
    line = _err(VALID + "settings: {max_tokens: 12}\n")
    assert "settings" in line and "release lock" in line


def test_error_for_bad_yaml_and_non_mappings():
    assert _err("name: [unclosed\n").startswith("my.yaml:2: not valid YAML")
    assert _err("- a\n- b\n").startswith("my.yaml:1: a recipe is a mapping")
    assert _err("").startswith("my.yaml:1: a recipe is a mapping")


def test_shipped_file_name_must_match(monkeypatch, tmp_path):
    (tmp_path / "alpha.yaml").write_text(VALID)
    monkeypatch.setattr("trace_tui.recipe.catalog.recipes_dir", lambda: tmp_path)
    with pytest.raises(UsageError, match="differs from the file name"):
        load_recipe("alpha")


def test_demo_settings_are_checked_against_the_generation_fields():
    text = (recipes_dir() / "demo.yaml").read_text().replace("  max_tokens: 32", "  max_token: 32")
    line = _err(text)
    assert re.match(r"my\.yaml:\d+: settings\.max_token: unknown setting; allowed values: seed, temperature", line)


def test_a_gpu_profile_needs_at_least_one_gpu():
    line = _err(VALID.replace("      gpus: 1\n", ""))
    assert line.startswith("my.yaml:16: steps.0.needs: gpu_profile 'generate' runs on GPUs: set gpus to at least 1")


def test_gpu_steps_name_their_gpu_count_for_the_engine():
    """The engine starts a GPU step on needs.gpus GPUs (or the plan's groups): never 0 for a GPU profile."""
    for name in known_recipes():
        for step in load_recipe(name).steps:
            assert (step.needs.gpus > 0) == (step.needs.gpu_profile is not None), (name, step.id)
    # the one-process smoke trainer does not shard: one (large) GPU
    assert load_recipe("smoke-7b").steps[0].needs.gpus == 1


def test_eval_setup_fetches_what_full_and_validation_read():
    steps = load_recipe("eval-setup").steps
    fetch = [s for s in steps if s.stage == "host"]
    assert [s.run[:5] for s in fetch] == [["trace_tui", "store", "fetch", "--recipe", "full"],
                                         ["trace_tui", "store", "fetch", "--recipe", "validation"]]
    assert all(s.needs.network and not s.needs.store for s in fetch)
    # then, offline in the score image, the release evaluator's own preparation from the store
    assert [(s.run, s.image, s.needs.network) for s in steps[len(fetch):]] == [
        (["trace_tui.stages.eval_prepare"], "score", False)]

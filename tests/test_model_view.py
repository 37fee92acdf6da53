"""The runtime view a validation model is generated from (trace_tui.stages.model_view): the release ran the
Game-RL checkpoint from a compatibility view (its preprocessor config's image processor renamed to the one
transformers 4.57.6 knows) and pinned that view's content; the generate worker runs the same view, only when
it has exactly the pinned content, and refuses a model that is neither."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stages_support import run_worker, sample_generate_job
from trace_tui.common.digest import sha256set, sha256_text
from trace_tui.stages.jobs import JobError, dir_sha256set, generation_inputs
from trace_tui.stages.model_view import VIEW_NAME, aliased_preprocessor_config, runtime_model


def _checkpoint_naming_qwen25(src: Path, dest: Path) -> Path:
    """A copy of SRC whose preprocessor config names the processor as the Game-RL checkpoint does."""
    shutil.copytree(src, dest)
    config = json.loads((dest / "preprocessor_config.json").read_text())
    config["image_processor_type"] = "Qwen2_5_VLImageProcessor"
    (dest / "preprocessor_config.json").write_text(json.dumps(config))
    return dest


def _view_set(model: Path) -> str:
    files, _ = dir_sha256set(model)
    aliased = aliased_preprocessor_config((model / "preprocessor_config.json").read_text())
    assert aliased is not None
    return sha256set({**files, "preprocessor_config.json": sha256_text(aliased)})


def test_the_validation_job_carries_the_content_the_release_ran_each_model_from():
    from trace_tui.release import release_lock

    lock = release_lock()
    for pin in lock.models:
        got = generation_inputs({"model": pin.model_dump(),
                                 "benchmark": {"key": "trace-validation", "route": "trace_validation"}})
        assert got["model"]["validation_sha256set"] == pin.published_revision_sets.get("trace_validation"), pin.id
    game_rl = next(m for m in lock.models if m.id == "game-rl-qwen2.5-vl-7b")
    assert generation_inputs({"model": game_rl.model_dump(), "benchmark": {"key": "trace-validation",
                              "route": "trace_validation"}})["model"]["validation_sha256set"].startswith("sha256set:")


def test_the_view_renames_the_processor_links_the_rest_and_has_the_pinned_content(tiny_qwen25vl_dir, tmp_path):
    model = _checkpoint_naming_qwen25(tiny_qwen25vl_dir, tmp_path / "store-model")
    files, current = dir_sha256set(model)
    pinned = _view_set(model)
    view, view_files, view_set = runtime_model("game-rl", model, files, current, pinned)
    assert view != model and view_set == pinned
    assert dir_sha256set(view) == (view_files, pinned)  # read through the links, the view is what was pinned
    assert json.loads((view / "preprocessor_config.json").read_text())["image_processor_type"] == "Qwen2VLImageProcessor"
    assert all((view / rel).is_symlink() for rel in files if rel != "preprocessor_config.json")
    assert dir_sha256set(model) == (files, current)  # the store's copy is untouched


def test_a_model_with_its_pinned_content_or_no_pin_runs_from_the_store(tiny_qwen25vl_dir):
    files, current = dir_sha256set(tiny_qwen25vl_dir)
    assert runtime_model("m", tiny_qwen25vl_dir, files, current, current) == (tiny_qwen25vl_dir, files, current)
    assert runtime_model("m", tiny_qwen25vl_dir, files, current, None) == (tiny_qwen25vl_dir, files, current)


def test_a_model_that_is_neither_its_pin_nor_its_view_is_refused_naming_both(tiny_qwen25vl_dir, tmp_path):
    files, current = dir_sha256set(tiny_qwen25vl_dir)
    other = "sha256set:" + "0" * 64
    with pytest.raises(JobError) as exc:
        runtime_model("trace-qwen2.5-vl-3b", tiny_qwen25vl_dir, files, current, other)
    line = exc.value.line()
    assert current in line and other in line and "store fetch" in line
    model = _checkpoint_naming_qwen25(tiny_qwen25vl_dir, tmp_path / "m")
    files, current = dir_sha256set(model)
    with pytest.raises(JobError, match="nor is its compatibility view"):
        runtime_model("game-rl", model, files, current, other)


@pytest.mark.slow
def test_the_generate_worker_runs_the_view_and_its_receipt_records_the_pinned_content(
        monkeypatch, tmp_path, tiny_qwen25vl_dir, trace_sample_dir):
    model = _checkpoint_naming_qwen25(tiny_qwen25vl_dir, tmp_path / "store-model")
    pinned = _view_set(model)
    job = sample_generate_job(model, trace_sample_dir, [0, 3])
    job["paths"]["model"]["validation_sha256set"] = pinned
    job["backend"] = "transformers"
    from trace_tui.stages import generate

    (tmp_path / "campaign").mkdir()
    receipt, _events = run_worker(monkeypatch, tmp_path / "campaign", tmp_path / "store", generate.run, job)
    assert receipt["content"]["model"]["sha256set"] == pinned
    assert receipt["content"]["model"]["compatibility_view"] == VIEW_NAME
    assert len(receipt["content"]["responses"]) == 2
    assert json.loads((model / "preprocessor_config.json").read_text())["image_processor_type"] == \
        "Qwen2_5_VLImageProcessor"

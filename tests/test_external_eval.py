"""The release evaluator driven from outside, tested on campaign layouts written here.

The evaluator needs GPUs and the benchmark data, neither of which exists on
this machine; these layouts follow EXTERNAL-SUITE.md's "Campaign layout"
exactly, with scores taken from the real results.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trace_tui.evaluator import launcher, layout
from trace_tui.external.compare import reproduction
from trace_tui.release import release_lock

LOCK = release_lock()
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}
SLUG = {m.id: m.evaluator_slug for m in LOCK.models}


def _published(release_dir: Path) -> dict[tuple[str, int, str], float]:
    data = json.loads((release_dir / LOCK.trace_eval.results_path).read_text())
    return {(r["model_id"], r["seed"], r["benchmark_id"]): r["score"] for r in data["scores"]["benchmark_scores"]}


def write_generation(root: Path, slug: str, seed: int, bench: str, rows: int, expected: int) -> None:
    run = root / f"seed_{seed}" / "runs" / bench / slug / "run0"
    (run / "api_row_results").mkdir(parents=True, exist_ok=True)
    for i in range(rows):
        (run / "api_row_results" / f"{i}.{hashlib.sha256(str(i).encode()).hexdigest()[:16]}.json").write_text("{}")
    if rows == expected:
        (run / "generation_summary.json").write_text(json.dumps({"rows": rows, "expected_rows": expected}))


def write_scores(root: Path, scores: dict[tuple[str, int, str], float]) -> None:
    by_seed: dict[int, list] = {}
    for (model, seed, bench), score in scores.items():
        slug = SLUG[model]
        run = root / "scoring" / f"seed_{seed}" / "benchmark" / bench / slug / "run0"
        run.mkdir(parents=True, exist_ok=True)
        key = "accuracy" if bench == "mme_reasoning" else "score"  # MME-Reasoning reports accuracy
        path = run / "scores.json"
        path.write_text(json.dumps({key: score}))
        by_seed.setdefault(seed, []).append({
            "benchmark_key": bench, "model_slug": slug, "rows": ROWS[bench], "score": score,
            "scores_path": path.relative_to(root).as_posix(),
            "scores_sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    for seed, slices in by_seed.items():
        (root / "scoring" / f"score_campaign_completion_seed_{seed}.json").write_text(json.dumps(
            {"expected_slices": len(slices), "completed_slices": len(slices), "slices": slices}))


TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]


@pytest.fixture()
def finished(tmp_path, trace_release_dir):
    pub = _published(trace_release_dir)
    scores = {k: v for k, v in pub.items() if k[0] in TWO}
    write_scores(tmp_path, scores)
    return tmp_path, scores


def _scan(root: Path, models=TWO, seeds=(42, 43, 44)):
    return layout.scan_campaign(root, slugs=[SLUG[m] for m in models], seeds=list(seeds), rows=ROWS)


def test_partial_generation_counts_rows_per_slice(tmp_path):
    write_generation(tmp_path, SLUG[TWO[0]], 42, "chartqapro", 100, ROWS["chartqapro"])
    write_generation(tmp_path, SLUG[TWO[0]], 42, "mathvista", ROWS["mathvista"], ROWS["mathvista"])
    # a temp file in flight is not a finished row
    next((tmp_path / "seed_42" / "runs" / "chartqapro").rglob("api_row_results")).joinpath(".5.json.tmp").write_text("")
    slices = {(s.seed, s.benchmark): s for s in _scan(tmp_path, models=TWO[:1], seeds=[42])}
    assert len(slices) == 24
    assert slices[(42, "chartqapro")].rows_done == 100 and slices[(42, "chartqapro")].phase == "generating"
    assert slices[(42, "mathvista")].generation_complete and slices[(42, "mathvista")].phase == "generated"
    assert slices[(42, "mmstar")].rows_done == 0
    assert sum(s.rows_expected for s in slices.values()) == LOCK.trace_eval.rows_per_model_seed


def test_a_resumed_slice_is_seen_where_it_stopped(tmp_path):
    write_generation(tmp_path, SLUG[TWO[0]], 43, "chartqapro", 250, ROWS["chartqapro"])
    (slice_,) = [s for s in _scan(tmp_path, models=TWO[:1], seeds=[43]) if s.benchmark == "chartqapro"]
    assert (slice_.rows_done, slice_.generation_complete) == (250, False)
    write_generation(tmp_path, SLUG[TWO[0]], 43, "chartqapro", ROWS["chartqapro"], ROWS["chartqapro"])
    (slice_,) = [s for s in _scan(tmp_path, models=TWO[:1], seeds=[43]) if s.benchmark == "chartqapro"]
    assert slice_.generation_complete and slice_.rows_done == ROWS["chartqapro"]


def test_finished_campaign_equal_to_the_release_is_all_within(finished, trace_release_dir):
    root, _ = finished
    slices = _scan(root)
    assert all(s.score is not None for s in slices)
    assert layout.receipt_problems(root, slices, [42, 43, 44]) == []
    rep = reproduction(slices, LOCK, trace_release_dir)
    assert len(rep.slices) == 2 * 3 * 24 and not rep.outside and not rep.unpublished
    assert rep.verdict_line().startswith("all 144 reproduced scores are within the canonical spread")
    assert {o.model: o.verdict for o in rep.overall} == {m: "within" for m in TWO}
    for o in rep.overall:
        assert abs(o.difference) < 1e-9
    md = rep.tables.to_markdown()
    assert "3B Base" in md and "3B TRACE (Δ)" in md


def test_a_benchmark_shifted_by_five_points_is_named(finished, trace_release_dir):
    root, scores = finished
    shifted = dict(scores)
    key = ("trace-qwen2.5-vl-3b", 43, "mathvista")
    shifted[key] += 5.0
    write_scores(root, shifted)
    rep = reproduction(_scan(root), LOCK, trace_release_dir)
    assert [(c.model, c.seed, c.benchmark) for c in rep.outside] == [key]
    assert "trace-qwen2.5-vl-3b/43/mathvista (+5.00)" in rep.verdict_line()


def test_a_score_file_changed_after_its_receipt_is_reported(finished):
    root, _ = finished
    path = next((root / "scoring" / "seed_44").rglob("scores.json"))
    path.write_text(json.dumps({"score": 1.0}))
    problems = layout.receipt_problems(root, _scan(root), [42, 43, 44])
    assert any(path.relative_to(root).as_posix() in p and "sha256 differs" in p for p in problems)


def _models():
    return [launcher.EvaluatorModel(model_id=m.id, slug=m.evaluator_slug, path=f"/store/models/{m.evaluator_slug}",
                                    revision=m.revision, source=m.ref, label=m.label)
            for m in LOCK.models if m.id in TWO]


def test_launcher_command_line_as_data():
    models = _models()
    argv = launcher.launcher_argv(models, [42, 43], "full-abc", deltas=launcher.deltas_for(
        models, {m.id: m.base_model_id for m in LOCK.models if m.base_model_id}))
    assert argv[:2] == ["bash", "rlvr/evaluation/scripts/run_trace_eval.sh"]
    i = argv.index("--model")
    assert argv[i:i + 6] == ["--model", "qwen25vl3b-base", "/store/models/qwen25vl3b-base",
                             "66285546d2b821cf421d4f5eb2576359d3770cd3",
                             "Qwen/Qwen2.5-VL-3B-Instruct@66285546d2b821cf421d4f5eb2576359d3770cd3",
                             "Qwen2.5-VL-3B Base"]
    assert argv[argv.index("--seeds") + 1: argv.index("--seeds") + 3] == ["42", "43"]
    assert argv[argv.index("--run-tag") + 1] == "full-abc"
    delta = argv[argv.index("--delta") + 1]
    assert delta.endswith(f"={models[1].slug}={models[0].slug}")
    assert "--print-config" not in argv and launcher.launcher_argv(models, [42], "t", print_config=True)[-1] == "--print-config"


@pytest.mark.parametrize("phase,on,off", [("generate", "RUN_GENERATION", "RUN_SCORING"),
                                          ("score", "RUN_SCORING", "RUN_GENERATION")])
def test_phase_environment(phase, on, off):
    env = launcher.launcher_env(phase, [[0, 1], [2, 3]])
    assert env[on] == "1" and env[off] == "0" and env["RUN_SUMMARY"] == "0"
    assert env["GPU_GROUPS"] == "0,1 2,3"


# As the release launcher prints it (labels unquoted; test_release_evaluator runs the launcher itself).
RECORDED_PRINT_CONFIG = """\
suite=trace_eval_v1
run_tag=full-abc
seeds=42 43
model=qwen25vl3b-base path=/store/models/qwen25vl3b-base revision=66285546d2b821cf421d4f5eb2576359d3770cd3 source=Qwen/Qwen2.5-VL-3B-Instruct@66285546d2b821cf421d4f5eb2576359d3770cd3 label=Qwen2.5-VL-3B Base
model=trace-qwen25vl3b path=/store/models/trace-qwen25vl3b revision=2ec2374d5c219e6b12e26bda93d3b3adeb1e30c5 source=maveryn/trace-qwen2.5-vl-3b@2ec2374d5c219e6b12e26bda93d3b3adeb1e30c5 label=TRACE Qwen2.5-VL 3B
delta=TRACE Qwen2.5-VL 3B - Qwen2.5-VL-3B Base=trace-qwen25vl3b=qwen25vl3b-base
"""


def test_print_config_parsing_and_agreement():
    printed = launcher.parse_print_config(RECORDED_PRINT_CONFIG)
    assert printed.suite == "trace_eval_v1" and printed.run_tag == "full-abc" and printed.seeds == [42, 43]
    assert [m["model"] for m in printed.models] == ["qwen25vl3b-base", "trace-qwen25vl3b"]
    assert printed.models[0]["label"] == "Qwen2.5-VL-3B Base"
    assert launcher.config_mismatches(printed, _models(), [42, 43], "full-abc", "trace_eval_v1") == []
    wrong = launcher.config_mismatches(printed, _models(), [42, 43, 44], "full-xyz", "trace_eval_v1")
    assert "seeds [42, 43], expected [42, 43, 44]" in wrong and any("run_tag" in w for w in wrong)

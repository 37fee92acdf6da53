"""build_release_results.py --check, the release's own builder of results.json, run on a campaign.

The builder reads the sanitized score metadata its campaigns were published as on the Hub
(maveryn/trace-eval-runs: per run, metadata/manifest.json, results/benchmark_scores.json,
runs/<run>.json, models/<model>.json) and recomputes every table of results.json. That
metadata is not here, so a campaign of all 576 slices (8 models x 3 seeds x 24 benchmarks,
laid out with the evaluator's own functions, tests/evaluator_layout.py) is scored with
the published scores, and its completion receipts are written out as that metadata. The
publish pipeline that does this in the release needs the per-row archives of a GPU run,
so the metadata files are written here; whether they are what the builder reads is
decided by the builder itself: its --check must accept the published results.json, with
only the two digests of the files written here put in place of the Hub's (the model
descriptors and run records come out byte-identical, their digests included).

Then our tables from the same campaign (the per-slice scan, the report's aggregates) must
equal the builder's, and a campaign with one score changed must be stale to --check.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import evaluator_layout as lay
import pytest
from fixtures_evaluator import run_script

from trace_tui.evaluator import layout
from trace_tui.external.compare import records_from_slices
from trace_tui.release import release_lock
from trace_tui.verify import aggregate as agg

LOCK = release_lock()
SEEDS = list(LOCK.trace_eval.seeds)
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}
CATEGORIES: dict[str, list[str]] = {}
for _b in LOCK.trace_eval.benchmarks:
    CATEGORIES.setdefault(_b.category, []).append(_b.key)
SLUG = {m.id: m.evaluator_slug for m in LOCK.models}
MODEL_OF = {slug: model for model, slug in SLUG.items()}
SHIFTED = ("trace-qwen2.5-vl-7b", 44, "countqa")
# The builder's local folder for each Hub revision of maveryn/trace-eval-runs (its --inputs-root help).
REVISION_DIRS = {"4178a839b689babe16f8ac36f0de7b1b2c5ef36c": "rev-4178",
                 "4ca25af7a4d7daa644e6f35e070dbed1af078321": "rev-4ca25"}


def _canonical(value) -> bytes:
    """The metadata files' serialization (the model descriptors' published digests are over exactly this)."""
    return (json.dumps(value, ensure_ascii=True, allow_nan=False, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _published(release_dir: Path) -> tuple[bytes, dict]:
    raw = (release_dir / LOCK.trace_eval.results_path).read_bytes()
    return raw, json.loads(raw)


def scored_campaign(checkout: Path, root: Path, published: dict, shift: float = 0.0) -> Path:
    """All 576 slices generated and scored with the published score of each (one shifted by SHIFT)."""
    lay.use(checkout)
    dataset = lay.write_dataset_manifest(root.parent / f"{root.name}-dataset.json")
    models = {m.evaluator_slug: f"/models/{m.evaluator_slug}" for m in LOCK.models}
    scores = {(r["model_id"], r["seed"], r["benchmark_id"]): r["score"] for r in published["scores"]["benchmark_scores"]}
    scores[SHIFTED] += shift
    for seed in SEEDS:
        for m in LOCK.models:
            for bench in ROWS:
                lay.write_generation(root, checkout, slug=m.evaluator_slug, model=models[m.evaluator_slug],
                                     revision=m.revision, seed=seed, bench=bench, rows=ROWS[bench], dataset=dataset,
                                     row_files=False)
        lay.write_scores(root, checkout, seed=seed, models=models, dataset=dataset,
                         scores={(SLUG[m], b): v for (m, s, b), v in scores.items() if s == seed})
    return root


def write_run_metadata(campaign: Path, published: dict, inputs: Path) -> dict[str, tuple[str, str]]:
    """The campaign's completion receipts as the Hub metadata the builder reads, one bundle per published run
    (its models, run record and selection digests from results.json). Returns run_id -> (manifest sha256,
    result sha256) of what was written."""
    scored = {}
    for seed in SEEDS:
        receipt = json.loads((campaign / f"scoring/score_campaign_completion_seed_{seed}.json").read_text())
        for s in receipt["slices"]:
            scored[(MODEL_OF[s["model_slug"]], seed, s["benchmark_key"])] = (s["score"], s["rows"])
    run_of = {m["model_id"]: m["source_run_id"] for m in published["models"]}
    digests = {}
    for source in published["source_artifacts"]:
        run = source["run_id"]
        root = inputs / REVISION_DIRS[source["repository_revision"]] / "runs" / run
        ids = [m for m in LOCK.models if run_of[m.id] == run]
        rows = [{"model_id": m.id, "seed": seed, "benchmark_id": bench, "score": scored[(m.id, seed, bench)][0],
                 "evaluated_rows": scored[(m.id, seed, bench)][1], "scoring_scope": "aggregate"}
                for m in ids for seed in SEEDS for bench in ROWS]
        files = {"metadata/results/benchmark_scores.json": {
                     "schema_version": "trace_eval_results_v1", "suite_id": "trace_eval_v1", "run_id": run,
                     "score_unit": "percent", "aggregation": "unweighted_macro_mean", "benchmark_scores": rows},
                 f"metadata/runs/{run}.json": source["run_metadata"]}
        for m in published["models"]:
            if m["source_run_id"] == run:
                descriptor = {k: v for k, v in m.items() if k not in ("parameter_scale", "source_run_id", "source_sha256")}
                files[f"metadata/models/{m['model_id']}.json"] = descriptor
        listed = []
        for rel, value in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_canonical(value))
            listed.append({"path": rel, "size": path.stat().st_size,
                           "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
        manifest = root / "metadata/manifest.json"
        manifest.write_bytes(_canonical({
            "run_ids": [run], "suite_id": "trace_eval_v1", "metadata_files": listed,
            "source_selection_sha256": source["source_selection_sha256"],
            "source_slice_set_sha256": source["source_slice_set_sha256"]}))
        digests[run] = (hashlib.sha256(manifest.read_bytes()).hexdigest(),
                        next(f["sha256"] for f in listed if f["path"] == "metadata/results/benchmark_scores.json"))
    return digests


def _with_our_digests(raw: bytes, published: dict, digests: dict[str, tuple[str, str]]) -> bytes:
    """results.json with the Hub manifest and result digests replaced by those of the files written here."""
    text = raw.decode()
    for source in published["source_artifacts"]:
        manifest, result = digests[source["run_id"]]
        for old, new in ((source["manifest_sha256"], manifest), (source["result_sha256"], result)):
            assert text.count(old) == 1
            text = text.replace(old, new)
    return text.encode()


def _check(checkout: Path, inputs: Path, output: Path):
    return run_script(checkout, "build_release_results.py", "--inputs-root", str(inputs), "--check",
                      "--output", str(output))


@pytest.fixture(scope="module")
def equal(release_evaluator, tmp_path_factory, trace_release_dir):
    raw, published = _published(trace_release_dir)
    base = tmp_path_factory.mktemp("release-results")
    campaign = scored_campaign(release_evaluator, base / "campaign", published)
    digests = write_run_metadata(campaign, published, base / "inputs")
    expected = base / "results.json"
    expected.write_bytes(_with_our_digests(raw, published, digests))
    return campaign, base / "inputs", expected, published


def test_the_builder_checks_the_published_results_from_a_campaign(equal, release_evaluator):
    """--check passes: every table, model and run record of results.json, byte for byte, is what the builder
    recomputes from the campaign's receipts (only the two digests of files written here differ from the Hub's)."""
    campaign, inputs, expected, published = equal
    done = _check(release_evaluator, inputs, expected)
    assert done.returncode == 0, done.stderr[-800:]
    assert f"Verified canonical release results: {expected}" in done.stdout
    # the model descriptors written here are the published files themselves: their digests are untouched
    assert [m["source_sha256"] for m in json.loads(expected.read_text())["models"]] == \
        [m["source_sha256"] for m in published["models"]]


def test_our_tables_from_the_campaign_equal_the_builders(equal, release_evaluator, tmp_path):
    """Our scan of the same campaign and the report's aggregates against what the builder writes: every
    per-slice score, benchmark mean/std, category and overall summary and every paired change."""
    campaign, inputs, _, _ = equal
    out = tmp_path / "results.json"
    done = run_script(release_evaluator, "build_release_results.py", "--inputs-root", str(inputs), "--output", str(out))
    assert done.returncode == 0, done.stderr[-800:]
    theirs = json.loads(out.read_text())
    slices = layout.scan_campaign(campaign, slugs=list(MODEL_OF), seeds=SEEDS, rows=ROWS)
    assert len(slices) == 576 and all(s.score is not None and s.generation_complete for s in slices)
    records = records_from_slices(slices, MODEL_OF)
    scores = theirs["scores"]

    def close(a: float | None, b: float, what) -> None:
        assert a is not None and abs(a - b) < 1e-9, (what, a, b)

    assert {(r.model_id, r.seed, r.benchmark_id): r.score for r in records} == \
        {(r["model_id"], r["seed"], r["benchmark_id"]): r["score"] for r in scores["benchmark_scores"]}
    bench = agg.benchmark_summaries(records)
    for row in scores["benchmark_summaries"]:
        mine = bench[(row["model_id"], row["benchmark_id"])]
        close(mine.mean, row["mean"], row["benchmark_id"])
        close(mine.stddev, row["stddev"], row["benchmark_id"])
    cats = agg.category_summaries(records, CATEGORIES)
    assert len(scores["category_summaries"]) == 8 * 6
    for row in scores["category_summaries"]:
        mine = cats[(row["model_id"], row["category_name"])]
        close(mine.mean, row["mean"], row["category_name"])
        close(mine.stddev, row["stddev"], row["category_name"])
    overall = agg.overall_summaries(records)
    for row in scores["overall_summaries"]:
        close(overall[row["model_id"]].mean, row["mean"], row["model_id"])
        close(overall[row["model_id"]].stddev, row["stddev"], row["model_id"])
    # the paired changes against each model's base: the release's comparisons are our lock's base models
    assert [(c["model_id"], c["base_model_id"]) for c in theirs["comparisons"]] == \
        [(m.id, m.base_model_id) for m in LOCK.models if m.base_model_id]
    for c in theirs["comparisons"]:
        delta = agg.overall_delta(records, c["model_id"], c["base_model_id"])
        close(delta.mean, c["overall_delta"]["mean"], c["model_id"])
        close(delta.stddev, c["overall_delta"]["stddev"], c["model_id"])
        assert {s: round(v, 9) for s, v in delta.seed_values.items()} == \
            {d["seed"]: round(d["delta"], 9) for d in c["overall_delta"]["seed_values"]}
        per_bench = agg.benchmark_deltas(records, c["model_id"], c["base_model_id"])
        for d in c["benchmark_deltas"]:
            close(per_bench[d["benchmark_id"]].mean, d["mean"], (c["model_id"], d["benchmark_id"]))


def test_a_campaign_with_one_score_changed_is_stale_to_the_builder_and_to_us(release_evaluator, tmp_path,
                                                                             trace_release_dir):
    """One of 576 scores 5 points higher: the builder's --check refuses the published results.json, and our
    comparison of the campaign with results.json names that slice and no other."""
    from trace_tui.external.compare import reproduction

    raw, published = _published(trace_release_dir)
    campaign = scored_campaign(release_evaluator, tmp_path / "campaign", published, shift=5.0)
    digests = write_run_metadata(campaign, published, tmp_path / "inputs")
    expected = tmp_path / "results.json"
    expected.write_bytes(_with_our_digests(raw, published, digests))
    done = _check(release_evaluator, tmp_path / "inputs", expected)
    assert done.returncode != 0 and f"canonical output is stale: {expected}" in done.stderr
    slices = layout.scan_campaign(campaign, slugs=list(MODEL_OF), seeds=SEEDS, rows=ROWS)
    ours = reproduction(slices, LOCK, trace_release_dir)
    assert [(c.model, c.seed, c.benchmark) for c in ours.slices if c.verdict == "outside"] == [SHIFTED]

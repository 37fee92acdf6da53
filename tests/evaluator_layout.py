"""Campaign layouts of the release evaluator, written with the evaluator's own functions.

What run_trace_eval.sh leaves behind without a GPU cannot be produced here (generation
and judging need vLLM endpoints), so tests and the GPU stand-in write that layout
themselves. Every path, hash and contract field comes from the evaluator's code in the
laid-out checkout (benchmark_queue_lib.run_dir/score_path, the generation contract hash,
the evaluator and code provenance, the suite): `use(checkout)` puts its scripts on
sys.path. Only the per-row responses and scores are made up. Whether the layout is
right is decided by the evaluator's status_trace_eval.py and verify_trace_eval.py,
which the tests run on it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

SCRIPTS = "rlvr/evaluation/scripts"


def use(checkout: Path) -> None:
    """The evaluator's scripts importable from CHECKOUT. Scripts imported earlier from a checkout that is gone
    (a test's own copy, removed once that test passed) are dropped first, with what was read from them."""
    gone = [name for name, mod in sys.modules.items()
            if f"/{SCRIPTS}/" in (getattr(mod, "__file__", None) or "") and not Path(mod.__file__).exists()]
    if gone:
        for name in gone:
            del sys.modules[name]
        sys.path[:] = [p for p in sys.path if not (p.endswith(SCRIPTS) and not Path(p).is_dir())]
        suite.cache_clear()
        provenance.cache_clear()
    path = str(Path(checkout).resolve() / SCRIPTS)
    if path not in sys.path:
        sys.path.insert(0, path)


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def suite() -> Any:
    from trace_eval_suite import load_trace_eval_suite

    return load_trace_eval_suite()


@cache
def provenance(checkout: str) -> tuple[str, str]:
    """(evaluator provenance sha256, code hash) of the checkout, as the launcher computes them."""
    from trace_eval_code_provenance import trace_eval_code_sha256
    from trace_eval_evaluator_provenance import evaluator_provenance_sha256

    root = Path(checkout).resolve()
    vlm = root / "external" / "VLMEvalKit"
    evaluator = evaluator_provenance_sha256(repo_root=root, vlmeval_root=vlm)
    return evaluator, trace_eval_code_sha256(repo_root=root, vlmeval_root=vlm, evaluator_sha256=evaluator)


def write_dataset_manifest(path: Path, rows: dict[str, int] | None = None) -> dict[str, str]:
    """A dataset manifest with the suite's view and row receipts (the datasets themselves are not here)."""
    from trace_eval_media_contract import DATASET_MANIFEST_SCHEMA

    s = suite()
    rows = rows or s.rows_by_benchmark
    snapshot = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    _write(path, {"schema_version": DATASET_MANIFEST_SCHEMA, "suite_id": s.suite_id,
                  "suite_sha256": s.manifest_sha256,
                  "dataset_views": {s.dataset_manifest_view: list(s.benchmark_keys)},
                  "view_snapshot_sha256": {s.dataset_manifest_view: snapshot}, "dataset_snapshot_sha256": snapshot,
                  "datasets": {k: {"status": "ready", "key": k, "rows": n} for k, n in rows.items()}})
    return {"snapshot": snapshot, "revision": f"{DATASET_MANIFEST_SCHEMA}:{snapshot}"}


def run_dir(root: Path, seed: int, bench: str, slug: str) -> Path:
    from benchmark_queue_lib import run_dir as _run_dir, spec_by_key

    return _run_dir(spec_by_key(bench), slug, Path(root) / f"seed_{seed}" / "runs")


def score_file(root: Path, seed: int, bench: str, slug: str) -> Path:
    from benchmark_queue_lib import score_path, spec_by_key

    return score_path(spec_by_key(bench), slug, Path(root) / "scoring" / f"seed_{seed}" / "benchmark")


def write_generation(root: Path, checkout: Path, *, slug: str, model: str, revision: str, seed: int, bench: str,
                     rows: int, dataset: dict[str, str], row_files: bool = True) -> Path:
    """ROWS finished rows of one slice; its generation_summary.json once all the suite's rows are there.

    ``row_files=False`` leaves out the per-row files of a finished slice (thousands of them) where only
    its summary is read: the evaluator's verify and status take a finished slice's rows from its summary.
    """
    from trace_eval_campaign_verification import _expected_generation_contract_hash
    from trace_eval_media_contract import (GENERATION_CONTRACT_VERSION, MEDIA_CONTRACT_VERSION, MEDIA_TRANSPORT,
                                           QWEN_MAX_IMAGE_PIXELS, QWEN_MIN_IMAGE_PIXELS)

    expected = suite().rows_by_benchmark[bench]
    out = run_dir(root, seed, bench, slug)
    rows_dir = out / "api_row_results"
    rows_dir.mkdir(parents=True, exist_ok=True)
    for i in range(rows if row_files or rows != expected else 0):
        digest = hashlib.sha256(f"{slug}/{seed}/{bench}/{i}".encode()).hexdigest()[:16]
        (rows_dir / f"{i}.{digest}.json").write_text(json.dumps({"index": i, "response": "A"}), encoding="utf-8")
    if rows == expected:
        _, code = provenance(str(checkout))
        contract = _expected_generation_contract_hash(
            model=model, model_slug=slug, model_revision=revision, seed=seed,
            dataset_snapshot_sha256=dataset["snapshot"], dataset_revision=dataset["revision"],
            final25_code_hash=code, max_tokens=4096)
        (out / "predictions.jsonl").write_text("".join(json.dumps({"index": i}) + "\n" for i in range(rows)))
        _write(out / "generation_summary.json", {
            "rows": rows, "expected_rows": expected, "subset_manifest": None,
            "finish_reason": {"stop": rows}, "output_token_stats": {"mean": 10.0},
            "generation": {"seed": seed, "temperature": 0.6, "top_p": 1.0, "top_k": -1, "presence_penalty": 0.0,
                           "repetition_penalty": 1.0, "max_tokens": 4096, "compact_prediction_tables": True,
                           "contract_version": GENERATION_CONTRACT_VERSION, "contract_hash": contract,
                           "media_contract_version": MEDIA_CONTRACT_VERSION, "media_transport": MEDIA_TRANSPORT,
                           "min_image_pixels": QWEN_MIN_IMAGE_PIXELS, "max_image_pixels": QWEN_MAX_IMAGE_PIXELS,
                           "dataset_snapshot_sha256": dataset["snapshot"], "dataset_revision": dataset["revision"],
                           "model_revision": revision,
                           "selection": {"mode": "full", "limit": None, "sample_seed": None,
                                         "subset_manifest_sha256": None}}})
    return out


def write_scores(root: Path, checkout: Path, *, seed: int, models: dict[str, str], scores: dict[tuple[str, str], float],
                 dataset: dict[str, str]) -> None:
    """Score files for the (slug, benchmark) pairs in SCORES; the seed's manifest and completion receipt
    only when every slice of MODELS (slug -> model path) is scored, as the score campaign writes them."""
    from trace_eval_code_provenance import trace_eval_code_manifest

    s = suite()
    score_root = Path(root) / "scoring"
    listed = []
    for (slug, bench), value in scores.items():
        metric = "accuracy" if bench == "mme_reasoning" else "score"
        path = _write(score_file(root, seed, bench, slug), {
            metric: value, "rows": s.rows_by_benchmark[bench], "benchmark_key": bench, "model_slug": slug,
            "model": models[slug]})
        listed.append({"benchmark_key": bench, "model_slug": slug, "model": models[slug],
                       "rows": s.rows_by_benchmark[bench], "score": value, "scores_path": str(path.resolve()),
                       "scores_sha256": _sha256(path)})
    if len(listed) != len(models) * len(s.benchmark_keys):
        return
    evaluator, _ = provenance(str(checkout))
    code = trace_eval_code_manifest(repo_root=Path(checkout).resolve(), evaluator_sha256=evaluator)
    inputs = {}
    for slug in models:
        inputs[slug] = {}
        for bench in s.benchmark_keys:
            summary = run_dir(root, seed, bench, slug) / "generation_summary.json"
            inputs[slug][bench] = {"rows": s.rows_by_benchmark[bench], "generation_summary": str(summary.resolve()),
                                   "generation_summary_sha256": _sha256(summary) if summary.is_file() else "0" * 64,
                                   "dataset_snapshot_sha256": dataset["snapshot"]}
    contract = {
        "contract_version": "trace-eval-score-campaign-v1", "suite": s.suite_id,
        "dataset_view": s.dataset_manifest_view,
        "seed": seed, "selection": {"sha256": s.manifest_sha256, "benchmarks": list(s.benchmark_keys)},
        "routes": {"official_vlmevalkit": list(s.routes["official_vlmevalkit"]),
                   "direct": list(s.routes["direct_score"]), "mme_reasoning": list(s.routes["dedicated_score"])},
        "campaigns": [{"model_slug": slug, "model": model} for slug, model in models.items()],
        "evaluator_provenance": {"sha256": evaluator},
        "trace_eval_code_provenance": {"schema_version": code["schema_version"], "sha256": code["sha256"],
                                       "evaluator_provenance_sha256": code["evaluator_provenance_sha256"]},
        "scoring_implementation": code["files"], "generation_inputs": inputs,
        "dataset_manifest": {"view_snapshot_sha256": dataset["snapshot"]}}
    contract_sha = hashlib.sha256(json.dumps(contract, ensure_ascii=True, allow_nan=False, sort_keys=True,
                                             separators=(",", ":")).encode()).hexdigest()
    _write(score_root / f"score_campaign_manifest_seed_{seed}.json",
           {"contract": contract, "contract_sha256": contract_sha})
    _write(score_root / f"score_campaign_completion_seed_{seed}.json", {
        "contract_sha256": contract_sha, "expected_slices": len(listed), "completed_slices": len(listed),
        "slices": listed})

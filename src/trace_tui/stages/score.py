"""The score worker: accuracy of one slice over all its rows (unresolved rows are wrong), broken
down by task and by domain, and — for release models on TRACE validation — beside the
published accuracy with the verdict of SPEC §3.

Job spec: the runner's per-slice job. Read here: ``slice``; ``upstream_outputs.extract``
(or ``paths.extracted``: the extract step's output folder, whose ``rows/`` it reads);
``output_dir``; ``benchmark.route`` (``trace_validation`` adds the published comparison,
read from the release entry's ``results.v1.json`` when the store has it).

Output: ``score.json`` under ``output_dir`` (also announced as a ``metric`` event
named ``score``, in percent). ``trace-tui verify --campaign`` recomputes it from the
extract rows through :func:`trace_tui.workers.recompute_score.recompute_score` (the worker registry names it).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import sha256_file
from trace_tui.scoring import EXTRACTION_CONTRACT_ID, MATCH_CONTRACT_ID
from trace_tui.stages import protocol
from trace_tui.stages.jobs import (
    RECEIPT_SCHEMA,
    JobError,
    campaign_dir,
    output_dir,
    read_json,
    run_worker,
    slice_fields,
    store_dir,
    upstream_rows_dir,
)
from trace_tui.workers.recompute_score import SCORE_FILE, recompute, score_rows

Z95 = 1.96  # two-sided 95% normal quantile, as `verify --campaign` uses it


def binomial_interval(published_percent: float, n: int) -> tuple[float, float]:
    """The 95% interval (percent) of an accuracy measured on n rows whose true rate is the published one."""
    p = published_percent / 100.0
    half = Z95 * math.sqrt(p * (1.0 - p) / n)
    return 100.0 * max(0.0, p - half), 100.0 * min(1.0, p + half)


def compare_published(accuracy: float, published: float, n: int) -> dict[str, Any]:
    """SPEC §3: a reproduced accuracy beside its published value, with the difference and the verdict
    (inside or outside the binomial 95% interval of the published accuracy). Information, not a failure."""
    lo, hi = binomial_interval(published, n)
    inside = lo <= accuracy <= hi
    return {"published": published, "reproduced": accuracy, "difference": round(accuracy - published, 10),
            "n": n, "interval_95": [round(lo, 4), round(hi, 4)],
            "verdict": "inside the 95% interval" if inside else "outside the 95% interval", "inside": inside}


def published_results(path: Path) -> dict[str, float]:
    data = read_json(path)
    return {r["model_id"]: float(r["score"]) for r in data.get("results", [])}


def find_published(job: dict[str, Any]) -> tuple[dict[str, float] | None, int | None]:
    """TRACE validation's published accuracies, from the release entry in the store (None when absent)."""
    bench = job.get("benchmark") or (job.get("inputs") or {}).get("benchmark") or {}
    if bench.get("route") != "trace_validation":
        return None, None
    from trace_tui.release import release_lock

    lock = release_lock()
    explicit = (job.get("paths") or {}).get("published")
    if explicit:
        path = Path(explicit)
    else:
        try:
            from trace_tui.store.names import release_entry
            from trace_tui.store.store import Store

            path = Store(store_dir()).root_of(release_entry(lock)) / lock.trace_validation.results_path
        except Exception:  # noqa: BLE001 - no release entry: the score stands alone
            return None, None
    if not path.is_file():
        return None, None
    return published_results(path), lock.trace_validation.rows


def extracted_dir(job: dict[str, Any]) -> Path:
    return upstream_rows_dir(job, "extracted", step="score", upstream="extract")


def run(job: dict[str, Any]) -> dict[str, Any]:
    campaign = campaign_dir()
    sl = slice_fields(job)
    src = extracted_dir(job)
    out = output_dir(job)
    files = sorted(src.glob("*.json"))
    rows = [read_json(f) for f in files]
    expected = job.get("total")
    if expected and len(rows) != int(expected):
        raise JobError(f"{src} holds {len(rows)} extracted rows, the slice has {expected}",
                       "rerun the generate and extract steps")
    where = {"model": sl["model"], "seed": sl["seed"], "benchmark": sl["benchmark"]}
    protocol.progress(phase="score", done=0, total=len(rows), **where)
    result = score_rows(rows)
    record: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA, "kind": "score", "slice": sl, "contracts": {
            "extraction": EXTRACTION_CONTRACT_ID, "match": MATCH_CONTRACT_ID, "unresolved_rows_score": 0},
        "source": src.relative_to(campaign).as_posix(),
        "inputs": {f.relative_to(campaign).as_posix(): sha256_file(f) for f in files},
        **result,
    }
    published, n = find_published(job)
    if published is not None and sl["model"] in published:
        record["published"] = compare_published(result["accuracy"], published[sl["model"]], int(n))
    path = out / SCORE_FILE
    atomic_write_json(path, record)
    protocol.artifact(path, campaign)
    protocol.progress(phase="score", done=len(rows), total=len(rows), **where)
    emit_metric("score", result["accuracy"], **where)
    line = f"score {where['model']}/{where['seed']}/{where['benchmark']}: {result['accuracy']:.2f}% " \
           f"({result['correct']}/{result['total']}, {result['unresolved']} unresolved)"
    if "published" in record:
        c = record["published"]
        line += f"; published {c['published']:.2f}% ({c['difference']:+.2f}), {c['verdict']}"
    protocol.log(line)
    return record


def emit_metric(name: str, value: float, **where: object) -> None:
    fn = getattr(protocol, "metric", None)
    if fn is not None:
        fn(name=name, value=value, **where)
    else:
        protocol._emit({"type": "metric", "name": name, "value": value, **where})


def check_score(campaign: Path, score_path: Path) -> list[str]:
    """Problems found when recomputing a score file (empty: the recorded score stands)."""
    rec, new = recompute(Path(campaign), Path(score_path))
    return [f"{score_path}: {k} recorded {str(rec[k])[:80]} but recomputed {str(new[k])[:80]}"
            for k in rec if rec[k] != new[k]]


def main() -> int:
    return run_worker(run)


if __name__ == "__main__":
    raise SystemExit(main())

"""The score worker: accuracy of one slice over all its rows (unresolved rows are wrong), broken
down by task and by domain, and — for release models on TRACE validation — beside the
published accuracy with the verdict of SPEC §3.

Job spec: the runner's per-slice job. Read here: ``slice``; ``upstream_outputs.extract``
(or ``paths.extracted``: the extract step's output folder, whose ``rows/`` it reads);
``output_dir``; ``benchmark.route`` (``trace_validation`` adds the published comparison,
read from the release entry's ``results.v1.json`` when the store has it).

Output: ``score.json`` under ``output_dir`` (also announced as a ``metric`` event
named ``score``, in percent). ``trace-tui verify --campaign`` recomputes it from the
extract rows through :func:`recompute_score` (this worker is in its table of scoring workers).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import sha256_file
from trace_tui.common.safe_read import Folder, NotRead
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

SCORE_FILE = "score.json"
Z95 = 1.96  # two-sided 95% normal quantile, as `verify --campaign` uses it


def row_correct(row: dict[str, Any]) -> bool:
    """A row is right when it has a final value equal to the reference under the semantic match (§2)."""
    from trace_tui.scoring import answers_match

    if row.get("value") is None or row.get("final") == "unresolved":
        return False
    return answers_match(row["value"], {"type": row["answer_type"], "value": row["answer_gt"]})


def _group(rows: list[dict[str, Any]], flags: list[bool], key: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row, ok in zip(rows, flags, strict=True):
        g = out.setdefault(str(row[key]), {"correct": 0, "total": 0})
        g["correct"] += int(ok)
        g["total"] += 1
    for g in out.values():
        g["accuracy"] = percent(g["correct"], g["total"])
    return dict(sorted(out.items()))


def percent(correct: int, total: int) -> float:
    return round(100.0 * correct / total, 10) if total else 0.0


def score_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy over all rows with breakdowns (pure)."""
    rows = sorted(rows, key=lambda r: int(r["index"]))
    flags = [row_correct(r) for r in rows]
    correct = sum(flags)
    return {
        "accuracy": percent(correct, len(rows)), "correct": correct, "total": len(rows),
        "unresolved": sum(1 for r in rows if r.get("final") == "unresolved"),
        "judged": sum(1 for r in rows if r.get("final") == "judged"),
        "by_task": _group(rows, flags, "task"), "by_domain": _group(rows, flags, "domain"),
        "rows": {str(r["index"]): ok for r, ok in zip(rows, flags, strict=True)},
    }


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
    from trace_tui.scoring import EXTRACTION_CONTRACT_ID, MATCH_CONTRACT_ID

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


def emit_metric(name: str, value: float, **where: Any) -> None:
    fn = getattr(protocol, "metric", None)
    if fn is not None:
        fn(name=name, value=value, **where)
    else:
        protocol._emit({"type": "metric", "name": name, "value": value, **where})


ROW_LIMIT = 1 << 20  # an extract row is a few hundred bytes; a file larger than this is not one


def _inside(campaign: Path, rel: Any, what: str) -> str:
    """``rel`` when it names a place inside the campaign (checked before anything is opened); else ValueError."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or rel.startswith("/") or ".." in rel.split("/"):
        raise ValueError(f"{what} {str(rel)[:200]!r} is not a path inside the campaign; it was not read")
    real, top = os.path.realpath(campaign / rel), os.path.realpath(campaign)
    if not real.startswith(top + os.sep):
        raise ValueError(f"{what} {rel!r} leads out of the campaign (a link); it was not read")
    return rel


def _read_rows(campaign: Path, source: str, read: dict[str, tuple[str, Any]] | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the rows of the campaign's folder ``source``, {campaign-relative path: sha256}), each file read once and
    only when it is a regular file inside the campaign (common.safe_read: a FIFO there fails, never blocks).
    ``read``: rows the caller read and hashed in this same check (path -> (sha256, row)), taken as they are."""
    import json

    try:
        with os.scandir(campaign / source) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError as exc:
        raise ValueError(f"source {source}: not a folder to read rows from ({exc.strerror or exc})") from None
    folder = Folder(campaign, name="the campaign")
    rows, inputs = [], {}
    for name in names:
        rel = f"{source}/{name}"
        if read is not None and rel in read:
            inputs[rel], row = read[rel]
            rows.append(row)
            continue
        try:
            got = folder.sha256_size(rel, keep=ROW_LIMIT)
        except NotRead as exc:
            raise ValueError(f"{rel}: {exc.reason}") from None
        if got is None or got[2] is None:
            raise ValueError(f"{rel}: {'vanished while read' if got is None else 'too large to be a row'}")
        inputs[rel] = got[0]
        try:
            rows.append(json.loads(got[2]))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{rel}: not a JSON row ({exc})") from None
    return rows, inputs


def recompute(campaign: Path, score_path: Path, read: dict[str, tuple[str, Any]] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(recorded, recomputed) for a score.json: the scores again from the extract rows it names.

    The rows' bytes must still be the ones the score read (their sha256 is recorded), so
    a changed row is reported as a mismatch of inputs, not silently rescored. Only files inside
    the campaign are read (its "source" is data: a path out of it is refused unread).
    """
    import json

    campaign = Path(campaign)
    rel = _inside(campaign, Path(score_path).relative_to(campaign).as_posix(), "score file")
    try:
        data = Folder(campaign, name="the campaign").read(rel, ROW_LIMIT * 64)
        recorded = json.loads(data) if data is not None else None
    except NotRead as exc:
        raise ValueError(f"{rel}: {exc.reason}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{rel}: not JSON ({exc})") from None
    if not isinstance(recorded, dict):
        raise ValueError(f"{rel}: {'missing' if data is None else 'not a score record'}")
    src = _inside(campaign, recorded.get("source"), f"{rel}: source")
    rows, inputs = _read_rows(campaign, src, read)
    again = score_rows(rows)
    keys = ("accuracy", "correct", "total", "unresolved", "judged", "by_task", "by_domain", "rows")
    rec = {k: recorded.get(k) for k in keys}
    rec["inputs"] = recorded.get("inputs")
    new = {k: again[k] for k in keys}
    new["inputs"] = inputs
    rec["source"] = new["source"] = src
    return rec, new


def check_score(campaign: Path, score_path: Path) -> list[str]:
    """Problems found when recomputing a score file (empty: the recorded score stands)."""
    rec, new = recompute(Path(campaign), Path(score_path))
    return [f"{score_path}: {k} recorded {str(rec[k])[:80]} but recomputed {str(new[k])[:80]}"
            for k in rec if rec[k] != new[k]]


def upstream_rows(score_rel: str, content: dict[str, Any]) -> str | None:
    """The rows folder a score job's score.json must name: the step before it (its receipt's pinned inputs name
    it), same slice (outputs/STEP/SLICE/score.json -> outputs/UPSTREAM/SLICE/rows); None when not known."""
    upstream = (content.get("inputs") or {}).get("upstream")
    parts = score_rel.split("/")
    if not isinstance(upstream, dict) or len(upstream) != 1 or len(parts) < 4 or parts[0] != "outputs":
        return None
    return "/".join(["outputs", str(next(iter(upstream))), *parts[2:-1], "rows"])


def recompute_score(campaign: Path, receipt_content: dict[str, Any],
                    read: dict[str, tuple[str, Any]] | None = None) -> float:
    """The recomputer ``verify --campaign`` calls with a score job's receipt: the accuracy again from
    the extract rows. Any disagreement with the recorded file (rows changed, breakdowns differ, rows of
    another step or slice than the one before it) raises, which verify reports as this score's failure."""
    outputs = receipt_content.get("outputs") or {}
    rel = next((k for k in sorted(outputs) if k.rsplit("/", 1)[-1] == SCORE_FILE), None)
    if rel is None:
        raise ValueError(f"the receipt lists no {SCORE_FILE}")
    rec, new = recompute(Path(campaign), Path(campaign) / rel, read)
    want = upstream_rows(rel, receipt_content)
    if want is not None and rec["source"] != want:
        raise ValueError(f"{rel}: scores the rows in {rec['source']}, not its slice's rows of the step before it "
                         f"({want})")
    problems = [f"{rel}: {k} recorded {str(rec[k])[:80]} but recomputed {str(new[k])[:80]}"
                for k in rec if rec[k] != new[k]]
    if problems:
        raise ValueError(problems[0])
    return float(new["accuracy"])


def main() -> int:
    return run_worker(run)


if __name__ == "__main__":
    raise SystemExit(main())

"""The release page's tables (SPEC §4) as data, recomputed from benchmark scores, and their markdown.

Built from plain score records (see ``aggregate``), so the same tables come
from results.json (``trace-tui report``), from a reproduction campaign, or in
the TUI. Nothing is typed in: models, labels, scales, post-training data,
categories and benchmark names come from the release lock (or the results
file's own labels), figures from the aggregation functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed
from trace_tui.release import release_lock
from trace_tui.verify import aggregate as agg
from trace_tui.verify import documents as d
from trace_tui.verify.documents import SchemaError

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ModelPin, ReleaseLock

DASH = "—"


def fmt(x: float) -> str:
    return f"{x:.2f}"


def fmt_signed(x: float) -> str:
    return f"{x:+.2f}"


def fmt_pm(mean: float, stddev: float | None, *, signed: bool = False) -> str:
    head = fmt_signed(mean) if signed else fmt(mean)
    return head if stddev is None else f"{head} ± {fmt(stddev)}"


class OverallRow(BaseModel):
    scale: str
    model_id: str
    model: str
    post_training_data: str | None
    overall: agg.Summary
    change: agg.PairedDelta | None  # None for a base model
    base_model_id: str | None

    @property
    def cells(self) -> list[str]:
        return [self.scale, self.model, self.post_training_data or DASH, fmt_pm(self.overall.mean, self.overall.stddev),
                DASH if self.change is None else fmt_pm(self.change.mean, self.change.stddev, signed=True)]


class BenchmarkCell(BaseModel):
    model_id: str
    summary: agg.Summary
    delta: float | None = None  # paired mean change against the base (trained columns)

    @property
    def text(self) -> str:
        head = fmt_pm(self.summary.mean, self.summary.stddev)
        return head if self.delta is None else f"{head} ({fmt_signed(self.delta)})"


class BenchmarkRow(BaseModel):
    key: str
    display: str
    cells: list[BenchmarkCell | None]  # one per column; None where a model has no score


class CategoryGroup(BaseModel):
    category: str
    rows: list[BenchmarkRow]


class Column(BaseModel):
    header: str  # "3B Base", "3B TRACE (Δ)"
    model_id: str
    scale: str
    base_model_id: str | None  # set for trained columns


class Improvement(BaseModel):
    scale: str
    model_id: str
    improved: int
    total: int


class ValidationRow(BaseModel):
    model_id: str
    model: str
    accuracy: float
    change: float | None  # against the same-scale base; None for a base

    @property
    def cells(self) -> list[str]:
        return [self.model, fmt(self.accuracy), DASH if self.change is None else fmt_signed(self.change)]


class ReleaseTables(BaseModel):
    overall: list[OverallRow]
    columns: list[Column]
    categories: list[CategoryGroup]
    improvements: list[Improvement]
    validation: list[ValidationRow] = []
    suite_id: str = ""
    validation_rows: int | None = None
    validation_seed: int | None = None

    @property
    def improvement_sentence(self) -> str:
        if not self.improvements:
            return ""
        parts = [f"{i.improved} of {i.total} benchmarks at {i.scale}" for i in self.improvements]
        joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"The TRACE-trained model improves the mean score on {joined}."

    def to_dict(self) -> dict[str, Any]:
        """Data plus the rendered cells, for --format json."""
        return {
            "overall": [{**r.model_dump(), "cells": r.cells} for r in self.overall],
            "benchmarks": {
                "columns": [c.header for c in self.columns],
                "categories": [{"category": g.category, "rows": [
                    {"key": r.key, "display": r.display,
                     "cells": [None if c is None else {**c.model_dump(), "text": c.text} for c in r.cells]}
                    for r in g.rows]} for g in self.categories],
            },
            "improvements": [i.model_dump() for i in self.improvements],
            "improvement_sentence": self.improvement_sentence,
            "validation": [{**r.model_dump(), "cells": r.cells} for r in self.validation],
            "suite_id": self.suite_id, "validation_rows": self.validation_rows, "validation_seed": self.validation_seed,
        }

    def to_markdown(self) -> str:
        suite = f"{self.suite_id}, " if self.suite_id else ""
        out = [f"## Overall ({suite}mean ± sample std over seeds)", ""]
        out += _md_table(["Scale", "Model", "Post-training data", "Overall", "Paired change"],
                         [r.cells for r in self.overall])
        if self.columns:
            out += ["", "## Per benchmark (mean ± sample std; Δ = paired change against the base)", ""]
            rows: list[list[str]] = []
            for g in self.categories:
                rows.append([f"**{g.category}**"] + [""] * len(self.columns))
                for r in g.rows:
                    rows.append([r.display] + [DASH if c is None else c.text for c in r.cells])
            out += _md_table(["Benchmark"] + [c.header for c in self.columns], rows)
        if self.improvements:
            out += ["", self.improvement_sentence]
        if self.validation:
            about = ", ".join(x for x in (f"{self.validation_rows:,} rows" if self.validation_rows else "",
                                          f"seed {self.validation_seed}" if self.validation_seed is not None else "") if x)
            out += ["", "## TRACE validation" + (f" ({about})" if about else ""), ""]
            out += _md_table(["Model", "Accuracy", "Change from base"], [r.cells for r in self.validation])
        return "\n".join(out) + "\n"


class SimpleTable(BaseModel):
    """A titled grid of rendered cells: what a screen needs to draw one of the release tables."""

    title: str
    columns: list[str]
    rows: list[list[str]]


def as_simple_tables(t: ReleaseTables) -> list[SimpleTable]:
    out = [SimpleTable(title="Overall" + (f" ({t.suite_id})" if t.suite_id else ""),
                       columns=["Scale", "Model", "Post-training data", "Overall", "Paired change"],
                       rows=[r.cells for r in t.overall])]
    if t.columns:
        rows: list[list[str]] = []
        for g in t.categories:
            rows.append([g.category.upper()] + [""] * len(t.columns))
            rows += [[r.display] + [DASH if c is None else c.text for c in r.cells] for r in g.rows]
        out.append(SimpleTable(title="Per benchmark — " + t.improvement_sentence,
                               columns=["Benchmark"] + [c.header for c in t.columns], rows=rows))
    if t.validation:
        out.append(SimpleTable(title="TRACE validation", columns=["Model", "Accuracy", "Change from base"],
                               rows=[r.cells for r in t.validation]))
    return out


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _is_trace(m: ModelPin) -> bool:
    return not m.is_base and bool(m.post_training_data) and m.post_training_data.startswith("TRACE")


def build_tables(records: Iterable[Any], lock: ReleaseLock, *, labels: Mapping[str, str] | None = None,
                 validation: Sequence[tuple[str, str, float]] | None = None) -> ReleaseTables:
    """Tables from score records. ``labels``: model id -> display name (default: the lock's);
    ``validation``: (model id, label, accuracy percent) rows of the TRACE validation results.

    Models without scores are left out, so a partial campaign still gets its tables.
    """
    records = agg.as_records(records)
    labels = dict(labels or {})
    present = {r.model_id for r in records}
    bench_order = [b.key for b in lock.trace_eval.benchmarks]
    present_benches = {r.benchmark_id for r in records}
    benches = [b for b in lock.trace_eval.benchmarks if b.key in present_benches]
    ov = agg.overall_summaries(records)
    models = [m for m in lock.models if m.id in present]

    overall = []
    for m in models:
        change = None
        if m.base_model_id and m.base_model_id in present:
            change = agg.overall_delta(records, m.id, m.base_model_id)
        overall.append(OverallRow(scale=m.scale, model_id=m.id, model=labels.get(m.id, m.label),
                                  post_training_data=m.post_training_data, overall=ov[m.id], change=change,
                                  base_model_id=m.base_model_id))

    columns: list[Column] = []
    for scale in dict.fromkeys(m.scale for m in lock.models):
        base = next((m for m in models if m.is_base and m.scale == scale), None)
        trace = next((m for m in models if _is_trace(m) and m.scale == scale), None)
        if base is not None:
            columns.append(Column(header=f"{scale} Base", model_id=base.id, scale=scale, base_model_id=None))
        if trace is not None:
            columns.append(Column(header=f"{scale} TRACE (Δ)", model_id=trace.id, scale=scale,
                                  base_model_id=trace.base_model_id if base is not None else None))

    summaries = agg.benchmark_summaries(records)
    deltas = {c.model_id: agg.benchmark_deltas(records, c.model_id, c.base_model_id)
              for c in columns if c.base_model_id}
    groups: dict[str, list[BenchmarkRow]] = {}
    for b in benches:
        cells: list[BenchmarkCell | None] = []
        for c in columns:
            s = summaries.get((c.model_id, b.key))
            if s is None:
                cells.append(None)
                continue
            dl = deltas.get(c.model_id, {}).get(b.key)
            cells.append(BenchmarkCell(model_id=c.model_id, summary=s, delta=None if dl is None else dl.mean))
        groups.setdefault(b.category, []).append(BenchmarkRow(key=b.key, display=b.display, cells=cells))
    categories = [CategoryGroup(category=cat, rows=rows) for cat, rows in groups.items()]

    improvements = []
    for c in columns:
        if c.base_model_id:
            ds = deltas[c.model_id]
            improvements.append(Improvement(scale=c.scale, model_id=c.model_id,
                                            improved=sum(1 for k in bench_order if k in ds and ds[k].mean > 0),
                                            total=sum(1 for k in bench_order if k in ds)))

    vrows: list[ValidationRow] = []
    if validation:
        acc = {mid: a for mid, _label, a in validation}
        pins = {m.id: m for m in lock.models}
        for mid, label, a in validation:
            pin = pins.get(mid)
            base = pin.base_model_id if pin is not None else None
            vrows.append(ValidationRow(model_id=mid, model=label, accuracy=a,
                                       change=(a - acc[base]) if base in acc else None))
    tv = lock.trace_validation
    return ReleaseTables(overall=overall, columns=columns, categories=categories, improvements=improvements,
                         validation=vrows, suite_id=lock.trace_eval.suite_id,
                         validation_rows=tv.rows if vrows else None,
                         validation_seed=tv.generation.seed if vrows else None)


# --------------------------------------------------------------------------- from a release directory

_DocT = TypeVar("_DocT", bound=d.Doc)


def _load(root: Path, rel: str, schema: type[_DocT], check: str) -> _DocT:
    """A release document, or CheckFailed naming the file and what is wrong with it."""
    path = root / rel
    if not path.is_file():
        raise CheckFailed(f"{rel}: absent ({check} needs it)")
    try:
        data = json.loads(path.read_bytes())
    except ValueError as exc:
        raise CheckFailed(f"{rel}: {check}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise CheckFailed(f"{rel}: {check}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise CheckFailed(f"{rel}: {check}: schema: expected an object at the top level")
    try:
        return schema.model_validate(data)
    except SchemaError as exc:
        raise CheckFailed(f"{rel}: {check}: schema: {exc.line()}") from None


def release_tables(root: Path, *, warn: Callable[[str], None] | None = None,
                   lock: ReleaseLock | None = None) -> ReleaseTables:
    """ReleaseTables from a release directory (results.json required; validation table when present)."""
    if lock is None:
        lock = release_lock()
    te, tv = lock.trace_eval, lock.trace_validation
    res: d.ResultsDoc = _load(root, te.results_path, d.ResultsDoc, "report")
    published = lock.published_hash("results").sha256
    actual = sha256_file(root / te.results_path)
    if warn is not None and actual != published:
        warn(f"{te.results_path}: sha256 {actual[:12]}… is not the published {published[:12]}…; "
             "tables are computed from these bytes (run `trace-tui verify` for details)")
    # Tables from an incomplete or duplicated score set would be silently wrong: refuse them.
    want = {(m.id, s, b.key) for m in lock.models for s in te.seeds for b in te.benchmarks}
    keys = [(x.model_id, x.seed, x.benchmark_id) for x in res.scores.benchmark_scores]
    if len(set(keys)) != len(keys) or set(keys) != want:
        missing, extra = len(want - set(keys)), len(set(keys) - want)
        dups = len(keys) - len(set(keys))
        raise CheckFailed(f"{te.results_path}: results.complete: {len(keys)} scores, expected {len(want)} "
                          f"({missing} missing, {extra} unexpected, {dups} duplicated)")
    import math

    for x in res.scores.benchmark_scores:
        if not (math.isfinite(x.score) and 0.0 <= x.score <= 100.0):
            raise CheckFailed(f"{te.results_path}: results.complete: score {x.model_id}/{x.seed}/{x.benchmark_id} "
                              f"= {x.score!r} is not a percentage")
    validation = None
    if (root / tv.results_path).is_file():
        vres: d.ValidationResultsDoc = _load(root, tv.results_path, d.ValidationResultsDoc, "report")
        validation = [(r.model_id, r.label, r.score) for r in vres.results]
    elif warn is not None:
        warn(f"{tv.results_path}: absent; the TRACE validation table is left out")
    labels = {m.model_id: m.display_name for m in res.models}
    return build_tables(res.scores.benchmark_scores, lock, labels=labels, validation=validation)

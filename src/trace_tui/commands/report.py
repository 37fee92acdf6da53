"""`trace-tui report --release-dir DIR [--format markdown|json]`: the release page's tables, recomputed.

Every figure comes from results.json's 576 benchmark scores (and the TRACE
validation results) through trace_tui.verify.aggregate; labels come from the
release lock and results.json. Bad input exits 1 naming the file and the
problem; a missing or non-release DIR exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--release-dir", metavar="DIR", required=False,
                   help="a release directory laid out like the upstream repository (rlvr/...)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown", help="output format")
    p.add_argument("--campaign", metavar="DIR", help="a `full` campaign: its reproduced scores beside the published "
                   "ones (results.json from --release-dir DIR, else from the store) and its release tables")


def run(args: argparse.Namespace) -> int:
    from trace_tui.commands.verify import release_dir_arg

    if getattr(args, "campaign", None):
        from trace_tui.external.summary import run_report

        return run_report(args)
    root = release_dir_arg(args.release_dir)
    tables = release_tables(root, warn=lambda line: print(f"trace-tui: warning: {line}", file=sys.stderr))
    if args.format == "json":
        print(json.dumps(tables.to_dict(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(tables.to_markdown())
    return 0


def _load(root: Path, rel: str, schema: type, check: str) -> Any:
    """A release document, or CheckFailed naming the file and what is wrong with it."""
    from trace_tui.errors import CheckFailed
    from trace_tui.verify.documents import SchemaError

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


def release_tables(root: Path, *, warn=None, lock=None):
    """ReleaseTables from a release directory (results.json required; validation table when present)."""
    from trace_tui.common.digest import sha256_file

    from trace_tui.errors import CheckFailed
    from trace_tui.verify import documents as d
    from trace_tui.verify.tables import build_tables

    if lock is None:
        from trace_tui.release import release_lock

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

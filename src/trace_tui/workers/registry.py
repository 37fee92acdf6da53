"""The container stage workers of trace-tui, one row each: the module a recipe step's ``run[0]`` names, and what
the rest of trace-tui may count on it for.

A recipe (and a campaign's recipe.json, a receipt's step kind) is data: a name found in one is looked up here and
nothing else runs or is imported. The recipes' schema accepts a step's worker from this table; the runner serves a
batch of slices only to a worker that says so; verify checks per-row files of the workers that write them and
recomputes scores with the recomputer a row holds (a function, never a module named by a string).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from trace_tui.workers import recompute_release_eval, recompute_score, recompute_selftest
from trace_tui.workers.checkpoints import trained_checkpoints

ScoreRecomputer = Callable[..., float | None]
CheckpointFinder = Callable[[Path, str], list[str]]
RowKind = Literal["generate", "extract"]


@dataclass(frozen=True)
class Worker:
    """One stage worker and its capabilities."""

    name: str  # the module a step's run[0] holds: `python -m NAME ARGS...` in the step's image
    serves_batch: bool = False  # takes a batch job (one per-slice spec per slice, trace_tui.stages.jobs.run_slices)
    row_kind: RowKind | None = None  # writes OUTPUT_DIR/rows/NNNNNN.json that verify checks, and what a row proves
    whole_suite: bool = False  # runs the release evaluator's whole trace_eval suite (EXTERNAL-SUITE.md)
    prepares_demo: bool = False  # writes the demo's tiny model and task groups (its own groups only)
    score_step_args: tuple[str, ...] | None = None  # run[1:] of the step whose receipt holds the external scores
    # verify's recomputation of a recorded score from the receipt's content: fn(campaign_dir, content) -> score
    recompute: ScoreRecomputer | None = None
    recompute_takes_read: bool = False  # the recomputer also takes read= (rows verify already read and hashed)
    # the model checkpoints a finished job left: fn(campaign_dir, the job's output folder) -> campaign-relative
    # folders, which the runner signs when the home has a key
    checkpoints: CheckpointFinder | None = None


WORKERS: tuple[Worker, ...] = (
    Worker("trace_tui.stages.demo_prepare", prepares_demo=True),
    Worker("trace_tui.stages.eval_prepare"),
    Worker("trace_tui.stages.extract", serves_batch=True, row_kind="extract"),
    Worker("trace_tui.stages.generate", row_kind="generate"),
    Worker("trace_tui.stages.release_eval", whole_suite=True, score_step_args=("--phase", "score"),
           recompute=recompute_release_eval.recompute_score),
    Worker("trace_tui.stages.score", recompute=recompute_score.recompute_score, recompute_takes_read=True),
    Worker("trace_tui.stages.selftest", serves_batch=True, recompute=recompute_selftest.recompute_score),
    Worker("trace_tui.stages.train_smoke", checkpoints=trained_checkpoints),
)

# name -> row; verify and the runner look a step's worker up here (a test may swap a row)
BY_NAME: dict[str, Worker] = {w.name: w for w in WORKERS}

WORKER_NAMES: tuple[str, ...] = tuple(w.name for w in WORKERS)
BATCH_WORKERS: tuple[str, ...] = tuple(w.name for w in WORKERS if w.serves_batch)
WHOLE_SUITE_STAGE: str = next(w.name for w in WORKERS if w.whole_suite)
DEMO_PREPARE: str = next(w.name for w in WORKERS if w.prepares_demo)
# the external suite's score step's whole `run` (the report reads that step's scores.json)
EXTERNAL_SCORE_RUN: tuple[str, ...] = next((w.name, *w.score_step_args) for w in WORKERS
                                           if w.score_step_args is not None)


def worker(name: object) -> Worker | None:
    """The row of the worker ``name`` (None: not a stage worker of trace-tui)."""
    return BY_NAME.get(name) if isinstance(name, str) else None


def row_kind(name: object) -> RowKind | None:
    """What the per-row files of worker ``name`` prove ("generate" / "extract"), None when it writes none."""
    w = worker(name)
    return w.row_kind if w is not None else None


def recompute(name: object, campaign: Path, content: dict[str, Any],
              read: dict[str, tuple[str, Any]] | None = None) -> float | None:
    """Worker ``name``'s recomputation of a recorded score (LookupError: it has none). ``read``: rows the
    caller already read and hashed, passed on to a recomputer that takes them."""
    w = worker(name)
    if w is None or w.recompute is None:
        raise LookupError(f"{str(name)[:80]!r} is not a scoring step of trace-tui")
    if read is not None and w.recompute_takes_read:
        return w.recompute(campaign, content, read=read)
    return w.recompute(campaign, content)


def checkpoints(name: object, campaign: Path, out_rel: str) -> list[str]:
    """The checkpoint folders a finished job of worker ``name`` left in ``out_rel`` ([]: none, or a worker that
    trains nothing); ValueError names a checkpoint the worker named outside its folder."""
    w = worker(name)
    if w is None or w.checkpoints is None:
        return []
    return w.checkpoints(campaign, out_rel)

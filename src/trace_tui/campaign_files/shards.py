"""Shards: a resolved campaign split into pieces that each fit one node (pure, no I/O).

A shard is a campaign of its own — its own state database, outputs and receipts —
in ``PARENT/shards/<id>/``, so no SQLite database is ever shared between nodes
(SQLite's locking is unsafe on network filesystems). A shard is described by the
narrowing (``--models``/``--seeds``/``--benchmarks``) that turns the parent's
recipe into the shard's, so each node runs the same engine with the same command
line a user would type.

Default split: one shard per (model, seed) for the external evaluation (24 for
``full``: each a whole trace_eval_v1 run the release's evaluator can do on its
own), per model for the TRACE validation, per seed for the demo.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trace_tui.errors import UsageError

ShardBy = Literal["model-seed", "model", "seed"]
SHARD_BY: tuple[str, ...] = ("model-seed", "model", "seed")
DEFAULT_SHARD_BY: dict[str, str] = {"trace_eval": "model-seed", "trace_validation": "model", "demo": "seed"}
PLAN_FILE = "shards.json"
SHARDS_DIR = "shards"
# A shard id names its folder PARENT/shards/ID: one plain name (what _safe makes), never `..`, a `/` or a NUL,
# so a plan read back from disk cannot point a reader at a campaign outside the parent.
SHARD_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")  # 255: the longest name a folder can have


class Shard(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int  # the Slurm array task index
    id: str  # path-safe, unique in the plan
    models: list[str]
    seeds: list[int]
    slices: list[str]  # MODEL/SEED/BENCHMARK ids
    rows_total: int

    @field_validator("id")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not SHARD_ID.fullmatch(value):
            raise ValueError("a shard id is one plain folder name (letters, digits, _ . -; no / or ..)")
        return value

    @property
    def dir(self) -> str:
        return f"{SHARDS_DIR}/{self.id}"


class ShardPlan(BaseModel):
    """What the parent campaign is and how it is split (written to PARENT/shards.json)."""

    model_config = ConfigDict(extra="forbid")

    schema_: str = "trace-tui-shards-v1"
    # A recipe's name, never a path: a resubmission loads the recipe of this name that trace-tui ships.
    recipe: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)
    run_tag: str
    config_sha256: str
    shard_by: ShardBy
    models: list[str]
    seeds: list[int]
    benchmarks: list[str]
    narrowed_benchmarks: bool  # whether the parent's command named --benchmarks (each shard repeats it)
    slices: list[str]
    rows_total: int
    shards: list[Shard]

    @model_validator(mode="after")
    def _distinct(self) -> "ShardPlan":
        ids = [s.id for s in self.shards]
        twice = next((i for i in ids if ids.count(i) > 1), None)
        if twice is not None:  # two shards would share one folder
            raise ValueError(f"shard id {twice!r} is used twice")
        indices = [s.index for s in self.shards]
        if len(set(indices)) != len(indices):
            raise ValueError("two shards have the same array index")
        return self

    def shard(self, shard_id: str) -> Shard:
        for s in self.shards:
            if s.id == shard_id:
                return s
        raise KeyError(shard_id)


def _safe(part: str) -> str:
    return "".join(c if (c.isalnum() or c in "-_.") else "_" for c in part) or "_"


def default_shard_by(resolved: Any) -> str:
    suite = resolved.recipe.selection.suite
    if suite not in DEFAULT_SHARD_BY or not resolved.slices:
        raise UsageError(f"recipe {resolved.recipe.name} has no model x seed x benchmark slices to split into shards",
                         hint="--scheduler slurm runs the recipes that evaluate: full, validation, demo")
    return DEFAULT_SHARD_BY[suite]


def plan_shards(resolved: Any, shard_by: str | None = None, *, narrowed_benchmarks: bool = False) -> ShardPlan:
    """Split ``resolved`` (a ResolvedRecipe) into shards; every slice lands in exactly one shard."""
    by = shard_by or default_shard_by(resolved)
    if by not in SHARD_BY:
        raise UsageError(f"--shard-by {by!r} is not a way to split", hint=f"choose one of: {', '.join(SHARD_BY)}")
    if not resolved.slices:
        default_shard_by(resolved)  # raises the one-line error
    models = [m.id for m in resolved.models]
    seeds = list(resolved.seeds)
    groups: list[tuple[str, list[str], list[int]]]
    if by == "model-seed":
        groups = [(f"{_safe(m)}_s{s}", [m], [s]) for m in models for s in seeds]
    elif by == "model":
        groups = [(_safe(m), [m], seeds) for m in models]
    else:
        groups = [(f"seed-{s}", models, [s]) for s in seeds]
    rows = {b.key: b.rows for b in resolved.benchmarks}
    shards = []
    for index, (sid, ms, ss) in enumerate(groups):
        if not SHARD_ID.fullmatch(sid):  # a model id too long to name a folder
            raise UsageError(f"shard {sid[:80]!r}… cannot name a folder (more than 255 characters)",
                             hint="give the model a shorter id")
        slices = [x for x in resolved.slices if x.model in ms and x.seed in ss]
        shards.append(Shard(index=index, id=sid, models=ms, seeds=ss, slices=[x.id for x in slices],
                            rows_total=sum(rows[x.benchmark] for x in slices)))
    return ShardPlan(recipe=resolved.recipe.name, run_tag=resolved.run_tag, config_sha256=resolved.config_sha256,
                     shard_by=by, models=models, seeds=seeds, benchmarks=[b.key for b in resolved.benchmarks],
                     narrowed_benchmarks=narrowed_benchmarks, slices=[x.id for x in resolved.slices],
                     rows_total=resolved.rows_total, shards=shards)


def shard_arguments(plan: ShardPlan, shard: Shard) -> list[str]:
    """The recipe narrowing that makes a shard's campaign (``--models ... --seeds ...``)."""
    out = ["--recipe", plan.recipe, "--models", *shard.models, "--seeds", *(str(s) for s in shard.seeds)]
    if plan.narrowed_benchmarks:
        out += ["--benchmarks", *plan.benchmarks]
    return out


def coverage_problems(plan: ShardPlan) -> list[str]:
    """Each parent slice in exactly one shard, and nothing else (a plan read back from disk is checked)."""
    seen: dict[str, str] = {}
    problems = []
    for s in plan.shards:
        for x in s.slices:
            if x in seen:
                problems.append(f"slice {x} is in shards {seen[x]} and {s.id}")
            seen[x] = s.id
    missing = [x for x in plan.slices if x not in seen]
    extra = [x for x in seen if x not in set(plan.slices)]
    problems += [f"slice {x} is in no shard" for x in missing[:5]]
    problems += [f"slice {x} is in shard {seen[x]} but not in the campaign" for x in extra[:5]]
    return problems


__all__ = ["DEFAULT_SHARD_BY", "PLAN_FILE", "SHARDS_DIR", "SHARD_BY", "Shard", "ShardPlan", "coverage_problems",
           "default_shard_by", "plan_shards", "shard_arguments"]

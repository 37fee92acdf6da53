"""The files of a sharded campaign that readers need (verify, report, status) without the Slurm side.

Kept apart from ``engine.cluster`` so that verification reads a Slurm campaign without importing what
submits and runs it (the layers contract: verify imports nothing that runs things).

Every reader goes through here: the plan (its shard ids plain names), each shard's folder (a real
folder inside the parent, never a link) and the merged view (a merge of this plan), so that no reader
follows a parent's files to a campaign outside it.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

from pydantic import ValidationError

from trace_tui.campaign_files.shards import PLAN_FILE, SHARDS_DIR, Shard, ShardPlan
from trace_tui.campaign_files.state import MIB, cut, read_campaign_json, validation_problem
from trace_tui.errors import CheckFailed, UsageError

MERGED_FILE = "merged.json"
MERGED_SCHEMA = "trace-tui-merged-v1"
PLAN_LIMIT = 16 * MIB  # `full` split per (model, seed) is about 60 KB
MERGED_LIMIT = 64 * MIB  # every slice's score of every shard


def is_sharded(path: Path | str) -> bool:
    # Anything named shards.json (a FIFO, a folder) makes it a Slurm campaign whose plan read_plan refuses,
    # rather than a single-node campaign that lacks its state.
    return os.path.lexists(Path(path) / PLAN_FILE)


def read_plan(parent: Path) -> ShardPlan:
    """PARENT/shards.json; UsageError when absent (not a Slurm campaign), CheckFailed naming the field when
    it is not a plan (a damaged campaign)."""
    path = Path(parent) / PLAN_FILE
    fix = "it is written by `trace-tui --recipe NAME --scheduler slurm`: run that command with a new --campaign DIR"
    try:
        data = read_campaign_json(path, limit=PLAN_LIMIT)
    except FileNotFoundError:
        raise UsageError(f"{parent} is not a sharded campaign (no {PLAN_FILE})",
                         hint="give the directory `trace-tui --recipe NAME --scheduler slurm` printed") from None
    except CheckFailed as exc:
        raise CheckFailed(exc.message, hint=exc.hint or fix) from None
    if not isinstance(data, dict):
        raise CheckFailed(f"{path}: not a shard plan (a JSON {type(data).__name__} at the top level)", hint=fix)
    try:
        return ShardPlan.model_validate(data)
    except ValidationError as exc:
        raise CheckFailed(f"{path}: not a shard plan: {validation_problem(exc)}", hint=fix) from None


def shard_dir(parent: Path, shard: Shard) -> Path | None:
    """PARENT/shards/ID when it is a real folder inside the parent; None when there is no folder (not run yet,
    or a file in its place: the shard's node refuses that and its task fails, which status shows).

    A link there (to another campaign, anywhere) raises CheckFailed naming it: a shard is read only from the
    folder the parent's own runs write.
    """
    parent = Path(parent)
    for where in (parent / SHARDS_DIR, parent / shard.dir):
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckFailed(f"{where}: unreadable ({exc.strerror or exc})") from None
        if stat.S_ISLNK(mode):
            try:
                target = os.readlink(where)
            except OSError:
                target = "?"
            raise CheckFailed(f"{where}: a symbolic link (to {target}), not the shard's own folder; it was not read",
                              hint="a shard is read only from a real folder inside the campaign")
        if not stat.S_ISDIR(mode):
            return None
    return parent / shard.dir


def merged_problem(parent: Path, plan: ShardPlan) -> str | None:
    """What is wrong with PARENT/merged.json as the merge of PLAN (absent included); None when it is one."""
    path = Path(parent) / MERGED_FILE
    try:
        data = read_campaign_json(path, limit=MERGED_LIMIT)
    except FileNotFoundError:
        return "the shards were never merged (run `trace-tui merge --campaign DIR` once all are complete)"
    except CheckFailed as exc:
        return f"{exc.message} (run `trace-tui merge --campaign DIR` again)"
    if not isinstance(data, dict):
        return f"not a merged view (a JSON {type(data).__name__} at the top level)"
    for key, want in (("schema", MERGED_SCHEMA), ("recipe", plan.recipe), ("run_tag", plan.run_tag),
                      ("config_sha256", plan.config_sha256)):
        if data.get(key) != want:
            return f"its {key} is {cut(data.get(key))}, not {want!r} (the plan's)"
    when = data.get("merged_at")
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        return f"its merged_at is {cut(when)}, not a time"
    shards = data.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        return "its shards are not a list of objects"
    got = [(s.get("id"), s.get("dir"), s.get("slices")) for s in shards]
    want_shards = [(s.id, s.dir, s.slices) for s in plan.shards]
    if got != want_shards:
        return f"its shards are not the plan's ({len(got)} listed, {len(want_shards)} planned)"
    return None

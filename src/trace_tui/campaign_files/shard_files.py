"""The files of a sharded campaign that readers need (verify, report, status) without the Slurm side.

Kept apart from ``engine.cluster`` so that verification reads a Slurm campaign without importing what
submits and runs it (the layers contract: verify imports nothing that runs things).
"""

from __future__ import annotations

from pathlib import Path

from trace_tui.campaign_files.shards import PLAN_FILE, ShardPlan
from trace_tui.errors import CheckFailed, UsageError

MERGED_FILE = "merged.json"


def is_sharded(path: Path | str) -> bool:
    return (Path(path) / PLAN_FILE).is_file()


def read_plan(parent: Path) -> ShardPlan:
    try:
        return ShardPlan.model_validate_json((parent / PLAN_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{parent} is not a sharded campaign (no {PLAN_FILE})",
                         hint="give the directory `trace-tui --recipe NAME --scheduler slurm` printed") from None
    except ValueError as exc:
        raise CheckFailed(f"{parent / PLAN_FILE}: not a shard plan ({str(exc).splitlines()[0]})") from None

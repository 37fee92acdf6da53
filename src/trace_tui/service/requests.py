"""The requests the faces hand the service, and what a run returns: frozen dataclasses (no I/O, no pydantic, so
the TUI can build them before its first paint)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.engine.runner import RunResult


@dataclasses.dataclass(frozen=True)
class Selection:
    """What narrows a recipe (`--models/--seeds/--benchmarks`); None: the recipe's own."""

    models: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    benchmarks: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a run goes on whichever machine runs it (the command line's run flags)."""

    home: str | None = None  # None: $TRACE_TUI_HOME or the default home
    campaign: str | None = None  # None: HOME/campaigns/RUN_TAG
    runtime: str | None = None  # None: where the campaign ran before, else Docker where it answers
    offline: bool = False
    redo: bool = False
    local_models: tuple[str, ...] = ()  # ID=PATH[@REV], each imported into the store before the run
    log_format: str = "console"
    log_file: str | None = None


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """A run of RECIPE (a name or a recipe file) on this machine, or the TUI opened on it (None: no recipe)."""

    recipe: str | None = None
    selection: Selection = Selection()
    options: RunOptions = RunOptions()
    yes: bool = False  # confirm every step: headless


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    """The site's choices for a job array (`--scheduler slurm` and its flags); None: the site's or recipe's default."""

    shard_by: str | None = None
    partition: str | None = None
    account: str | None = None
    gpus_per_node: int | None = None
    time: str | None = None
    max_parallel: int | None = None


@dataclasses.dataclass(frozen=True)
class SubmitRequest:
    """A run split into shards and submitted to Slurm as a job array."""

    run: RunRequest
    slurm: SlurmOptions = SlurmOptions()
    dry_run: bool = False  # write the scripts, print the sbatch commands, submit nothing
    no_wait: bool = False  # submit and return instead of following the jobs


@dataclasses.dataclass(frozen=True)
class VerifyRequest:
    """`verify --campaign DIR`, compared with the published values of RELEASE_DIR (else the store's release)."""

    campaign: Path
    release_dir: Path | None = None
    home: str | None = None


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """How a run on this machine ended: the runner's result (exit code, message, counts) and the campaign."""

    result: RunResult
    campaign: Path

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

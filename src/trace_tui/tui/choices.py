"""What the command line's flags choose, chosen in the UI: models, seeds, runtime, offline, scheduler.

`RunChoices` is the one record of those choices. The UI narrows the recipe and runs with it, and
shows the equivalent `trace-tui ...` command line (`command()`), which the real argument parser
accepts and which does the same from a shell. No I/O here. A frozen dataclass, not a pydantic
model: the app imports it before its first paint, and pydantic's import alone would cost more
than drawing the first screen (the few values it allows are checked here).
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING, Any, Literal

from trace_tui.common.runtimes import RUNTIME_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.service.requests import RunRequest, SlurmOptions

SLURM_FIELDS = ("partition", "account", "gpus_per_node", "time", "max_parallel")
RUNTIMES = (None, *RUNTIME_NAMES)  # None: Docker where its engine answers, else local
SCHEDULERS = ("none", "slurm")


@dataclasses.dataclass(frozen=True)
class RunChoices:
    recipe: str = ""
    campaign: str | None = None  # --campaign DIR; None: HOME/campaigns/RUN_TAG
    models: tuple[str, ...] = ()  # empty: every model of the recipe
    seeds: tuple[int, ...] = ()  # empty: every seed of the recipe
    runtime: str | None = None  # one of RUNTIMES
    offline: bool = False
    scheduler: Literal["none", "slurm"] = "none"
    partition: str | None = None
    account: str | None = None
    gpus_per_node: int | None = None
    time: str | None = None
    max_parallel: int | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime {self.runtime!r}: choose {', '.join(RUNTIME_NAMES)} (or none: Docker where "
                             "it answers)")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler {self.scheduler!r}: choose none or slurm")
        for name in ("models", "seeds"):  # tuples: the record stays frozen and hashable
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def replace(self, **changes: Any) -> RunChoices:
        """These choices with some changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def argv(self) -> list[str]:
        """The flags, in the order `trace-tui --help` lists them."""
        out = ["--recipe", self.recipe] if self.recipe else []
        if self.campaign:
            out += ["--campaign", self.campaign]
        if self.runtime:
            out += ["--runtime", self.runtime]
        if self.offline:
            out.append("--offline")
        if self.models:
            out += ["--models", *self.models]
        if self.seeds:
            out += ["--seeds", *(str(s) for s in self.seeds)]
        if self.scheduler == "slurm":
            out += ["--scheduler", "slurm"]
            for name in SLURM_FIELDS:
                value = getattr(self, name)
                if value not in (None, ""):
                    out += [f"--{name.replace('_', '-')}", str(value)]
        return out

    def command(self) -> str:
        return shlex.join(["trace-tui", *self.argv()])

    def narrowing(self) -> dict[str, Any]:
        """resolve_recipe's keyword arguments (None: the recipe's own selection)."""
        return {"models": list(self.models) or None, "seeds": list(self.seeds) or None}


def choices_from_request(request: RunRequest | None, slurm: SlurmOptions | None = None) -> RunChoices:
    """The choices a command line made (`trace-tui --recipe demo --runtime local ...` opening the UI)."""
    if request is None:
        return RunChoices()
    opts, sel = request.options, request.selection
    site = {name: getattr(slurm, name) for name in SLURM_FIELDS} if slurm is not None else {}
    return RunChoices(recipe=request.recipe or "", campaign=opts.campaign or None, models=sel.models or (),
                      seeds=sel.seeds or (), runtime=opts.runtime, offline=opts.offline,
                      scheduler="slurm" if slurm is not None else "none", **site)


def parse_int(text: str, flag: str) -> int | None:
    """An Input's text as an optional whole number; a clear one-line error naming the flag otherwise."""
    text = text.strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: give a whole number") from None
    if value < 0:
        raise ValueError(f"{flag} {value}: give 0 or more")
    return value

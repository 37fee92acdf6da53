"""Typed events: what stages print (the stage contract) and what the runner publishes.

The TUI and the headless printer consume only these types.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    step: str | None = None  # filled in by the runner: which recipe step said it


class Progress(_Event):
    type: Literal["progress"] = "progress"
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None
    phase: str
    done: int = Field(ge=0)
    total: int = Field(ge=0)


class Log(_Event):
    type: Literal["log"] = "log"
    level: str = "info"
    message: str


class Artifact(_Event):
    type: Literal["artifact"] = "artifact"
    path: str
    sha256: str
    bytes: int = Field(ge=0)


class Status(_Event):
    """How a worker ended; with a slice, how one slice ended inside a worker that serves several in turn."""

    type: Literal["status"] = "status"
    state: Literal["completed", "failed"]
    message: str = ""
    exit_code: int = 0
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None


class Metric(_Event):
    """A named number a stage computed, e.g. {"type": "metric", "name": "score", "value": 41.5}."""

    type: Literal["metric"] = "metric"
    name: str
    value: float
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None


# Runner-level events (not printed by stages).
class StepState(_Event):
    type: Literal["step_state"] = "step_state"
    state: Literal["pending", "skipped", "running", "completed", "failed", "cancelled"]
    message: str = ""


class SliceState(_Event):
    """A job of a step (one slice, or the whole step when it is not per slice) changed state."""

    type: Literal["slice_state"] = "slice_state"
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None
    state: Literal["pending", "skipped", "running", "resumed", "completed", "failed", "cancelled",
                   "invalidated"]
    message: str = ""
    done: int = 0
    total: int = 0
    score: float | None = None


class RunState(_Event):
    """The run as a whole: planned (with counts), then completed, failed or cancelled."""

    type: Literal["run_state"] = "run_state"
    state: Literal["planned", "running", "completed", "failed", "cancelled"]
    message: str = ""
    campaign: str = ""
    jobs_total: int = 0
    jobs_done: int = 0
    rows_total: int = 0
    rows_done: int = 0
    # planned: each step with rows -> [rows done, rows total] (a step's own rate gives its own time left)
    step_rows: dict[str, list[int]] = Field(default_factory=dict)


StageEvent = Annotated[Progress | Log | Artifact | Status | Metric, Field(discriminator="type")]
Event = Annotated[Progress | Log | Artifact | Status | Metric | StepState | SliceState | RunState,
                  Field(discriminator="type")]

_stage_adapter: TypeAdapter[StageEvent] = TypeAdapter(StageEvent)


def parse_stage_line(line: str, *, step: str | None = None) -> Progress | Log | Artifact | Status | Metric:
    """One line of a stage's stdout as an event. Anything malformed is kept as log text."""
    text = line.rstrip("\r\n")
    body = text.rstrip()
    if body.startswith("{") and body.endswith("}"):
        # The hot path (tens of thousands of progress lines a second): one pass of pydantic's JSON
        # parser, with the runner's step appended as the last key so that it wins over a stage's own.
        if step is not None and len(body) > 2:
            body = f'{body[:-1]},"step":{json.dumps(step)}}}'
        try:
            return _stage_adapter.validate_json(body)
        except ValidationError:
            pass
    return Log(level="output", message=text, step=step)


_DONE = '"done":'
_COUNT = re.compile(r"[0-9]+(?=[,}])")


def progress_key(line: str) -> str | None:
    """A compact one-line progress event with its ``done`` count cut out; None for any other line.

    Two lines with the same key are the same progress (stage, slice, phase, total) at two counts.
    Only the exact shape the stage protocol writes qualifies (compact separators, a plain
    non-negative integer count), so anything unusual is never coalesced.
    """
    if not line.startswith("{") or '"type":"progress"' not in line:
        return None
    i = line.find(_DONE)
    if i < 0:
        return None
    count = _COUNT.match(line, i + len(_DONE))
    if count is None:
        return None
    return line[:i] + line[count.end():]


def coalesce_progress(batch: list[str], seen: set[str]) -> list[str]:
    """The lines of one read worth parsing: a progress line directly followed by the same
    progress at a later count is dropped, except the first of its key (``seen``, kept per job).

    What every consumer needs of a burst of progress is its last count (the state, the
    database and the event log keep only the latest anyway); the first line of a key is kept
    because it announces a slice as running or resumed. Every other event is kept, in order.
    """
    if len(batch) < 2:
        for line in batch:
            key = progress_key(line)
            if key is not None:
                seen.add(key)
        return batch
    keys = [progress_key(line) for line in batch]
    out = []
    last = len(batch) - 1
    for i, line in enumerate(batch):
        key = keys[i]
        if key is not None:
            if i < last and keys[i + 1] == key and key in seen:
                continue
            seen.add(key)
        out.append(line)
    return out

"""Typed events: what stages print (the stage contract) and what the runner publishes.

The TUI and the headless printer consume only these types.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, Union

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
    type: Literal["status"] = "status"
    state: Literal["completed", "failed"]
    message: str = ""
    exit_code: int = 0


# Runner-level events (not printed by stages).
class StepState(_Event):
    type: Literal["step_state"] = "step_state"
    state: Literal["pending", "skipped", "running", "completed", "failed", "cancelled"]
    message: str = ""


StageEvent = Annotated[Union[Progress, Log, Artifact, Status], Field(discriminator="type")]
Event = Annotated[Union[Progress, Log, Artifact, Status, StepState], Field(discriminator="type")]

_stage_adapter: TypeAdapter[StageEvent] = TypeAdapter(StageEvent)


def parse_stage_line(line: str, *, step: str | None = None) -> Progress | Log | Artifact | Status:
    """One line of a stage's stdout as an event. Anything malformed is kept as log text."""
    text = line.rstrip("\r\n")
    if text.startswith("{"):
        try:
            data = json.loads(text)
            if isinstance(data, dict):
                if step is not None:
                    data["step"] = step
                return _stage_adapter.validate_python(data)
        except (ValueError, ValidationError):
            pass
    return Log(level="output", message=text, step=step)

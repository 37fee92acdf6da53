"""Recipe schema: a recipe is an ordered list of steps of the release guide.

Models, seeds, suites and settings are never retyped here: a recipe selects
from the release lock (``models: all`` or a list of model ids), and the
resolver turns the selection into concrete pins.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Stage = Literal["train", "infer", "score", "host"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepNeeds(_Strict):
    gpus: int = Field(0, ge=0, description="GPUs per model endpoint (0: runs on CPU)")
    gpu_memory_gib: float = Field(0, ge=0, description="memory per GPU")
    compute_capability: str | None = Field(None, description="minimum, e.g. '8.0' for bf16")
    disk_gib: float = Field(0, ge=0)
    network: bool = False
    store: list[str] = Field(default_factory=list, description="store entries the step reads")


class Step(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    description: str = ""
    stage: Stage
    image: Literal["train", "infer", "score"] | None = None  # None: runs on the host
    run: list[str] = Field(description="module and arguments of the worker, e.g. ['trace_tui.stages.generate']")
    needs: StepNeeds = StepNeeds()
    inputs: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    confirm: bool = False
    per_slice: bool = Field(False, description="one job per (model, seed, benchmark) slice")


class Selection(_Strict):
    suite: Literal["trace_eval", "trace_validation", "demo"] | None = None
    models: list[str] | Literal["all"] = Field(default_factory=list)
    seeds: list[int] | Literal["all"] = Field(default_factory=list)
    benchmarks: list[str] | Literal["all"] = Field(default_factory=list)


class Recipe(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    purpose: str
    canonical: bool = True
    selection: Selection = Selection()
    settings: dict[str, float | int | str | bool] = Field(
        default_factory=dict, description="overrides of the suite's generation settings (demo profile only)")
    steps: list[Step]

"""The train stage's job spec (trace_tui.stages.train_smoke): what the runner hands the worker, validated."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from trace_tui.stages.train_profile import Overrides


InputSpec = str | dict[str, Any]


class SliceSpec(BaseModel):
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None


class TrainInputs(BaseModel):
    """Each input: a path (relative: inside the store) or an input spec {"entry"|"path"|"store"|"campaign", "file"?}."""

    model_config = ConfigDict(extra="allow")  # the runner adds "upstream"

    model: InputSpec
    profile: InputSpec | None = None
    system_prompt: InputSpec | None = None
    train_files: list[InputSpec] | None = None
    model_id: str | None = None
    model_revision: str | None = None


class TrainSettings(Overrides):
    # The recipe's settings travel here too (generation settings of other steps): ignored unless named below.
    model_config = ConfigDict(extra="ignore")

    device: Literal["auto", "cpu", "cuda"] = "auto"
    cpu_threads: int | None = 1
    # GPU weight precision: fp32 master weights (as upstream) when they fit, else bf16 (recorded).
    weights: Literal["auto", "fp32", "bf16"] = "auto"
    train: Overrides | None = None
    # The demo's generation settings, which also bound its training step (built-in demo profile only).
    min_image_pixels: int | None = None
    max_image_pixels: int | None = None
    max_tokens: int | None = None

    def overrides(self, *, demo: bool) -> Overrides:
        fields = set(Overrides.model_fields)
        values = {k: v for k, v in self.model_dump(include=fields).items() if v is not None}
        if self.train is not None:
            values.update({k: v for k, v in self.train.model_dump().items() if v is not None})
        if demo:
            for name, alias in (("min_pixels", self.min_image_pixels), ("max_pixels", self.max_image_pixels),
                                ("max_response_length", self.max_tokens)):
                if alias is not None:
                    values.setdefault(name, alias)
        return Overrides(**values)


class TrainJob(BaseModel):
    model_config = ConfigDict(extra="allow")

    step: str = "train-smoke"
    recipe: str | None = None
    slice: SliceSpec | None = None
    inputs: TrainInputs
    settings: TrainSettings = TrainSettings()
    output_dir: str | None = None  # relative to the campaign (the runner sets it)
    output: str | None = None  # older name of output_dir


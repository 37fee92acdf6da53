"""The release lock: every pinned identity of the TRACE release, as pydantic models.

Everything else in the project reads identities (hashes, revisions, models,
seeds, benchmarks, settings) from here; nothing retypes them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_tui.errors import UsageError
from trace_tui.resources import release_lock_path

Sha256 = str  # 64 lower-case hex digits


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Upstream(_Frozen):
    repository: str
    branch: str
    commit: str
    paper_branch: str
    # git tree of rlvr/ at `commit`: how an evaluator source without history (an archive) is verified
    rlvr_tree: str


class PublishedHash(_Frozen):
    path: str  # relative to the repository root
    sha256: Sha256
    role: str


class ModelPin(_Frozen):
    id: str  # results.json model_id
    label: str
    validation_label: str
    scale: Literal["3B", "7B"]
    repo_id: str
    revision: str
    evaluator_slug: str  # the release evaluator's slug (EXTERNAL-SUITE.md)
    post_training_data: str | None
    is_base: bool
    base_model_id: str | None
    published_revision_sets: dict[str, str] = Field(default_factory=dict)
    license: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.repo_id}@{self.revision}"


class RepoPin(_Frozen):
    repo_id: str
    revision: str

    @property
    def ref(self) -> str:
        return f"{self.repo_id}@{self.revision}"


class ServingPin(_Frozen):
    """vLLM engine settings the release pins for a served model (not vLLM's defaults)."""
    max_model_len: int
    gpu_memory_utilization: float
    # vLLM's --generation-config: "vllm" = vLLM's own sampling defaults, not the checkpoint's
    # generation_config.json (the release's validation judge server passes it).
    generation_config: str


class SourceStringPin(_Frozen):
    """A string constant of one of the release's source files, pinned by the sha256 of its UTF-8 bytes.
    The text is read at run time from the release's sources, never kept in this project."""
    file: str  # relative to the release checkout's root
    name: str  # the module-level name assigned to it
    sha256: Sha256


class JudgePin(RepoPin):
    evaluator_slug: str
    temperature: float
    thinking: bool
    max_token_retries: list[int]
    # the release's validation judge server: --max-model-len 8192 --generation-config vllm, memory 0.90
    vllm: ServingPin
    # the validation judge's SYSTEM_PROMPT (judge_extract.py), sent with seed 0 through /v1/completions
    system_prompt: SourceStringPin


class GitPin(_Frozen):
    repository: str
    commit: str
    tree: str  # the commit's root tree, checked with the commit wherever the source is fetched or unpacked


class DatasetFile(_Frozen):
    path: str
    split: Literal["train", "validation"]
    rows: int
    bytes: int
    sha256: Sha256  # at dataset-v1 (the equivalence receipt's "current")
    historical_sha256: Sha256  # at the revision the published campaigns ran on


class DatasetPin(_Frozen):
    repo_id: str
    tag: str
    revision: str
    measured_revision: str
    historical_revision: str
    equivalence_receipt: str
    files: list[DatasetFile]

    def file(self, split: str) -> list[DatasetFile]:
        return [f for f in self.files if f.split == split]


class ValidationGeneration(_Frozen):
    seed: int
    temperature: float
    top_p: float
    top_k: int
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    max_tokens: int
    min_image_pixels: int
    max_image_pixels: int


class TraceValidationPin(_Frozen):
    suite_id: str
    suite_path: str
    results_path: str
    rows: int
    prompt_key: str
    image_key: str
    system_prompt_file: str
    system_prompt_sha256: Sha256
    generation: ValidationGeneration


class Benchmark(_Frozen):
    key: str
    display: str
    category: str
    route: Literal["official_vlmevalkit", "direct_score", "dedicated_score"]
    rows: int


class EvalGeneration(_Frozen):
    temperature: float
    top_p: float
    top_k: int
    presence_penalty: float
    repetition_penalty: float
    max_tokens: int
    min_image_pixels: int
    max_image_pixels: int


class TraceEvalPin(_Frozen):
    suite_id: str
    suite_path: str
    results_path: str
    seeds: list[int]
    rows_per_model_seed: int
    benchmarks: list[Benchmark]
    generation: EvalGeneration

    @property
    def categories(self) -> list[str]:
        return list(dict.fromkeys(b.category for b in self.benchmarks))


class TrainingPin(_Frozen):
    configs: dict[str, str]


class ReleaseLock(_Frozen):
    schema_version: Literal["trace-tui-release-lock-v1"]
    release_id: str
    upstream: Upstream
    published_hashes: list[PublishedHash]
    models: list[ModelPin]
    training_base_models: dict[str, RepoPin]
    judge: JudgePin
    vlmevalkit: GitPin
    dataset: DatasetPin
    trace_validation: TraceValidationPin
    trace_eval: TraceEvalPin
    training: TrainingPin
    reference_environment: dict[str, str]

    def model(self, model_id: str) -> ModelPin:
        for m in self.models:
            if m.id == model_id:
                return m
        known = ", ".join(m.id for m in self.models)

        raise UsageError(f"unknown model {model_id!r}", hint=f"known models: {known}")

    def published_hash(self, role: str) -> PublishedHash:
        return next(h for h in self.published_hashes if h.role == role)


def load_release_lock(path: Path) -> ReleaseLock:
    return ReleaseLock.model_validate(json.loads(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=1)
def release_lock() -> ReleaseLock:
    """The lock shipped with the package."""
    return load_release_lock(release_lock_path())

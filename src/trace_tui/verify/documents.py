"""Schemas of the release's own documents: only the fields the checks read, typed strictly.

A file that parses but lacks a field, or has the wrong type, is a schema
violation reported against that file. Unknown fields are ignored: the release
may carry more than we read.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class Doc(BaseModel):
    # strict: a number stored as a string is a schema violation, not something to coerce.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


# --- rlvr/release_files.v1.json -------------------------------------------------------------
class PathHash(Doc):
    path: str
    sha256: Sha256


class CanonicalEvaluation(Doc):
    suite_id: str
    results_sha256: Sha256
    source_map_sha256: Sha256


class CanonicalValidation(Doc):
    suite_id: str
    results_sha256: Sha256
    suite_sha256: Sha256


class DatasetRelease(Doc):
    equivalence_receipt: PathHash


class ReleaseFilesDoc(Doc):
    files: list[PathHash]
    canonical_evaluation: CanonicalEvaluation
    canonical_trace_validation: CanonicalValidation
    dataset_release: DatasetRelease


# --- rlvr/evaluation/trace_eval/release_receipts.v1.json -----------------------------------------
class EvaluationEnvironment(Doc):
    requirements_path: str
    requirements_sha256: Sha256


class ReleaseReceiptsDoc(Doc):
    canonical_files: list[PathHash]
    evaluation_environment: EvaluationEnvironment


# --- rlvr/source_map.v1.json -----------------------------------------------------------------
class SourceMapFile(Doc):
    destination_path: str
    review_status: str
    source_sha256: Sha256


class SourceMapValidation(Doc):
    results_sha256: Sha256
    suite_sha256: Sha256


class SourceMapDataset(Doc):
    equivalence_receipt: PathHash


class SourceMapTraining(Doc):
    dataset_equivalence_receipt_sha256: Sha256


class SourceMapInputs(Doc):
    answer_prompt_sha256: Sha256
    trace_dataset: SourceMapDataset
    trace_validation: SourceMapValidation
    training_contract: SourceMapTraining


class SourceMapDoc(Doc):
    files: list[SourceMapFile]
    release_inputs: SourceMapInputs


# --- rlvr/configs/*.yaml ------------------------------------------------------------------------
class RepoRef(Doc):
    repo_id: str
    revision: str


class ConfigDataset(Doc):
    repo_id: str
    revision: str
    equivalence_receipt_path: str
    equivalence_receipt_sha256: Sha256


class ConfigRelease(Doc):
    released_model: RepoRef
    base_model: RepoRef
    dataset: ConfigDataset
    prompt: PathHash


class TrainingConfigDoc(Doc):
    config_id: str
    release: ConfigRelease


# --- trace_eval suite, provenance, results ---------------------------------------------------------
class SuiteBenchmark(Doc):
    key: str
    display: str
    category: str
    route: str
    rows: int


class GitCommit(Doc):
    commit: str


class EvalSuiteDoc(Doc):
    suite_id: str
    benchmarks: list[SuiteBenchmark]
    categories: dict[str, list[str]]
    generation: dict[str, Any]
    vlmevalkit: GitCommit


class ProvenanceBenchmark(Doc):
    benchmark_id: str
    category: str
    row_count: int
    official_alias: str


class ProvenanceDoc(Doc):
    suite_id: str
    benchmarks: list[ProvenanceBenchmark]


class ResultsModel(Doc):
    model_id: str
    display_name: str
    parameter_scale: str
    repository_id: str
    repository_revision: str


class ResultsSuite(Doc):
    suite_id: str
    suite_path: str
    suite_sha256: Sha256
    benchmark_count: int
    rows_per_model_seed: int
    decoding: dict[str, Any]
    vlmevalkit: GitCommit


class BenchmarkScore(Doc):
    model_id: str
    seed: int
    benchmark_id: str
    score: float
    evaluated_rows: int


class BenchmarkSummary(Doc):
    model_id: str
    benchmark_id: str
    mean: float
    stddev: float
    seed_count: int
    evaluated_rows: int


class CategoryScore(Doc):
    model_id: str
    seed: int
    category_name: str
    score: float
    benchmark_count: int


class CategorySummary(Doc):
    model_id: str
    category_name: str
    mean: float
    stddev: float
    seed_count: int
    benchmark_count: int


class OverallScore(Doc):
    model_id: str
    seed: int
    score: float
    benchmark_count: int


class OverallSummary(Doc):
    model_id: str
    mean: float
    stddev: float
    seed_count: int
    benchmark_count: int


class SeedDelta(Doc):
    seed: int
    delta: float


class StoredDelta(Doc):
    mean: float
    stddev: float
    seed_values: list[SeedDelta]


class StoredBenchmarkDelta(StoredDelta):
    benchmark_id: str


class Comparison(Doc):
    model_id: str
    base_model_id: str
    parameter_scale: str
    overall_delta: StoredDelta
    benchmark_deltas: list[StoredBenchmarkDelta]


class Scores(Doc):
    benchmark_scores: list[BenchmarkScore]
    benchmark_summaries: list[BenchmarkSummary]
    category_scores: list[CategoryScore]
    category_summaries: list[CategorySummary]
    overall_scores: list[OverallScore]
    overall_summaries: list[OverallSummary]


class ResultsDoc(Doc):
    release_id: str
    score_unit: str
    seeds: list[int]
    models: list[ResultsModel]
    suite: ResultsSuite
    scores: Scores
    comparisons: list[Comparison]


# --- TRACE validation ----------------------------------------------------------------------------
class ValidationDataset(Doc):
    repo_id: str
    revision: str
    sha256: Sha256
    rows: int


class ValidationPrompt(Doc):
    system_prompt_file: str
    system_prompt_sha256: Sha256


class ValidationSuiteModel(Doc):
    slug: str
    label: str
    repo_id: str
    revision: str


class ValidationSuiteDoc(Doc):
    suite_id: str
    dataset: ValidationDataset
    prompt: ValidationPrompt
    generation: dict[str, Any]
    models: list[ValidationSuiteModel]


class ValidationEvaluation(Doc):
    rows_per_model: int
    seed: int
    score_unit: str


class ValidationSource(Doc):
    dataset_revision: str
    run_id: str
    results_sha256: Sha256


class ValidationResult(Doc):
    model_id: str
    label: str
    evaluated_rows: int
    score: float


class ValidationResultsDoc(Doc):
    evaluation: ValidationEvaluation
    source: ValidationSource
    results: list[ValidationResult]


class ImmutableSource(Doc):
    dataset_revision: str
    run_id: str
    files: dict[str, PathHash]


class CampaignVerification(Doc):
    status: str
    models: int
    seed: int
    rows_per_model: int
    generation_rows: int
    scored_rows: int


class PublicRelease(Doc):
    suite_path: str
    suite_sha256: Sha256
    results_path: str
    results_sha256: Sha256
    result_rows: int


class ValidationReceiptDoc(Doc):
    immutable_source: ImmutableSource
    campaign_verification: CampaignVerification
    public_release: PublicRelease


class AnyObject(Doc):
    """A document we only require to be a JSON object (its hash is checked elsewhere)."""

    model_config = ConfigDict(extra="allow", frozen=True)


def schema_error_line(exc: Exception) -> str:
    """The first validation error as 'field.path: message' (one line, no pydantic banner)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
            more = len(errors()) - 1
            tail = f" (and {more} more)" if more > 0 else ""
            return f"{loc}: {first.get('msg', 'invalid')}{tail}"
        except Exception:  # noqa: BLE001 - fall through to str()
            pass
    return str(exc).splitlines()[0]


"""Schemas of the release's own documents: only the fields the checks read, typed strictly.

A file that parses but lacks a field, or has the wrong type, is a schema
violation reported against that file. Unknown fields are ignored: the release
may carry more than we read.
"""


import re
import types
from functools import lru_cache
from typing import TYPE_CHECKING

# No `from __future__ import annotations` here: with real (not string) annotations, compiling a
# schema reads them as they are, and never evals a string on the timed first use.
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Annotated, Any, TypeVar

    Sha256 = Annotated[str, "sha256"]
    _D = TypeVar("_D", bound="Doc")
else:
    # At run time the schemas name these two markers instead: reading typing's Annotated through
    # get_type_hints costs `trace-tui verify` more than all the schemas' validation.
    class Any:
        """Any JSON value (typing.Any to type checkers)."""

    class Sha256(str):
        """A sha256, 64 lower-case hex digits (Annotated[str, "sha256"] to type checkers)."""

# Hand-rolled rather than pydantic: these ~45 small schemas sit on the timed
# `trace-tui verify` path, and building them as pydantic models costs more than
# the whole verification. Semantics follow pydantic's strict mode: no coercion
# (a number stored as a string is an error), ints accepted for floats, bools
# never accepted as numbers, unknown fields ignored.

_SHA = re.compile(r"[0-9a-f]{64}")


class SchemaError(ValueError):
    """A document that parses but does not have the fields and types read from it."""

    def __init__(self, msg: str, loc: list[Any] | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.loc = loc or []

    def line(self) -> str:
        where = ".".join(str(p) for p in self.loc) or "(top level)"
        return f"{where}: {self.msg}"

    def __str__(self) -> str:
        return self.line()


def _name(value: object) -> str:
    return "null" if value is None else type(value).__name__


@lru_cache(maxsize=None)
def _compile(tp: object) -> "Callable[[object], object]":
    """A validator for one annotation: returns the (converted) value or raises SchemaError."""
    if tp is Any:
        return lambda v: v
    origin = getattr(tp, "__origin__", None)  # list[X] and dict[K, V] (types.GenericAlias)
    if tp is Sha256:
        inner = _compile(str)

        def sha(v: object) -> str:
            v = inner(v)
            if not _SHA.fullmatch(v):
                raise SchemaError(f"expected a sha256 (64 lower-case hex digits), got {v[:20]!r}")
            return v
        return sha
    if tp is str:
        def string(v: object) -> str:
            if type(v) is not str:
                raise SchemaError(f"expected a string, got {_name(v)}")
            return v
        return string
    if tp is int:
        def integer(v: object) -> int:
            if type(v) is not int:
                raise SchemaError(f"expected an integer, got {_name(v)}")
            return v
        return integer
    if tp is float:
        def number(v: object) -> float:
            if type(v) is float:
                return v
            if type(v) is int:
                return float(v)
            raise SchemaError(f"expected a number, got {_name(v)}")
        return number
    if tp is bool:
        def boolean(v: object) -> bool:
            if type(v) is not bool:
                raise SchemaError(f"expected true or false, got {_name(v)}")
            return v
        return boolean
    if origin is list:
        (item_tp,) = tp.__args__
        item = _compile(item_tp)

        def seq(v: object) -> list[object]:
            if type(v) is not list:
                raise SchemaError(f"expected a list, got {_name(v)}")
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(item(x))
                except SchemaError as exc:
                    exc.loc.insert(0, i)
                    raise
            return out
        return seq
    if origin is dict:
        _k, val_tp = tp.__args__
        val = _compile(val_tp)

        def mapping(v: object) -> dict[str, object]:
            if type(v) is not dict:
                raise SchemaError(f"expected an object, got {_name(v)}")
            out = {}
            for k, x in v.items():
                try:
                    out[k] = val(x)
                except SchemaError as exc:
                    exc.loc.insert(0, k)
                    raise
            return out
        return mapping
    if isinstance(tp, types.UnionType):  # X | Y
        options = [_compile(a) for a in tp.__args__]

        def union(v: object) -> object:
            errors = []
            for opt in options:
                try:
                    return opt(v)
                except SchemaError as exc:
                    errors.append(exc.msg)
            raise SchemaError(" or ".join(errors))
        return union
    if tp is type(None):
        def none(v: object) -> None:
            if v is not None:
                raise SchemaError(f"expected null, got {_name(v)}")
            return v
        return none
    if isinstance(tp, type) and issubclass(tp, Doc):
        return tp._validate
    raise TypeError(f"unsupported annotation {tp!r}")  # a programming error, caught by tests


class Doc:
    """A document (or part of one): the annotated fields are required and typed; the rest is ignored."""

    _fields = None  # field -> its validator, made on first use

    @classmethod
    def _field_validators(cls) -> "dict[str, Callable[[object], object]]":
        if cls.__dict__.get("_fields") is None:
            hints: dict = {}
            for klass in reversed(cls.__mro__):  # a base's fields first, as typing.get_type_hints orders them
                hints.update(klass.__dict__.get("__annotations__", {}))
            cls._fields = {k: _compile(t) for k, t in hints.items() if not k.startswith("_")}
        return cls._fields  # type: ignore[return-value]

    @classmethod
    def _validate(cls: "type[_D]", value: object) -> "_D":
        if type(value) is not dict:
            raise SchemaError(f"expected an object, got {_name(value)}")
        obj = cls.__new__(cls)
        attrs = obj.__dict__
        # Hot: once per object of a document (about 2,000 for the release's results.json).
        for name, check in (cls.__dict__.get("_fields") or cls._field_validators()).items():
            try:
                attrs[name] = check(value[name])
            except KeyError:
                if name in value:
                    raise
                raise SchemaError("field required", [name]) from None
            except SchemaError as exc:
                exc.loc.insert(0, name)
                raise
        return obj

    @classmethod
    def model_validate(cls: "type[_D]", value: object) -> "_D":
        """Validate parsed JSON/YAML; raises SchemaError naming the field path."""
        return cls._validate(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__


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

    @classmethod
    def _validate(cls: "type[_D]", value: object) -> "_D":
        if type(value) is not dict:
            raise SchemaError(f"expected an object, got {_name(value)}")
        obj = cls.__new__(cls)
        obj.__dict__["data"] = value
        return obj


def schema_error_line(exc: Exception) -> str:
    """'field.path: message', one line."""
    if isinstance(exc, SchemaError):
        return exc.line()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

"""What every stage worker of ours shares: reading the job spec, resolving its inputs, and
turning the outcome into the final status line and exit code (stdlib only at import).

A worker never lets a traceback be its only message: an expected failure
(bad job, missing input, hash mismatch) becomes one ``status failed`` line
naming the field and the fix, and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from trace_tui.campaign_files.recipe_file import read_campaign_recipe
from trace_tui.common.digest import sha256_file, sha256set
from trace_tui.common.safe_write import NotWritten, directory_inside
from trace_tui.errors import CheckFailed, TraceTuiError, UsageError
from trace_tui.stages import protocol

RECEIPT_SCHEMA = "trace-tui-stage-receipt-v1"
DEFAULT_JOB = "/job/job.json"
DEFAULT_CAMPAIGN = "/campaign"
DEFAULT_STORE = "/store"
DEFAULT_EVALUATOR = "/opt/trace"
J = TypeVar("J")


class JobError(UsageError):
    """A bad job spec or input: one line with the fix (exit 2, like any bad input)."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message, hint=fix or None)
        self.fix = fix


@dataclass(frozen=True)
class WorkerContext:
    """Where a worker's job spec, campaign, store and release evaluator are, as the runner passes them in the
    container's environment (read once, when the worker starts)."""

    job_path: Path
    campaign: Path
    store: Path
    evaluator: Path

    @classmethod
    def from_environment(cls) -> WorkerContext:
        env = os.environ
        return cls(job_path=Path(env.get("TRACE_TUI_JOB", DEFAULT_JOB)),
                   campaign=Path(env.get("TRACE_TUI_CAMPAIGN", DEFAULT_CAMPAIGN)),
                   store=Path(env.get("TRACE_TUI_STORE", DEFAULT_STORE)),
                   evaluator=Path(env.get("TRACE_TUI_EVALUATOR", DEFAULT_EVALUATOR)))


def campaign_dir() -> Path:
    return Path(os.environ.get("TRACE_TUI_CAMPAIGN", DEFAULT_CAMPAIGN))


def store_dir() -> Path:
    return Path(os.environ.get("TRACE_TUI_STORE", DEFAULT_STORE))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def slice_fields(job: dict[str, Any]) -> dict[str, Any]:
    sl = job.get("slice")
    if not isinstance(sl, dict) or not all(k in sl for k in ("model", "seed", "benchmark")):
        raise JobError(f"job field 'slice' must be {{model, seed, benchmark}}, got {sl!r}",
                       "this step runs once per slice")
    return {"model": str(sl["model"]), "seed": int(sl["seed"]), "benchmark": str(sl["benchmark"])}


def slice_rel(sl: dict[str, Any]) -> str:
    """The default folder of a slice's outputs inside the campaign."""
    safe = sl["model"].replace("/", "--").replace(":", "+")
    return f"slices/{safe}/{sl['seed']}/{sl['benchmark']}"


def output_dir(job: dict[str, Any]) -> Path:
    rel = job.get("output_dir") or slice_rel(slice_fields(job))
    if ".." in Path(rel).parts or Path(rel).is_absolute():
        raise JobError(f"job field 'output_dir' {rel!r} must be relative to the campaign, without '..'")
    return folder_inside_campaign(rel)


def folder_inside_campaign(rel: str | Path) -> Path:
    """CAMPAIGN/REL, made where missing, for writing: no name on the way a link (a folder linked out of the
    campaign would take what the worker writes, and the receipt would list none of it). JobError otherwise."""
    try:
        return directory_inside(campaign_dir(), rel)
    except NotWritten as exc:
        raise JobError(str(exc), "a campaign handed over is data: its outputs are written only in place") from None


def rows_dir(out: Path) -> Path:
    return out / "rows"


def writable_rows_dir(out: Path) -> Path:
    """OUT/rows (OUT an output_dir), made and checked as output_dir is: the folder a worker writes its rows in."""
    return folder_inside_campaign((out / "rows").relative_to(campaign_dir()))


def entry_path(name: str) -> Path:
    """A store entry's path as a consumer reads it (its folder; a one-file dataset: that file)."""
    from trace_tui.store.store import Store

    return Store(store_dir()).path_of(name)


DEMO_TASKS_ENTRY = "local:dataset/demo-tasks"
DEMO_SYSTEM_PROMPT_FILE = "system_prompt.txt"


def model_entry_of(model: dict[str, Any]) -> str:
    """The store entry of a model as the runner passes it (a release pin or a local model)."""
    if model.get("store_entry"):
        entry = str(model["store_entry"])
        return entry if entry.startswith("local:") else f"local:{entry}"
    if model.get("repo_id") and model.get("revision"):
        from trace_tui.store.names import model_entry

        return model_entry(model["repo_id"], model["revision"])
    raise JobError(f"job model {model.get('id')!r} names neither a store entry nor repo_id@revision",
                   "the recipe's models must come from the release lock or local_models")


def judge_entry() -> str:
    from trace_tui.release import release_lock
    from trace_tui.store.names import model_entry

    j = release_lock().judge
    return model_entry(j.repo_id, j.revision)


def generation_inputs(job: dict[str, Any]) -> dict[str, Any]:
    """Where a generation job's model, dataset and system prompt live.

    ``job["paths"]`` (explicit input specs) wins; otherwise they follow from the
    slice's model and benchmark as the runner passes them: the demo's task groups
    are files of the demo-tasks entry (with the system prompt beside them); TRACE
    validation reads the pinned validation parquet and the release's prompt file,
    both checked against the release lock.
    """
    explicit = job.get("paths") or {}
    if all(k in explicit for k in ("model", "dataset", "system_prompt")):
        return explicit
    inputs = job.get("inputs") or {}
    model = job.get("model") or inputs.get("model") or {}
    bench = job.get("benchmark") or inputs.get("benchmark") or {}
    out: dict[str, Any] = {"model": {"entry": model_entry_of(model), "repo_id": model.get("repo_id"),
                                     "revision": model.get("revision")}}
    route = bench.get("route")
    if route == "demo":
        out["dataset"] = {"entry": DEMO_TASKS_ENTRY, "file": f"{bench['key']}.parquet"}
        out["system_prompt"] = {"entry": DEMO_TASKS_ENTRY, "file": DEMO_SYSTEM_PROMPT_FILE}
    elif route == "trace_validation":
        from trace_tui.release import release_lock
        from trace_tui.store.names import dataset_entry, release_entry

        lock = release_lock()
        pin = next((m for m in lock.models if (m.repo_id, m.revision) == (model.get("repo_id"), model.get("revision"))),
                   None)
        # the content the release's validation ran this model from (trace_tui.stages.model_view)
        out["model"]["validation_sha256set"] = pin.published_revision_sets.get("trace_validation") if pin else None
        files = lock.dataset.file("validation")
        out["dataset"] = {"entry": dataset_entry(lock, "validation"),
                          "file": files[0].path.rsplit("/", 1)[-1] if len(files) == 1 else None,
                          "sha256": files[0].sha256 if len(files) == 1 else None}
        out["system_prompt"] = {"entry": release_entry(lock),
                                "file": lock.trace_validation.system_prompt_file,
                                "sha256": lock.trace_validation.system_prompt_sha256}
    else:
        raise JobError(f"benchmark {bench.get('key')!r} (route {route!r}) is not served by this worker",
                       "trace_tui.stages.generate serves TRACE validation and the demo; the external suite "
                       "runs the release's evaluator")
    out.update(explicit)
    return out


def input_path(inputs: dict[str, Any], key: str, *, want: str, check_sha256: bool = False,
               required: bool = True) -> Path | None:
    spec = inputs.get(key)
    if spec is None:
        if not required:
            return None
        raise JobError(f"job input {key!r} is missing", "the recipe step must name it")
    if isinstance(spec, str):
        spec = {"path": spec}
    if "path" in spec:
        path = Path(spec["path"])
    elif "store" in spec:
        path = store_dir() / spec["store"]
    elif "campaign" in spec:
        path = campaign_dir() / spec["campaign"]
    elif "entry" in spec:
        path = entry_path(spec["entry"])
        if spec.get("file") and path.is_dir():
            path = path / spec["file"]
    else:
        raise JobError(f"job input {key!r} must have one of path/store/campaign/entry, got {spec!r}")
    ok = path.is_dir() if want == "dir" else path.is_file()
    if not ok:
        raise JobError(f"job input {key!r}: {path} is not a {'directory' if want == 'dir' else 'file'}",
                       "run the step that prepares it (prepare / eval-setup) first")
    if check_sha256 and spec.get("sha256"):
        got = sha256_file(path)
        if got != spec["sha256"]:
            raise JobError(f"job input {key!r}: {path} has sha256 {got}, expected {spec['sha256']}",
                           "the file changed since it was pinned; fetch it again")
    return path


def dir_sha256set(path: Path) -> tuple[dict[str, str], str]:
    """{relative path: sha256} of every file under ``path`` and its ``sha256set:`` identity (SPEC §4)."""
    files = {f.relative_to(path).as_posix(): sha256_file(f)
             for f in sorted(path.rglob("*")) if f.is_file() and not f.name.startswith(".")}
    return files, sha256set(files)


def quiet_libraries() -> None:
    """stdout is the event channel: keep library chatter (progress bars, warnings) off it and small."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers

        transformers.utils.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - transformers absent or changed: chatter is harmless
        pass


def run_worker(fn: Callable[[dict[str, Any]], object], job_path: str | None = None) -> int:
    """Load the job, run ``fn(job)``, print the final status; return the exit code."""
    return run_step(lambda job, _ctx: _completed(fn, job), job_path=job_path)


def _completed(fn: Callable[[dict[str, Any]], object], job: dict[str, Any]) -> int:
    fn(job)
    protocol.status("completed")
    return 0


def run_step(fn: Callable[[J, WorkerContext], int], *, job_path: str | None = None,
             load: Callable[[Path], J] | None = None, quiet: bool = True) -> int:
    """A worker process from its start to its exit code: stop on SIGTERM, read where things are
    (WorkerContext), load the job (``load``, else the JSON job spec), run ``fn(job, context)``, which
    prints the final status line and returns the exit code. A failure it leaves (bad input, a bug, an
    interrupt) still ends in one status line, never a traceback alone. ``quiet``: keep the ML
    libraries' chatter off stdout first (quiet_libraries)."""
    protocol.stop_on_sigterm()
    try:
        return _run_step(fn, job_path, load, quiet)
    except KeyboardInterrupt:
        # a stop while the libraries or the job load (before fn's own handling): the same one status line,
        # not a traceback of the signal handler in the step's log (the run screen shows that log)
        protocol.status("failed", "interrupted", 130)
        return 130


def _run_step(fn: Callable[[J, WorkerContext], int], job_path: str | None, load: Callable[[Path], J] | None,
              quiet: bool) -> int:
    if quiet:
        quiet_libraries()
    context = WorkerContext.from_environment()
    if job_path is not None:
        context = replace(context, job_path=Path(job_path))
    try:
        job = load(context.job_path) if load is not None else protocol.load_job(context.job_path)
    except (OSError, json.JSONDecodeError) as exc:
        protocol.status("failed", f"cannot read the job spec: {exc}", 2)
        return 2
    except TraceTuiError as exc:  # the worker's own loader: a job spec that is not one
        protocol.status("failed", exc.line(), exc.exit_code)
        return exc.exit_code
    try:
        return fn(job, context)
    except TraceTuiError as exc:  # JobError among them: exit 2, bad input
        protocol.status("failed", exc.line(), exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        protocol.status("failed", "interrupted", 130)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: its traceback goes to the step's log (stderr)
        traceback.print_exc()
        protocol.status("failed", f"internal error: {type(exc).__name__}: {exc} (traceback in the step log)", 1)
        return 1


def run_slices(fn: Callable[[dict[str, Any], dict[str, Any]], Any], job: dict[str, Any]) -> None:
    """A batch job: ``job["batch"]`` holds one per-slice job spec per slice, served in turn by one
    worker that keeps what it loaded (the judge) in ``shared``, passed to every ``fn(slice_job, shared)``.

    Each slice ends with its own status line (the runner receipts and resumes it on its own): a
    slice that fails on bad input is reported and the next one starts; anything else (a bug, an
    out-of-memory judge, an interrupt) ends the worker, and the slices after it stay to do.
    """
    subs = job.get("batch")
    if not isinstance(subs, list) or not subs or not all(isinstance(x, dict) for x in subs):
        raise JobError(f"job field 'batch' must be a non-empty list of per-slice job specs, got {subs!r}",
                       "the runner writes it for a step with keep_loaded")
    shared: dict[str, Any] = {}
    failed: list[str] = []
    for sub in subs:
        where = slice_fields(sub)
        try:
            fn(sub, shared)
        except TraceTuiError as exc:
            protocol.status("failed", exc.line(), exc.exit_code, **where)
            failed.append(f"{where['model']}/{where['seed']}/{where['benchmark']}: {exc.line()}")
            continue
        except KeyboardInterrupt:
            protocol.status("failed", "interrupted", 130, **where)
            raise
        except Exception as exc:  # noqa: BLE001 - reported for the slice, then the worker's own handling
            protocol.status("failed", f"internal error: {type(exc).__name__}: {exc} (traceback in the step log)", 1,
                            **where)
            raise
        protocol.status("completed", **where)
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(subs)} slices failed; first: {failed[0]}")


def described_models(job: dict[str, Any], campaign: Path | None) -> list[Any]:
    """The resolved models (id, label, store_entry, revision, ...) the job is about.

    A whole-step job's spec carries only slice ids (`models` is null for it), so the
    resolved recipe the runner wrote into the campaign (recipe.json) is the fallback.
    """
    models = job.get("models")
    if models:
        return list(models)
    if campaign is not None:
        try:
            resolved = read_campaign_recipe(campaign)
        except TraceTuiError:
            return []
        return list(resolved.get("models") or [])
    return []


def upstream_rows_dir(job: dict[str, Any], path_key: str, *, step: str, upstream: str) -> Path:
    """The ``rows`` folder an earlier step of this recipe wrote (``paths.<path_key>`` or its upstream output)."""
    rel = (job.get("paths") or {}).get(path_key) or (job.get("upstream_outputs") or {}).get(upstream)
    if not rel:
        raise JobError(f"{step} job names no {upstream} output (upstream_outputs.{upstream})",
                       f"the {step} step must follow the {upstream} step in the recipe")
    rows = campaign_dir() / rel / "rows"
    if not rows.is_dir():
        raise JobError(f"{rows} does not exist", f"run the {upstream} step first")
    return rows

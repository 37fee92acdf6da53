"""`trace-tui verify --campaign DIR`: a campaign checked offline (SPEC §3).

Checks (pure over the campaign's files and its state database, read-only):

- completeness: every expected job (each per-slice step x every slice of the
  resolved recipe, and each whole step) is complete with a receipt;
- receipts: each receipt's content hash, and every output's sha256 and size
  against the receipt;
- scores: each recorded score recomputed from the per-row results and equal to
  the record, by ``recompute_score(campaign_dir, receipt_content) -> float`` of
  the step kind's worker (``step.run[0]``). The scoring workers and their
  recomputers are rows of a fixed table (trace_tui.workers.registry): a module
  a receipt names is never imported, an unknown kind is a failed check;
- pinned inputs: the model revisions and generation settings a campaign
  recorded against the release lock (and image ids against the image lock, as
  information: images are not bit-reproducible across machines);
- comparison with published values, as information: TRACE validation inside
  the binomial 95% interval of the published accuracy (n = 2,000); external
  benchmarks within 2 canonical seed standard deviations or 1 point,
  whichever is larger;
- the campaign's own files: campaign.json its identity; recipe.json the
  resolved recipe the runner wrote, its config_sha256 recomputed from its
  content and its models, seeds, benchmarks, settings and slices equal to what
  the state's jobs (whose input hashes the receipts carry) ran with; no FIFO,
  device or link to one anywhere in the campaign (a reader would hang on it or
  read without end), checked before any score is recomputed.

A verdict is information; a broken receipt, a changed output, a score that does
not recompute or a missing slice is a failure (exit 1).
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.campaign_files.shard_files import MERGED_FILE, is_sharded, merged_problem, read_plan, shard_dir
from trace_tui.campaign_files.shards import PLAN_FILE, coverage_problems
from trace_tui.campaign_files.state import (
    MIB,
    STEP_SLICE,
    cut,
    file_kind,
    read_campaign_json,
    read_snapshot,
    slice_path,
    validation_problem,
)
from trace_tui.common.digest import sha256_json
from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.errors import CheckFailed, TraceTuiError, UsageError
from trace_tui.recipe.schema import BenchmarkRef, LocalModel, SliceKey, TrainingTarget, config_data
from trace_tui.release import ModelPin, release_lock
from trace_tui.verify.record import Record, Verification
from trace_tui.verify.workers import ordered_map
from trace_tui.workers import registry

ScoreRecomputer = Callable[[Path, dict[str, Any]], float | None]
SCORE_TOLERANCE = 1e-9
VALIDATION_BENCHMARK = "trace-validation"
IDENTITY_FILE = "campaign.json"
IDENTITY_SCHEMA = "trace-tui-campaign-v1"  # trace_tui.engine.campaign writes it once, when a campaign is created
IDENTITY_ID = re.compile(r"[0-9a-f]{16}")
RECEIPT_LIMIT = 256 * MIB  # a whole-step receipt lists every output of the release evaluator


def recomputer_for(step_kind: str) -> ScoreRecomputer | None:
    """The step kind's ``recompute_score`` (None: not a scoring step of trace-tui). The kind comes from a
    receipt, which a campaign handed over may have written to name any module: it is only looked up in the
    worker registry's fixed table."""
    w = registry.worker(step_kind)
    return w.recompute if w is not None else None


def score_check(kind: str, root: Path, content: dict[str, Any], recorded: float, subject: str,
                read: dict[str, tuple[str, Any]] | None = None) -> Check:
    """A recorded score against the one its step kind's recomputer gets from the receipt ``content``."""
    if recomputer_for(kind) is None:
        return Check(id="score", status="failed", subject=subject,
                     message=f"score {recorded} cannot be recomputed: {str(kind)[:80]!r} is not a scoring step "
                             "of trace-tui")
    try:
        # The score worker's recomputer takes the rows this run already read and hashed (the extract rows):
        # each file is read once, not again to be rescored.
        again = registry.recompute(kind, root, content, read=read)
    except Exception as exc:  # noqa: BLE001 - a broken row file is this check's failure
        return Check(id="score", status="failed", subject=subject,
                     message=f"cannot recompute the score: {type(exc).__name__}: {exc}")
    ok = again is not None and abs(float(again) - float(recorded)) <= SCORE_TOLERANCE
    return Check(id="score", status="passed" if ok else "failed", subject=subject,
                 message="score recomputed from per-row results" if ok
                 else "score does not recompute from per-row results", expected=recorded, actual=again)


def locate(root: Path, rel: Any) -> tuple[Path | None, str]:
    """(``root / rel`` with links resolved, "") when it names a place inside the campaign; else (None, why not)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return None, "is not a path"
    try:
        path = (root / rel).resolve()
    except (RuntimeError, OSError):  # a link loop: RuntimeError up to Python 3.12, OSError after
        return None, "is a symbolic link loop; it was not read"
    if root not in path.parents:
        return None, "is outside the campaign; it was not read"
    return path, ""


def inside(root: Path, rel: Any) -> Path | None:
    """``root / rel`` when it names a file inside the campaign (links resolved), else None."""
    return locate(root, rel)[0]


def _kind_of(path: Path) -> str | None:
    """None for a regular file; else what is there, in words ("absent" when nothing is)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if stat.S_ISREG(mode) else file_kind(mode)


def unsafe_files(root: Path, limit: int = 5) -> tuple[list[tuple[str, str]], int]:
    """([(path in the campaign, what it is)] up to ``limit``, how many in all): the FIFOs, sockets and devices
    in the campaign, and the links to one. trace-tui writes none; a score recomputer that opened one would
    block forever (a FIFO) or read without end (/dev/zero). Links are not followed into folders. Each entry's
    kind comes from its folder listing (no stat call but for links: a full campaign holds 1.6 million files)."""
    found: list[tuple[str, str]] = []
    count = 0
    stack = [str(root)]
    skip = len(str(root)) + 1
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for e in entries:
                try:
                    if e.is_file(follow_symlinks=False):  # first: nearly every entry is one
                        continue
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    if e.is_symlink():
                        try:
                            target = os.stat(e.path).st_mode
                        except (FileNotFoundError, RuntimeError, OSError):
                            continue  # a broken link or a loop: opening it fails at once
                        if stat.S_ISREG(target) or stat.S_ISDIR(target):
                            continue
                        what = f"a link to {file_kind(target)} ({os.readlink(e.path)})"
                    else:
                        what = file_kind(os.lstat(e.path).st_mode)
                except OSError:
                    continue
                count += 1
                if len(found) < limit:
                    found.append((e.path[skip:], what))
    return found, count


Status = Literal["passed", "failed", "absent", "info"]


# Records, as the release's checklist (trace_tui.verify.record): one result model for every verification.
class Check(Record):
    __slots__ = ("id", "status", "subject", "message", "expected", "actual")
    _defaults = {"expected": None, "actual": None}
    id: str  # complete | receipt | output | score | pin | image | recipe | campaign
    status: Status
    subject: str  # the job (step slice) or file it is about
    message: str
    expected: object
    actual: object


class Comparison(Record):
    __slots__ = ("step", "model", "seed", "benchmark", "score", "published", "difference", "tolerance", "rule",
                 "verdict")
    step: str
    model: str
    seed: int | None
    benchmark: str
    score: float
    published: float
    difference: float
    tolerance: float
    rule: str
    verdict: Literal["within", "outside"]


class CampaignVerification(Verification):
    __slots__ = ("campaign", "recipe", "run_tag", "checks", "comparisons", "published_source")
    _defaults = {"recipe": None, "run_tag": None, "checks": list, "comparisons": list, "published_source": None}
    campaign: str
    recipe: str | None
    run_tag: str | None
    checks: list[Check]
    comparisons: list[Comparison]
    published_source: str | None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.checks:
            out[c.status] = out.get(c.status, 0) + 1
        return out


# --------------------------------------------------------------------------- published values


def load_published(release_dir: Path, lock: Any = None) -> dict[tuple[str, int | None, str], tuple[float, float]]:
    """{(model, seed, benchmark): (published score, tolerance)} from a release copy's results files.

    External benchmarks: tolerance max(2 x sample std over the canonical seeds, 1 point).
    TRACE validation (seed None, benchmark "trace-validation"): the binomial 95% half-width.
    """
    if lock is None:
        lock = release_lock()
    out: dict[tuple[str, int | None, str], tuple[float, float]] = {}
    eval_path = release_dir / lock.trace_eval.results_path
    if eval_path.is_file():
        data = json.loads(eval_path.read_text(encoding="utf-8"))
        by_mb: dict[tuple[str, str], list[float]] = {}
        rows = data["scores"]["benchmark_scores"]
        for r in rows:
            by_mb.setdefault((r["model_id"], r["benchmark_id"]), []).append(float(r["score"]))
        for r in rows:
            vals = by_mb[(r["model_id"], r["benchmark_id"])]
            sd = _sample_std(vals)
            out[(r["model_id"], int(r["seed"]), r["benchmark_id"])] = (float(r["score"]), max(2 * sd, 1.0))
    val_path = release_dir / lock.trace_validation.results_path
    if val_path.is_file():
        data = json.loads(val_path.read_text(encoding="utf-8"))
        n = int(data.get("evaluation", {}).get("rows_per_model") or lock.trace_validation.rows)
        for r in data["results"]:
            p = float(r["score"]) / 100.0
            half = 1.96 * math.sqrt(max(p * (1 - p), 0.0) / n) * 100.0
            out[(r["model_id"], None, VALIDATION_BENCHMARK)] = (float(r["score"]), half)
    return out


def _sample_std(vals: list[float]) -> float:
    if len(vals) < 2:
        return 0.0
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))


def compare(step: str, model: str, seed: int | None, benchmark: str, score: float,
            published: dict[tuple[str, int | None, str], tuple[float, float]]) -> Comparison | None:
    key = (model, None, benchmark) if benchmark == VALIDATION_BENCHMARK else (model, seed, benchmark)
    if key not in published:
        return None
    value, tol = published[key]
    diff = score - value
    rule = ("binomial 95% interval (n = 2,000)" if benchmark == VALIDATION_BENCHMARK
            else "max(2 x canonical seed std, 1 point)")
    return Comparison(step=step, model=model, seed=seed, benchmark=benchmark, score=float(score),
                      published=float(value), difference=float(diff), tolerance=float(tol), rule=rule,
                      verdict="within" if abs(diff) <= tol + 1e-12 else "outside")


# --------------------------------------------------------------------------- the checks


def _is_self_verify(run: list[str]) -> bool:
    # The recipe's own `trace-tui verify --campaign` step runs while it is being judged.
    return bool(run) and run[0] == "trace_tui" and "verify" in run[1:]


def _resolved_recipe(root: Path, add: Callable[[Check], None]) -> dict[str, Any] | None:
    """The campaign's resolved recipe; None, with the completeness check failed on recipe.json, when unreadable."""
    try:
        return read_campaign_recipe(root)
    except TraceTuiError as exc:
        add(Check(id="complete", status="failed", subject=RECIPE_FILE, message=exc.line()))
        return None


# --------------------------------------------------------------------------- the campaign's own files


def _identity_check(root: Path) -> Check:
    """campaign.json: the identity the engine writes once, when it creates the campaign."""
    path = root / IDENTITY_FILE

    def failed(message: str) -> Check:
        return Check(id="campaign", status="failed", subject=IDENTITY_FILE, message=message)

    try:
        data = read_campaign_json(path, limit=MIB)
    except FileNotFoundError:
        return failed("missing (trace-tui writes it when it creates a campaign)")
    except CheckFailed as exc:
        return failed(exc.message)
    if not isinstance(data, dict):
        return failed(f"not a campaign identity (a JSON {type(data).__name__} at the top level)")
    if data.get("schema") != IDENTITY_SCHEMA:
        return failed(f"schema = {cut(data.get('schema'))}, not {IDENTITY_SCHEMA!r}")
    if not isinstance(data.get("id"), str) or not IDENTITY_ID.fullmatch(data["id"]):
        return failed(f"id = {cut(data.get('id'))}, not a campaign id (16 hex digits)")
    when = data.get("created_at")
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when) or when <= 0:
        return failed(f"created_at = {cut(when)}, not a time")
    return Check(id="campaign", status="passed", subject=IDENTITY_FILE, message=f"campaign {data['id']}")


class _StepInFile(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    stage: str
    image: str | None = None
    run: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    per_slice: bool = False


class _SelectionInFile(BaseModel):
    model_config = ConfigDict(extra="allow")

    suite: str | None = None


class _RecipeInFile(BaseModel):
    """recipe.json's ``recipe``: typed where the checks and config_data read it, the rest as written (a campaign
    of an older trace-tui holds a recipe that today's recipe schema may word differently)."""

    model_config = ConfigDict(extra="allow")

    name: str
    image_flavor: str = "gpu"
    selection: _SelectionInFile = Field(default_factory=_SelectionInFile)
    steps: list[_StepInFile] = Field(min_length=1)


def _recipe_file_model() -> type[BaseModel]:
    """recipe.json as the runner writes it (a ResolvedRecipe dumped as JSON): every field present and typed."""
    class RecipeFile(BaseModel):
        model_config = ConfigDict(extra="forbid")

        recipe: _RecipeInFile
        suite: str | None
        suite_sha256: str | None = None
        models: list[dict[str, Any]]
        seeds: list[StrictInt]
        benchmarks: list[BenchmarkRef]
        settings: dict[str, Any]
        slices: list[SliceKey]
        rows_total: StrictInt
        training: TrainingTarget | None = None
        store_entries: dict[str, list[str]] = Field(default_factory=dict)
        config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
        run_tag: str

    return RecipeFile


def _model_objects(models: list[Any]) -> list[Any]:
    """recipe.json's models as the objects the resolver made: a local model (it names a store entry) or a
    release model pin. Raises ValueError naming the model that is neither."""
    out = []
    for i, m in enumerate(models):
        if not isinstance(m, dict):
            raise ValueError(f"models[{i}] = {cut(m)}: not an object")
        try:
            out.append((LocalModel if "store_entry" in m else ModelPin).model_validate(m))
        except ValidationError as exc:
            raise ValueError(f"models[{i}].{validation_problem(exc)}") from None
    return out


def recipe_checks(data: dict[str, Any], meta: dict[str, Any]) -> tuple[Any, list[Check]]:
    """(the resolved recipe, checks) for recipe.json's content: every field the runner writes present and
    typed, config_sha256 recomputed from the content (as trace_tui.recipe.catalog.resolve_recipe computes it),
    slices and rows derived from it, and config_sha256, run tag and recipe name equal to what the state
    database recorded for the run (``meta``). The resolved recipe is None when the file is not one (then
    nothing else about it can be checked)."""
    def failed(field: str, message: str, expected: Any = None, actual: Any = None) -> Check:
        return Check(id="recipe", status="failed", subject=f"{RECIPE_FILE} {field}".strip(), message=message,
                     expected=expected, actual=actual)

    try:
        resolved: Any = _recipe_file_model().model_validate(data)
        models = _model_objects(resolved.models)
    except ValidationError as exc:
        return None, [failed("", f"not a resolved recipe: {validation_problem(exc)}")]
    except ValueError as exc:
        return None, [failed("models", f"not a resolved recipe: {exc}")]
    checks: list[Check] = []
    # config_data reads the recipe's name, image flavour and steps: what _RecipeInFile types
    sha = sha256_json(config_data(resolved.recipe, resolved.suite, resolved.suite_sha256, models, resolved.seeds,
                                  resolved.benchmarks, resolved.settings, resolved.training,
                                  resolved.store_entries))
    if sha != resolved.config_sha256:
        checks.append(failed("config_sha256", "does not recompute from the recipe's content (a field was edited)",
                             expected=resolved.config_sha256, actual=sha))
    product = ([f"{m.id}/{s}/{b.key}" for m in models for s in resolved.seeds for b in resolved.benchmarks]
               if resolved.recipe.selection.suite is not None else [])
    if [x.id for x in resolved.slices] != product:
        checks.append(failed("slices", "are not its models x seeds x benchmarks", expected=len(product),
                             actual=len(resolved.slices)))
    rows = {b.key: b.rows for b in resolved.benchmarks}
    total = sum(rows.get(x.benchmark, 0) for x in resolved.slices)
    if resolved.rows_total != total:
        checks.append(failed("rows_total", "is not the rows of its slices", expected=total,
                             actual=resolved.rows_total))
    for field, value in (("config_sha256", resolved.config_sha256), ("run_tag", resolved.run_tag),
                         ("recipe", resolved.recipe.name)):
        recorded = meta.get(field)
        if recorded is not None and recorded != value:
            checks.append(failed("recipe.name" if field == "recipe" else field,
                                 "differs from the campaign state's record of its run",
                                 expected=recorded, actual=value))
    if not checks:
        checks.append(Check(id="recipe", status="passed", subject=RECIPE_FILE,
                            message="config_sha256 recomputes from its content"))
    return resolved, checks


def recipe_against_state(resolved: Any, jobs: list[Any], subs: list[Any]) -> list[Check]:
    """recipe.json against what the campaign ran: each job's pinned inputs (their hash is the one the receipts
    carry) name its models, seeds, benchmarks, settings and steps, and its slices are recipe.json's. One
    failed check per field, with the first job that disagrees."""
    models = {m.get("id"): m for m in resolved.models}
    benches = {b.key: b.model_dump(mode="json") for b in resolved.benchmarks}
    slice_ids = {x.id for x in resolved.slices}
    seeds = set(resolved.seeds)
    settings_sha = sha256_json(resolved.settings)
    recipe_steps = {s.id: {"id": s.id, "run": list(s.run), "stage": s.stage} for s in resolved.recipe.steps}
    first: dict[str, tuple[str, Any, Any]] = {}

    def note(field: str, message: str, expected: Any = None, actual: Any = None) -> None:
        first.setdefault(field, (message, expected, actual))

    for j in [*jobs, *subs]:  # the expected ones: a step an earlier run of an edited recipe had is not one
        where = f"{j.step} {j.slice}"
        inputs = j.inputs if isinstance(j.inputs, dict) else {}
        if sha256_json(j.inputs) != j.input_hash:
            note("state", f"{where}: its recorded inputs do not hash to its input hash (the receipts' key)",
                 expected=j.input_hash, actual=sha256_json(j.inputs))
        step = recipe_steps.get(j.step)
        if step is None:
            note("recipe.steps", f"{where}: step {cut(j.step)} ran in this campaign but is not in it")
        elif "step" in inputs and inputs["step"] != step:
            note("recipe.steps", f"{where}: ran as another step than the recipe's", expected=step,
                 actual=inputs["step"])
        if "settings_sha256" in inputs and inputs["settings_sha256"] != settings_sha:
            note("settings", f"{where}: ran with other settings", expected=inputs["settings_sha256"],
                 actual=settings_sha)
        if j.slice != STEP_SLICE:
            if j.slice not in slice_ids:
                note("slices", f"{where}: the campaign ran this slice, which is not in it")
            if "model" in inputs and inputs["model"] != models.get(j.model):
                note("models", f"{where}: ran model {cut(j.model)} as the recipe does not list it",
                     expected=inputs["model"], actual=models.get(j.model))
            if "benchmark" in inputs and inputs["benchmark"] != benches.get(j.benchmark):
                note("benchmarks", f"{where}: ran benchmark {cut(j.benchmark)} as the recipe does not list it",
                     expected=inputs["benchmark"], actual=benches.get(j.benchmark))
            if "seed" in inputs and inputs["seed"] not in seeds:
                note("seeds", f"{where}: ran seed {cut(inputs['seed'])}, which is not in it")
        else:
            want_models = sorted(models.values(), key=lambda m: str(m.get("id")))
            if "models" in inputs and inputs["models"] != want_models:
                note("models", f"{where}: ran other models",
                     expected=[m.get("id") if isinstance(m, dict) else m for m in
                               (inputs["models"] if isinstance(inputs["models"], list) else [inputs["models"]])],
                     actual=[m.get("id") for m in want_models])
            want_seeds = sorted({x.seed for x in resolved.slices})
            if "seeds" in inputs and inputs["seeds"] != want_seeds:
                note("seeds", f"{where}: ran other seeds", expected=inputs["seeds"], actual=want_seeds)
            if "benchmarks" in inputs and inputs["benchmarks"] != sorted(benches):
                note("benchmarks", f"{where}: ran other benchmarks", expected=inputs["benchmarks"],
                     actual=sorted(benches))
    if not first:
        return [Check(id="recipe", status="passed", subject=RECIPE_FILE,
                      message="its models, seeds, benchmarks, settings and slices are what the campaign ran")]
    return [Check(id="recipe", status="failed", subject=f"{RECIPE_FILE} {field}",
                  message=f"disagrees with the campaign's jobs: {message}", expected=expected, actual=actual)
            for field, (message, expected, actual) in first.items()]


# --------------------------------------------------------------------------- a job's outputs and rows

# The workers whose outputs hold one file per row (OUTPUT_DIR/rows/NNNNNN.json: their row_kind in
# trace_tui.workers.registry), and what each row proves:
# a generate row the sha256 of its own response; an extract row the response_sha256 of the generate row of the
# same name in the step before it (trace_tui.stages.extract reads that step's rows). The score worker's rows
# are tied by its recomputer (score.json names the extract rows and their sha256).
ROW_LIMIT = 1 << 20  # a row file larger than this is hashed but not parsed (no worker writes one)
ROW_FAILURES_SHOWN = 10  # per job and kind of problem: the rest are counted in one more line
PARALLEL_ROWS = 20_000  # from this many rows a campaign's jobs are checked in a process per core
PARTS_PER_WORKER = 8  # runs of slices per process: one slow run does not leave the other processes idle


def _row_worker(step: dict[str, Any]) -> str | None:
    run = step.get("run") or []
    return registry.row_kind(run[0]) if run else None


def _bad_relpath(rel: Any) -> str | None:
    """Why ``rel`` cannot name a file inside the campaign (checked before anything is opened), else None."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return "is not a path"
    if rel.startswith("/") or (".." in rel and ".." in rel.split("/")):
        return "is outside the campaign; it was not read"
    return None


def _files_under(root: Path, rel: str) -> list[str]:
    """Every non-folder under ``root/rel`` (links not followed), campaign-relative, leaving out the temporaries
    of an atomic write that did not finish (as the engine's receipts do)."""
    out: list[str] = []
    stack = [rel]
    while stack:
        here = stack.pop()
        try:
            entries = os.scandir(root / here)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            out.append(here)  # a folder that cannot be listed: named, as a file the receipt does not list
            continue
        with entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    stack.append(f"{here}/{e.name}")
                elif not (e.name.startswith(".") and e.name.endswith(".tmp")):
                    out.append(f"{here}/{e.name}")
    return out


_ROW_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def _read_row_file(path: str, keep: int) -> tuple[str, int, bytes | None] | None:
    """common.safe_read.Folder.sha256_size for a row file whose folder is known to lie inside the campaign, in
    four system calls (open without following a link, fstat, read, close): a full campaign has 1.6 million of
    them. None when absent; a link (ELOOP) raises _Link, for the careful reader to take; NotRead otherwise. Used
    only when the campaign holds no FIFO or device (unsafe_files walked it first): a FIFO's open with O_NONBLOCK
    returns at once anyway, and the fstat refuses it unread."""
    try:
        fd = os.open(path, _ROW_OPEN)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Link from None
        raise NotRead(f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRead(f"not a regular file ({file_kind(st.st_mode)}); not read")
        ask = max(st.st_size + 1, 1 << 16)
        chunk = os.read(fd, ask)
        size = len(chunk)
        if size < ask:  # a regular file's short read is its end: no second read to learn it (every row file)
            return hashlib.sha256(chunk).hexdigest(), size, chunk if size <= keep else None
        h = hashlib.sha256(chunk)
        parts = [chunk] if size <= keep else []
        while True:
            chunk = os.read(fd, 1 << 20)
            h.update(chunk)
            size += len(chunk)
            if size <= keep:
                parts.append(chunk)
            if len(chunk) < 1 << 20:
                break
        return h.hexdigest(), size, b"".join(parts) if size <= keep else None
    except OSError as exc:
        raise NotRead(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


_scan_json = json.JSONDecoder().scan_once
_json_space = json.decoder.WHITESPACE.match  # what json.loads allows after the value


def _json_value(text: str) -> Any:
    """json.loads(text): a row file as the workers write it (its object, a newline) straight from the JSON scanner,
    without json.loads's steps around it; anything else by json.loads, which raises as it does."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)  # not a value where it starts (space before it): json.loads says why
    if end != len(text) and _json_space(text, end).end() != len(text):
        return json.loads(text)  # more after the value: json.loads's "Extra data"
    return value


class _Link(Exception):
    """A row file that is a link: read the careful way (common.safe_read), which follows it only inside."""


class _OutputChecks:
    """One job's outputs against its receipt: each listed file read once (inside the campaign, a regular file),
    its sha256 and size compared; a receipt that lists nothing, and files in the job's output folder that it
    does not list, fail; a row worker's rows are parsed as they are read, and prove their own hashes."""

    def __init__(self, root: Path, folder: Any, job: Any, step: dict[str, Any],
                 add: Callable[[Check], None], fast: bool = False) -> None:
        self.root, self.folder, self.job, self.step, self.add = root, folder, job, step, add
        self.top = f"{root}/"
        self.fast = fast  # no FIFO or device in the campaign (unsafe_files): row files may be read the quick way
        self.fast_rows = False
        self.subject = f"{job.step} {job.slice}"
        self.out_rel = f"outputs/{job.step}/{slice_path(job.slice)}"
        self.worker = _row_worker(step)
        self.rows: dict[str, str | None] | None = {} if self.worker else None  # row file name -> response_sha256
        self.unproven: set[str] = set()  # row files that failed their own checks: not compared again
        self.parsed: dict[str, tuple[str, Any]] = {}  # row file -> (sha256, the row): the next step's recomputer's
        self.bad = 0
        self.unread = False
        self._shown: dict[str, int] = {}

    def fail(self, kind: str, subject: str, message: str, **extra: Any) -> None:
        self.bad += 1
        n = self._shown[kind] = self._shown.get(kind, 0) + 1
        if n <= ROW_FAILURES_SHOWN:
            self.add(Check(id="output", status="failed", subject=subject, message=message, **extra))

    def check(self, listed: dict[str, Any]) -> None:
        rows_at = f"{self.out_rel}/rows/"
        # Row files the quick way only in a campaign without FIFOs or devices, and whose rows folder has no link on
        # its way (its real path is where it is): then a file there is inside the campaign unless it is a link.
        self.fast_rows = self.fast and os.path.realpath(self.top + rows_at) == f"{self.root}/{rows_at}".rstrip("/")
        for rel, want in sorted(listed.items()):
            want = want if isinstance(want, dict) else {}
            why = _bad_relpath(rel)
            if why is not None:
                self.fail("path", str(rel)[:200], f"output path {why}")
                self.unread = True
                continue
            name = rel[len(rows_at):] if self.worker and rel.startswith(rows_at) else ""
            is_row = name.endswith(".json") and "/" not in name
            try:
                got = None
                if is_row and self.fast_rows:
                    try:
                        got = _read_row_file(self.top + rel, ROW_LIMIT)
                    except _Link:
                        got = self.folder.sha256_size(rel, keep=ROW_LIMIT)
                else:
                    got = self.folder.sha256_size(rel, keep=ROW_LIMIT if is_row else 0)
            except NotRead as exc:
                reason = ("is a symbolic link loop; it was not read" if "symbolic links" in exc.reason
                          else f"is {exc.reason}" if exc.reason.startswith(("a ", "not ")) else exc.reason)
                self.fail("unread", rel, f"output {reason}", expected=want.get("sha256"))
                self.unread = True
                self.unproven.add(name)
                continue
            if got is None:
                self.fail("missing", rel, "output missing", expected=want.get("sha256"))
                self.unproven.add(name)
                continue
            digest, size, data = got
            if digest != want.get("sha256") or size != want.get("bytes", size):
                self.fail("differs", rel, "output differs from its receipt", expected=want.get("sha256"),
                          actual=digest)
                self.unproven.add(name)
            elif is_row and data is not None:
                self._row(rel, name, data, digest)
        if self._shown.get("differs", 0) + self._shown.get("missing", 0) > ROW_FAILURES_SHOWN:
            more = self._shown.get("differs", 0) + self._shown.get("missing", 0) - ROW_FAILURES_SHOWN
            self.add(Check(id="output", status="failed", subject=self.subject, message=f"{more} more outputs "
                           "missing or different from the receipt"))
        if not listed and (self.step.get("run") or [""])[0] != "trace_tui":
            # Every worker of trace-tui writes at least one file (a `trace-tui report/verify` step may not).
            self.fail("empty", self.subject, "its receipt lists no outputs (every stage worker writes some)")
        unlisted = sorted(x for x in _files_under(self.root, self.out_rel) if x not in listed)
        for rel in unlisted[:ROW_FAILURES_SHOWN]:
            self.fail("unlisted", rel, "in the job's output folder but not in its receipt")
        if len(unlisted) > ROW_FAILURES_SHOWN:
            self.add(Check(id="output", status="failed", subject=self.subject,
                           message=f"{len(unlisted) - ROW_FAILURES_SHOWN} more files in its output folder that its "
                                   "receipt does not list"))

    def _row(self, rel: str, name: str, data: bytes, digest: str) -> None:
        try:
            row = _json_value(data.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            row = None
        said = row.get("response_sha256") if isinstance(row, dict) else None
        if not isinstance(said, str):
            self.fail("row", rel, "not a row: no response_sha256")
            self.unproven.add(name)
            return
        if self.worker == "generate":
            response = row.get("response")
            try:  # common.digest.response_sha256, inline: this runs once per row of the campaign
                again = hashlib.sha256(response.encode("utf-8")).hexdigest() if isinstance(response, str) else None
            except UnicodeEncodeError:  # a lone surrogate (a forged \\ud800 escape): no model wrote it
                again = None
            if again != said:
                self.fail("row", rel, "row's response_sha256 is not the sha256 of its response",
                          expected=said, actual=again)
                self.unproven.add(name)
                return
        assert self.rows is not None
        self.rows[name] = said
        if self.worker == "extract":  # what the score after it reads: handed over, not read again
            self.parsed[rel] = (digest, row)


def row_ties(job: Any, step: dict[str, Any], steps: list[dict[str, Any]], outs: _OutputChecks,
             row_records: dict[tuple[str, str], _OutputChecks]) -> list[Check]:
    """An extract job's rows against the generate rows of the step before it, same slice: the same rows, and
    each extract row's response_sha256 that of its generate row. (The generate job's record is dropped here:
    each is read by the one job after it.)"""
    rows = outs.rows
    if _row_worker(step) != "extract" or rows is None:
        return []
    subject = f"{job.step} {job.slice}"
    at = next((i for i, s in enumerate(steps) if s.get("id") == job.step), 0)
    prev = steps[at - 1] if at > 0 else None
    if prev is None or _row_worker(prev) != "generate":
        return [Check(id="output", status="failed", subject=subject,
                      message="extract rows with no generate step before them to come from")]
    above = row_records.pop((prev["id"], job.slice if prev.get("per_slice") else STEP_SLICE), None)
    if above is None or above.rows is None:
        return [Check(id="output", status="failed", subject=subject,
                      message=f"its rows cannot be tied to step {prev['id']}'s: those were not read (see its checks)")]
    out: list[Check] = []
    upstream = above.rows
    skip = outs.unproven | above.unproven  # each already failed its own check
    missing = sorted(upstream.keys() - rows.keys() - skip)
    extra = sorted(rows.keys() - upstream.keys() - skip)
    differ = sorted(n for n in rows.keys() & upstream.keys() if rows[n] != upstream[n])
    for what, names in (("generate rows without their extract row", missing),
                        ("extract rows without a generate row", extra),
                        ("extract rows whose response_sha256 is not their generate row's", differ)):
        if names:
            out.append(Check(id="output", status="failed", subject=subject,
                             message=f"{len(names)} {what} in step {prev['id']}: {', '.join(names[:5])}"
                                     + (" …" if len(names) > 5 else "")))
    return out


# --------------------------------------------------------------------------- a campaign


class _JobWalk:
    """Each job's checks (completeness, receipt, outputs, score, pinned inputs) in the order verify_campaign walks
    them. What it holds from one job to the next is one slice's (the rows a row job read, for the job after it), so
    runs of whole slices can be checked apart, in worker processes, and their checks put back in order."""

    def __init__(self, root: Path, recipe_steps: dict[str, Any], recipe_order: list[dict[str, Any]],
                 by_step_kind: dict[str, str], unsafe_count: int, published: Any, lock: Any) -> None:
        self.root, self.recipe_steps, self.recipe_order = root, recipe_steps, recipe_order
        self.by_step_kind, self.unsafe_count, self.published, self.lock = by_step_kind, unsafe_count, published, lock
        self.folder = Folder(root, name="the campaign")
        self.position = {s["id"]: i for i, s in enumerate(recipe_order)}

    def workers(self, ordered: list[Any], asked: int | None) -> int:
        """The processes to check ``ordered`` in (``asked`` None: the machine's cores when the rows are many enough
        to be worth starting them)."""
        if asked is not None:
            return max(1, asked)
        rows = sum(j.done or 0 for j in ordered if _row_worker(self.recipe_steps.get(j.step, {})))
        return (os.cpu_count() or 1) if rows >= PARALLEL_ROWS else 1

    def parts(self, ordered: list[Any], workers: int) -> list[list[Any]]:
        """``ordered`` cut into runs of whole slices, about even in rows, for ``workers`` processes. One run when a
        row step covers the whole step: its rows are tied to the next step's across slices."""
        whole_row_step = any(_row_worker(s) and not s.get("per_slice") for s in self.recipe_steps.values())
        if workers <= 1 or whole_row_step or not ordered:
            return [ordered]
        target = max(1, sum((j.done or 0) + 1 for j in ordered) // (workers * PARTS_PER_WORKER))
        out: list[list[Any]] = [[]]
        weight = 0
        for j in ordered:
            if weight >= target and out[-1][-1].slice != j.slice:
                out.append([])
                weight = 0
            out[-1].append(j)
            weight += (j.done or 0) + 1
        return out

    def run(self, jobs: list[Any]) -> tuple[list[Check], list[Comparison]]:
        """The checks of ``jobs`` (whole slices, in order) and their comparisons with published values."""
        checks: list[Check] = []
        comparisons: list[Comparison] = []
        row_records: dict[tuple[str, str], _OutputChecks] = {}  # a row worker's job -> its rows, until the next step's
        last_parsed: dict[str, dict[str, tuple[str, Any]]] = {}  # slice -> the rows its last row job wrote, parsed
        for j in jobs:
            self._job(j, checks.append, comparisons, row_records, last_parsed)
        return checks, comparisons

    def _job(self, j: Any, add: Callable[[Check], None], comparisons: list[Comparison],
             row_records: dict[tuple[str, str], _OutputChecks],
             last_parsed: dict[str, dict[str, tuple[str, Any]]]) -> None:
        root, recipe_steps, recipe_order = self.root, self.recipe_steps, self.recipe_order
        by_step_kind, unsafe_count, published, lock = self.by_step_kind, self.unsafe_count, self.published, self.lock
        unsafe = unsafe_count > 0
        folder = self.folder
        subject = f"{j.step} {j.slice}"
        step = recipe_steps.get(j.step, {})
        if _is_self_verify(step.get("run", [])):
            return
        receipt_path, why = locate(root, j.receipt) if j.receipt else (None, "")
        if j.receipt and receipt_path is None:
            add(Check(id="receipt", status="failed", subject=subject,
                      message=f"receipt path {cut(j.receipt)} {why}"))
            return
        if j.state != "completed" or receipt_path is None:
            add(Check(id="complete", status="failed", subject=subject,
                      message=f"not complete ({j.state}, {j.done}/{j.total} rows)"))
            return
        if not os.path.lexists(receipt_path):
            add(Check(id="complete", status="failed", subject=subject, message=f"receipt {j.receipt} is missing"))
            return
        add(Check(id="complete", status="passed", subject=subject, message=f"complete ({j.done} rows)"))

        # 2. receipts: the receipt's own hash, then every output
        try:
            receipt = read_campaign_json(receipt_path, limit=RECEIPT_LIMIT)
            if not isinstance(receipt, dict):
                raise ValueError(f"a JSON {type(receipt).__name__}, not a receipt")
            content = receipt["content"]
            if not isinstance(content, dict) or not isinstance(content.get("outputs", {}), dict):
                raise ValueError("its content is not an object with outputs")
        except CheckFailed as exc:
            add(Check(id="receipt", status="failed", subject=j.receipt, message=f"unreadable receipt: {exc.message}"))
            return
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            add(Check(id="receipt", status="failed", subject=j.receipt, message=f"unreadable receipt: {exc}"))
            return
        if sha256_json(content) != receipt.get("content_sha256"):
            add(Check(id="receipt", status="failed", subject=j.receipt, message="receipt content was altered",
                      expected=receipt.get("content_sha256"), actual=sha256_json(content)))
        elif content.get("input_hash") != j.input_hash:
            add(Check(id="receipt", status="failed", subject=j.receipt,
                      message="receipt is for other pinned inputs than the campaign state",
                      expected=j.input_hash, actual=content.get("input_hash")))
        else:
            add(Check(id="receipt", status="passed", subject=j.receipt, message="receipt intact"))
        outs = _OutputChecks(root, folder, j, step, add, fast=not unsafe_count)
        outs.check(content.get("outputs", {}))
        rows_read = last_parsed.pop(j.slice, None)  # the rows the job before it on this slice wrote, as read
        if outs.parsed:
            last_parsed[j.slice] = outs.parsed
        unread = outs.unread
        if outs.worker == "generate":  # held for the extract job after it on this slice, which pops it
            row_records[(j.step, j.slice)] = outs
        ties = row_ties(j, step, recipe_order, outs, row_records)
        for check in ties:
            add(check)
        if not outs.bad and not any(c.status == "failed" for c in ties):
            add(Check(id="output", status="passed", subject=subject,
                      message=f"{len(content.get('outputs', {}))} output(s) match their sha256"
                              + (f"; {len(outs.rows)} rows prove themselves and their upstream rows"
                                 if outs.rows is not None else "")))

        # 3. scores recomputed from per-row results (never from a file outside the campaign, a FIFO or a device)
        recorded = content.get("score")
        slice_records = content.get("slices") if isinstance(content.get("slices"), dict) else {}
        sub_scores = {name: sub for name, sub in sorted(slice_records.items())
                      if isinstance(sub, dict) and sub.get("score") is not None}
        not_numbers = [(subject, recorded)] if recorded is not None and not _is_number(recorded) else []
        not_numbers += [(f"{j.step} {name}", sub["score"]) for name, sub in sub_scores.items()
                        if not _is_number(sub["score"])]
        for where, value in not_numbers:
            add(Check(id="score", status="failed", subject=where, message=f"score {cut(value)} is not a number"))
        if not_numbers:
            recorded, sub_scores = None, {}
        if (unread or unsafe) and (recorded is not None or sub_scores):
            add(Check(id="score", status="failed", subject=subject,
                      message="not recomputed: " + ("the campaign holds FIFOs or devices (see the output checks)"
                                                    if unsafe else "an output was not read")))
            recorded, sub_scores = None, {}
        if recorded is not None:
            kind = content.get("kind") or by_step_kind.get(j.step, "")
            if j.score is not None and abs(j.score - recorded) > SCORE_TOLERANCE:
                add(Check(id="score", status="failed", subject=subject,
                          message="campaign state and receipt disagree on the score", expected=recorded,
                          actual=j.score))
            add(score_check(kind, root, content, recorded, subject, read=rows_read))
            if published and j.model is not None and j.benchmark is not None:
                cmp_ = compare(j.step, j.model, j.seed, j.benchmark, float(recorded), published)
                if cmp_ is not None:
                    comparisons.append(cmp_)

        for name, sub in sub_scores.items():
            kind = content.get("kind") or by_step_kind.get(j.step, "")
            # the whole-step job's recomputer is asked about one slice
            add(score_check(kind, root, {**content, "slice": name, "model": sub.get("model"), "seed": sub.get("seed"),
                                         "benchmark": sub.get("benchmark")}, sub["score"], f"{j.step} {name}"))
            if published and sub.get("model") is not None:
                cmp_ = compare(j.step, sub["model"], sub.get("seed"), sub["benchmark"], float(sub["score"]), published)
                if cmp_ is not None:
                    comparisons.append(cmp_)

        # 4. pinned inputs against the release lock
        for check in _pin_checks(subject, j.inputs, lock):
            add(check)


def verify_campaign(campaign_dir: Path | str, *, lock: Any = None,
                    published: dict[tuple[str, int | None, str], tuple[float, float]] | None = None,
                    published_source: str | None = None, workers: int | None = None) -> CampaignVerification:
    """The campaign's checks; its jobs' in ``workers`` processes (None: the machine's cores for a campaign of many
    rows), with the same result as in one."""
    root = Path(campaign_dir).resolve()
    if not root.is_dir():
        raise UsageError(f"--campaign {campaign_dir}: no such directory")
    if is_sharded(root) and not os.path.lexists(root / "state.sqlite"):
        return verify_sharded(root, lock=lock, published=published, published_source=published_source,
                              workers=workers)
    meta, steps, jobs, subs = read_snapshot(root)
    res = CampaignVerification(campaign=str(root), recipe=meta.get("recipe"), run_tag=meta.get("run_tag"),
                               published_source=published_source)
    add = res.checks.append
    add(_identity_check(root))
    data = _resolved_recipe(root, add)
    if data is None:
        return res
    typed, checks = recipe_checks(data, meta)
    res.checks.extend(checks)
    if typed is None:
        return res
    res.checks.extend(recipe_against_state(typed, jobs, subs))
    resolved = typed.model_dump(mode="json")
    recipe_steps = {s["id"]: s for s in resolved.get("recipe", {}).get("steps", [])}
    # Before a score recomputer opens per-row files (which its receipt need not list): nothing in the campaign
    # may block a read (a FIFO) or never end one (a device).
    unsafe, unsafe_count = unsafe_files(root)
    for rel, what in unsafe:
        add(Check(id="output", status="failed", subject=rel,
                  message=f"{what}, not a file (trace-tui writes none into a campaign); no score was recomputed"))
    if unsafe_count > len(unsafe):
        add(Check(id="output", status="failed", subject=f"{unsafe_count - len(unsafe)} more",
                  message="FIFOs, devices or links to one in the campaign"))

    # 1. completeness: the database's expected jobs cover the resolved recipe, and each is complete
    have = {(j.step, j.slice) for j in jobs}
    slices = [f"{s['model']}/{s['seed']}/{s['benchmark']}" for s in resolved.get("slices", [])]
    for sid, step in recipe_steps.items():
        for name in (slices if step.get("per_slice") else [STEP_SLICE]):
            if (sid, name) not in have:
                add(Check(id="complete", status="failed", subject=f"{sid} {name}",
                          message="expected by the recipe but never planned in this campaign"))
    have_subs = {(x.step, x.slice) for x in subs}
    for sid, step in recipe_steps.items():
        if not step.get("per_slice") and step.get("stage") in ("infer", "score") and slices:
            missing = [n for n in slices if (sid, n) not in have_subs]
            for name in missing:
                add(Check(id="complete", status="failed", subject=f"{sid} {name}",
                          message="slice expected by the recipe but never planned in this campaign"))
    for x in subs:
        if x.state != "completed":
            add(Check(id="complete", status="failed", subject=f"{x.step} {x.slice}",
                      message=f"slice not complete ({x.state}, {x.done}/{x.total} rows)"))
    by_step_kind = {s["step"]: s["kind"] for s in steps}
    recipe_order = list(resolved.get("recipe", {}).get("steps", []))
    walk = _JobWalk(root, recipe_steps, recipe_order, by_step_kind, unsafe_count, published, lock)
    # Slice by slice, each slice's steps in order: a generate job's rows are held only until its extract job's.
    ordered = sorted(jobs, key=lambda j: (j.slice, walk.position.get(j.step, len(walk.position))))
    workers = walk.workers(ordered, workers)
    for checks, comparisons in ordered_map(walk.run, walk.parts(ordered, workers), workers):
        res.checks.extend(checks)
        res.comparisons.extend(comparisons)
    _settings_checks(resolved, lock, add)
    _image_checks(jobs, recipe_steps, add)
    return res


def verify_sharded(root: Path, *, lock: Any = None,
                   published: dict[tuple[str, int | None, str], tuple[float, float]] | None = None,
                   published_source: str | None = None, workers: int | None = None) -> CampaignVerification:
    """A Slurm campaign: merged, its shards covering the recipe's slices once each, and every shard
    verified with the same checks as a single-node campaign (subjects name the shard). Only a shard's
    own folder inside the parent is read: a shard id that is not a plain name, or a shard folder that is
    a link, fails its check unread."""
    res = CampaignVerification(campaign=str(root), published_source=published_source)
    add = res.checks.append
    try:
        plan = read_plan(root)
    except CheckFailed as exc:
        add(Check(id="complete", status="failed", subject=PLAN_FILE, message=exc.message))
        return res
    res.recipe, res.run_tag = plan.recipe, plan.run_tag
    data = _resolved_recipe(root, add)
    if data is None:
        return res
    typed, checks = recipe_checks(data, {"config_sha256": plan.config_sha256, "run_tag": plan.run_tag,
                                         "recipe": plan.recipe})
    res.checks.extend(checks)
    if typed is None:
        return res
    want = sorted(x.id for x in typed.slices)
    problems = coverage_problems(plan)
    if want != sorted(plan.slices):
        problems.append("the shard plan's slices are not the recipe's")
    for p in problems:
        add(Check(id="complete", status="failed", subject=PLAN_FILE, message=p))
    merged = merged_problem(root, plan)
    if merged is not None:
        add(Check(id="complete", status="failed", subject=MERGED_FILE, message=merged))
    for shard in plan.shards:
        try:
            where = shard_dir(root, shard)
        except CheckFailed as exc:
            add(Check(id="complete", status="failed", subject=shard.dir, message=exc.message))
            continue
        if where is None or not os.path.lexists(where / "state.sqlite"):
            add(Check(id="complete", status="failed", subject=shard.dir, message="shard never ran"))
            continue
        try:
            sub = verify_campaign(where, lock=lock, published=published, published_source=published_source,
                                  workers=workers)
        except TraceTuiError as exc:  # its state unreadable: this shard's failure, the others still verified
            add(Check(id="complete", status="failed", subject=shard.dir, message=exc.line()))
            continue
        for c in sub.checks:
            add(c.replace(subject=f"{shard.dir}: {c.subject}"))
        shard_recipe = next((c for c in sub.checks if c.id == "recipe"), None)
        ran = _shard_slices(where)
        if shard_recipe is not None and ran is not None and ran != sorted(shard.slices):
            add(Check(id="complete", status="failed", subject=f"{shard.dir}: {RECIPE_FILE} slices",
                      message="the shard ran other slices than the plan gives it", expected=len(shard.slices),
                      actual=len(ran)))
        res.comparisons.extend(sub.comparisons)
    return res


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _shard_slices(where: Path) -> list[str] | None:
    """The slices a shard's recipe.json lists (None when it has none to read: its own checks say why)."""
    try:
        data = read_campaign_recipe(where)
    except TraceTuiError:
        return None
    listed = data.get("slices")
    if not isinstance(listed, list) or not all(isinstance(x, dict) for x in listed):
        return None
    return sorted(f"{x.get('model')}/{x.get('seed')}/{x.get('benchmark')}" for x in listed)


def _image_checks(jobs: list[Any], recipe_steps: dict[str, Any], add: Callable[[Check], None]) -> None:
    """Image ids the campaign ran against the image lock of this machine: information only."""
    try:
        from trace_tui.images import read_images_lock

        lock = read_images_lock()
    except Exception:  # noqa: BLE001 - no lock or an unreadable one: nothing to compare with
        return
    if lock is None:
        return
    seen: set[tuple[str, str]] = set()
    for j in jobs:
        kind = recipe_steps.get(j.step, {}).get("image")
        got = j.inputs.get("image_id")
        entry = lock.images.get(kind) if kind else None
        if entry is None or not got or (kind, got) in seen:
            continue
        seen.add((kind, got))
        same = got == entry.id
        add(Check(id="image", status="info", subject=kind,
                  message=f"{kind} image {'equals' if same else 'differs from'} the image lock ({entry.tag})",
                  expected=entry.id, actual=got))


def _lock(lock: Any) -> Any:
    if lock is None:
        lock = release_lock()
    return lock


def _pin_checks(subject: str, inputs: dict[str, Any], lock: Any) -> list[Check]:
    out: list[Check] = []
    models = [inputs["model"]] if isinstance(inputs.get("model"), dict) else list(inputs.get("models") or [])
    lock = _lock(lock)
    pins = {m.id: m for m in lock.models}
    for m in models:
        pin = pins.get(m.get("id"))
        if pin is None or "revision" not in m:
            continue  # a local model (demo): no release identity to compare
        same = m.get("revision") == pin.revision and m.get("repo_id", pin.repo_id) == pin.repo_id
        out.append(Check(id="pin", status="passed" if same else "failed", subject=subject,
                         message=f"model {pin.id} at the release revision" if same
                         else f"model {pin.id} is not at the release lock's revision",
                         expected=pin.ref, actual=f"{m.get('repo_id')}@{m.get('revision')}"))
    return out


def _settings_checks(resolved: dict[str, Any], lock: Any, add: Callable[[Check], None]) -> None:
    recipe = resolved.get("recipe", {})
    suite = (recipe.get("selection") or {}).get("suite")
    if suite not in ("trace_eval", "trace_validation"):
        return
    lock = _lock(lock)
    gen = (lock.trace_eval.generation if suite == "trace_eval" else lock.trace_validation.generation).model_dump()
    settings = resolved.get("settings") or {}
    diffs = {k: (v, settings.get(k)) for k, v in gen.items() if k in settings and settings[k] != v}
    add(Check(id="pin", status="failed" if diffs else "passed", subject="settings",
              message=(f"generation settings differ from the release lock: {sorted(diffs)}" if diffs
                       else f"generation settings equal the release lock ({suite})"),
              expected={k: v[0] for k, v in diffs.items()} or None,
              actual={k: v[1] for k, v in diffs.items()} or None))


__all__ = ["CampaignVerification", "Check", "Comparison", "compare", "load_published", "locate",
           "recipe_against_state", "recipe_checks", "recomputer_for", "unsafe_files",
           "verify_campaign", "verify_sharded"]

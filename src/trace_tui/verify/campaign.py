"""`trace-tui verify --campaign DIR`: a campaign checked offline (SPEC §3).

Checks (pure over the campaign's files and its state database, read-only):

- completeness: every expected job (each per-slice step x every slice of the
  resolved recipe, and each whole step) is complete with a receipt;
- receipts: each receipt's content hash, and every output's sha256 and size
  against the receipt;
- scores: each recorded score recomputed from the per-row results and equal to
  the record, by ``recompute_score(campaign_dir, receipt_content) -> float`` of
  the step kind's worker module (``step.run[0]``). The scoring workers are a
  fixed table (KNOWN_RECOMPUTERS): a module a receipt names is never imported,
  an unknown kind is a failed check;
- pinned inputs: the model revisions and generation settings a campaign
  recorded against the release lock (and image ids against the image lock, as
  information: images are not bit-reproducible across machines);
- comparison with published values, as information: TRACE validation inside
  the binomial 95% interval of the published accuracy (n = 2,000); external
  benchmarks within 2 canonical seed standard deviations or 1 point,
  whichever is larger.

A verdict is information; a broken receipt, a changed output, a score that does
not recompute or a missing slice is a failure (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.errors import TraceTuiError, UsageError

ScoreRecomputer = Callable[[Path, dict[str, Any]], float | None]
SCORE_TOLERANCE = 1e-9
VALIDATION_BENCHMARK = "trace-validation"


# The step kinds whose scores verify recomputes, and the module of trace-tui that knows how. A fixed
# table: the kind comes from a receipt, which a campaign handed over may have written to name any module.
KNOWN_RECOMPUTERS: dict[str, str] = {
    "trace_tui.stages.score": "trace_tui.stages.score",
    "trace_tui.stages.release_eval": "trace_tui.stages.release_eval",
    "trace_tui.stages.selftest": "trace_tui.stages.selftest",
}


def recomputer_for(step_kind: str) -> ScoreRecomputer | None:
    """The step kind's ``recompute_score`` (None: not a scoring step of trace-tui)."""
    module_name = KNOWN_RECOMPUTERS.get(step_kind)
    if module_name is None:
        return None
    fn = getattr(importlib.import_module(module_name), "recompute_score", None)
    return fn if callable(fn) else None


def score_check(kind: str, root: Path, content: dict[str, Any], recorded: float, subject: str) -> Check:
    """A recorded score against the one its step kind's recomputer gets from the receipt ``content``."""
    fn = recomputer_for(kind)
    if fn is None:
        return Check(id="score", status="failed", subject=subject,
                     message=f"score {recorded} cannot be recomputed: {str(kind)[:80]!r} is not a scoring step "
                             "of trace-tui")
    try:
        again = fn(root, content)
    except Exception as exc:  # noqa: BLE001 - a broken row file is this check's failure
        return Check(id="score", status="failed", subject=subject,
                     message=f"cannot recompute the score: {type(exc).__name__}: {exc}")
    ok = again is not None and abs(float(again) - float(recorded)) <= SCORE_TOLERANCE
    return Check(id="score", status="passed" if ok else "failed", subject=subject,
                 message="score recomputed from per-row results" if ok
                 else "score does not recompute from per-row results", expected=recorded, actual=again)


def inside(root: Path, rel: Any) -> Path | None:
    """``root / rel`` when it names a file inside the campaign (links resolved), else None."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return None
    path = (root / rel).resolve()
    return path if root in path.parents else None


Status = Literal["passed", "failed", "absent", "info"]


class Check(BaseModel):
    id: str  # complete | receipt | output | score | pin | image
    status: Status
    subject: str  # the job (step slice) or file it is about
    message: str
    expected: Any = None
    actual: Any = None


class Comparison(BaseModel):
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


class CampaignVerification(BaseModel):
    campaign: str
    recipe: str | None = None
    run_tag: str | None = None
    checks: list[Check] = Field(default_factory=list)
    comparisons: list[Comparison] = Field(default_factory=list)
    published_source: str | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

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
        from trace_tui.release import release_lock

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
    return Comparison(step=step, model=model, seed=seed, benchmark=benchmark, score=score, published=value,
                      difference=diff, tolerance=tol, rule=rule,
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


def verify_campaign(campaign_dir: Path | str, *, lock: Any = None,
                    published: dict[tuple[str, int | None, str], tuple[float, float]] | None = None,
                    published_source: str | None = None) -> CampaignVerification:
    from trace_tui.common.digest import sha256_file_size, sha256_json
    from trace_tui.campaign_files.state import STEP_SLICE, read_snapshot

    root = Path(campaign_dir).resolve()
    if not root.is_dir():
        raise UsageError(f"--campaign {campaign_dir}: no such directory")
    if (root / "shards.json").is_file() and not (root / "state.sqlite").is_file():
        return verify_sharded(root, lock=lock, published=published, published_source=published_source)
    meta, steps, jobs, subs = read_snapshot(root)
    res = CampaignVerification(campaign=str(root), recipe=meta.get("recipe"), run_tag=meta.get("run_tag"),
                               published_source=published_source)
    add = res.checks.append
    resolved = _resolved_recipe(root, add)
    if resolved is None:
        return res
    recipe_steps = {s["id"]: s for s in resolved.get("recipe", {}).get("steps", [])}

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
    for j in jobs:
        subject = f"{j.step} {j.slice}"
        step = recipe_steps.get(j.step, {})
        if _is_self_verify(step.get("run", [])):
            continue
        if j.receipt and inside(root, j.receipt) is None:
            add(Check(id="receipt", status="failed", subject=subject,
                      message=f"receipt path {j.receipt!r} is outside the campaign; it was not read"))
            continue
        receipt_path = inside(root, j.receipt) if j.receipt else None
        if j.state != "completed" or receipt_path is None:
            add(Check(id="complete", status="failed", subject=subject,
                      message=f"not complete ({j.state}, {j.done}/{j.total} rows)"))
            continue
        if not receipt_path.is_file():
            add(Check(id="complete", status="failed", subject=subject, message=f"receipt {j.receipt} is missing"))
            continue
        add(Check(id="complete", status="passed", subject=subject, message=f"complete ({j.done} rows)"))

        # 2. receipts: the receipt's own hash, then every output
        try:
            receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
            content = receipt["content"]
            if not isinstance(content, dict) or not isinstance(content.get("outputs", {}), dict):
                raise ValueError("its content is not an object with outputs")
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            add(Check(id="receipt", status="failed", subject=j.receipt, message=f"unreadable receipt: {exc}"))
            continue
        if sha256_json(content) != receipt.get("content_sha256"):
            add(Check(id="receipt", status="failed", subject=j.receipt, message="receipt content was altered",
                      expected=receipt.get("content_sha256"), actual=sha256_json(content)))
        elif content.get("input_hash") != j.input_hash:
            add(Check(id="receipt", status="failed", subject=j.receipt,
                      message="receipt is for other pinned inputs than the campaign state",
                      expected=j.input_hash, actual=content.get("input_hash")))
        else:
            add(Check(id="receipt", status="passed", subject=j.receipt, message="receipt intact"))
        bad = 0
        for rel, want in sorted(content.get("outputs", {}).items()):
            path = inside(root, rel)
            if path is None:
                add(Check(id="output", status="failed", subject=str(rel),
                          message="output path is outside the campaign; it was not read"))
                bad += 1
                continue
            if not path.is_file():
                add(Check(id="output", status="failed", subject=rel, message="output missing",
                          expected=want["sha256"]))
                bad += 1
                continue
            got, size = sha256_file_size(path)
            if got != want["sha256"] or size != want.get("bytes", size):
                add(Check(id="output", status="failed", subject=rel, message="output differs from its receipt",
                          expected=want["sha256"], actual=got))
                bad += 1
        if not bad:
            add(Check(id="output", status="passed", subject=subject,
                      message=f"{len(content.get('outputs', {}))} output(s) match their sha256"))

        # 3. scores recomputed from per-row results (never from a file outside the campaign)
        recorded = content.get("score")
        if any(inside(root, rel) is None for rel in content.get("outputs", {})):
            content = {**content, "score": None, "slices": {}}
        if recorded is not None:
            kind = content.get("kind") or by_step_kind.get(j.step, "")
            if j.score is not None and abs(j.score - recorded) > SCORE_TOLERANCE:
                add(Check(id="score", status="failed", subject=subject,
                          message="campaign state and receipt disagree on the score", expected=recorded,
                          actual=j.score))
            add(score_check(kind, root, content, recorded, subject))
            if published and j.model is not None and j.benchmark is not None:
                cmp_ = compare(j.step, j.model, j.seed, j.benchmark, float(recorded), published)
                if cmp_ is not None:
                    res.comparisons.append(cmp_)

        for name, sub in sorted((content.get("slices") or {}).items()):
            if sub.get("score") is None:
                continue
            kind = content.get("kind") or by_step_kind.get(j.step, "")
            # the whole-step job's recomputer is asked about one slice
            add(score_check(kind, root, {**content, "slice": name, "model": sub.get("model"), "seed": sub.get("seed"),
                                         "benchmark": sub.get("benchmark")}, sub["score"], f"{j.step} {name}"))
            if published and sub.get("model") is not None:
                cmp_ = compare(j.step, sub["model"], sub.get("seed"), sub["benchmark"], float(sub["score"]), published)
                if cmp_ is not None:
                    res.comparisons.append(cmp_)

        # 4. pinned inputs against the release lock
        for check in _pin_checks(subject, j.inputs, lock):
            add(check)
    _settings_checks(resolved, lock, add)
    _image_checks(jobs, recipe_steps, add)
    return res


def verify_sharded(root: Path, *, lock: Any = None,
                   published: dict[tuple[str, int | None, str], tuple[float, float]] | None = None,
                   published_source: str | None = None) -> CampaignVerification:
    """A Slurm campaign: merged, its shards covering the recipe's slices once each, and every shard
    verified with the same checks as a single-node campaign (subjects name the shard)."""
    from trace_tui.campaign_files.shard_files import MERGED_FILE, read_plan
    from trace_tui.campaign_files.shards import coverage_problems

    plan = read_plan(root)
    res = CampaignVerification(campaign=str(root), recipe=plan.recipe, run_tag=plan.run_tag,
                               published_source=published_source)
    add = res.checks.append
    resolved = _resolved_recipe(root, add)
    if resolved is None:
        return res
    want = sorted(f"{s['model']}/{s['seed']}/{s['benchmark']}" for s in resolved.get("slices", []))
    problems = coverage_problems(plan)
    if want != sorted(plan.slices):
        problems.append("the shard plan's slices are not the recipe's")
    for p in problems:
        add(Check(id="complete", status="failed", subject="shards.json", message=p))
    if not (root / MERGED_FILE).is_file():
        add(Check(id="complete", status="failed", subject=MERGED_FILE,
                  message="the shards were never merged (run `trace-tui merge --campaign DIR` once all are complete)"))
    for shard in plan.shards:
        where = root / shard.dir
        if not (where / "state.sqlite").is_file():
            add(Check(id="complete", status="failed", subject=shard.dir, message="shard never ran"))
            continue
        sub = verify_campaign(where, lock=lock, published=published, published_source=published_source)
        for c in sub.checks:
            add(c.model_copy(update={"subject": f"{shard.dir}: {c.subject}"}))
        res.comparisons.extend(sub.comparisons)
    return res


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
        from trace_tui.release import release_lock

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


# --------------------------------------------------------------------------- command line


def _published_for(args: argparse.Namespace) -> tuple[dict | None, str | None]:
    release_dir = getattr(args, "release_dir", None)
    if release_dir:
        return load_published(Path(release_dir).expanduser()), str(release_dir)
    # The release files in the store (eval-setup puts them there), when present.
    try:
        from trace_tui import paths
        from trace_tui.release import release_lock
        from trace_tui.store.store import Store

        lock = release_lock()
        store = Store(paths.store_dir(paths.home(getattr(args, "home", None))))
        name = f"release/{lock.upstream.repository}@{lock.upstream.commit}"
        if store.has(name):
            where = store.path_of(name)
            return load_published(where, lock), str(where)
    except Exception:  # noqa: BLE001 - no store or no release entry: no comparison, said in the output
        pass
    return None, None


def render(res: CampaignVerification) -> str:
    lines = [f"campaign {res.campaign} (recipe {res.recipe}, run tag {res.run_tag})"]
    counts = res.counts()
    for c in res.checks:
        if c.status != "passed":
            extra = f" (expected {c.expected}, actual {c.actual})" if c.expected is not None or c.actual is not None \
                else ""
            lines.append(f"{c.status.upper():6} {c.id:8} {c.subject}: {c.message}{extra}")
    lines.append(f"checks: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
                 f"{counts.get('info', 0)} information")
    if res.comparisons:
        lines.append(f"comparison with published values ({res.published_source}); information, not a failure:")
        for cmp_ in res.comparisons:
            seed = "" if cmp_.seed is None else f"/{cmp_.seed}"
            lines.append(f"  {cmp_.model}{seed}/{cmp_.benchmark}: {cmp_.score:.2f} vs {cmp_.published:.2f} "
                         f"({cmp_.difference:+.2f}, tolerance {cmp_.tolerance:.2f}: {cmp_.verdict})")
    elif res.published_source is None:
        lines.append("no published values to compare with (give --release-dir DIR or import the release files)")
    lines.append("VERIFIED" if res.ok else "FAILED")
    return "\n".join(lines)


def run_cli(args: argparse.Namespace) -> int:
    published, source = _published_for(args)
    res = verify_campaign(args.campaign, published=published, published_source=source)
    if getattr(args, "json", False):
        data = res.model_dump()
        data.update(ok=res.ok, exit_code=res.exit_code, counts=res.counts())
        print(json.dumps(data, indent=2, default=str))
    else:
        print(render(res))
    return res.exit_code


__all__ = ["CampaignVerification", "Check", "Comparison", "compare", "load_published", "recomputer_for",
           "render", "run_cli", "verify_campaign", "verify_sharded"]

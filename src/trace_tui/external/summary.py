"""`trace-tui report --campaign DIR`: a `full` campaign's reproduced scores beside the published ones.

Reads what the score step recorded (its scores.json, written only after the
evaluator's own `--phase score` verification passed), re-checks each score file
against that record and the evaluator's per-seed completion receipts, and builds:

- one row per (model, benchmark, seed): reproduced, published (results.json),
  difference, tolerance and the SPEC §3 verdict (within max(2 x canonical seed
  std, 1 point));
- one row per model with all seeds complete: the overall score likewise;
- the release page's tables from the reproduced scores (trace_tui.verify.tables,
  the same code as `trace-tui report --release-dir`).

A verdict is information, never a failure; a score file that no longer matches
its record is (CheckFailed, exit 1). Pure over the campaign's files: it never
writes, except the two summary files when it runs as the recipe's summary step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trace_tui.campaign_files.recipe_file import read_campaign_recipe
from trace_tui.campaign_files.shard_files import MERGED_FILE, merged_problem, read_plan, shard_dir
from trace_tui.campaign_files.state import STEP_SLICE, slice_path
from trace_tui.common.atomic import atomic_write_bytes, atomic_write_json
from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.evaluator.layout import EvalSlice, receipt_problems, score_of
from trace_tui.external.compare import reproduction
from trace_tui.release import release_lock
from trace_tui.stages import protocol
from trace_tui.verify.release import release_dir_arg
from trace_tui.workers import registry

SCORE_STEP_RUN = list(registry.EXTERNAL_SCORE_RUN)


class CampaignReport(BaseModel):
    campaign: str
    recipe: str | None
    run_tag: str | None
    suite: str | None
    published_source: str | None
    verdict: str
    problems: list[str]
    reproduction: Any  # trace_tui.external.compare.Reproduction

    def to_dict(self) -> dict[str, Any]:
        rep = self.reproduction
        return {
            "campaign": self.campaign, "recipe": self.recipe, "run_tag": self.run_tag, "suite": self.suite,
            "published_source": self.published_source, "verdict": self.verdict, "problems": self.problems,
            "slices": [c.model_dump() for c in rep.slices],
            "unpublished": rep.unpublished,
            "overall": [o.model_dump() for o in rep.overall],
            "outside": [f"{c.model}/{c.seed}/{c.benchmark}" for c in rep.outside]
            + [f"{o.model}/overall" for o in rep.overall if o.verdict == "outside"],
            "tables": rep.tables.to_dict() if rep.tables is not None else None,
        }

    def to_markdown(self) -> str:
        rep = self.reproduction
        out = [f"# trace_eval_v1 reproduction: {self.run_tag}", "",
               f"Campaign: `{self.campaign}` (recipe {self.recipe}, suite {self.suite})", ""]
        if self.published_source is None:
            out += [("No published values to compare with: give `--release-dir DIR` or fetch the release files "
                     "(`trace-tui --recipe eval-setup`)."), ""]
        else:
            out += [f"Published values: `{self.published_source}`", "", f"**Verdict:** {self.verdict}", ""]
        if self.problems:
            out += ["## Problems", ""] + [f"- {p}" for p in self.problems] + [""]
        if rep.overall:
            out += ["## Overall score per model (mean over its complete seeds)", "",
                    "| Model | Reproduced | Published | Difference | Tolerance | Verdict |", "|---|---:|---:|---:|---:|---|"]
            for o in rep.overall:
                out.append(f"| {o.model} | {o.score:.2f} | {_num(o.published)} | {_num(o.difference, '+.2f')} | "
                           f"{_num(o.tolerance)} | {o.verdict} |")
            out.append("")
        if rep.slices:
            out += ["## Per model, benchmark and seed", "",
                    "| Model | Benchmark | Seed | Reproduced | Published | Difference | Tolerance | Verdict |",
                    "|---|---|---:|---:|---:|---:|---:|---|"]
            for c in rep.slices:
                out.append(f"| {c.model} | {c.benchmark} | {c.seed} | {c.score:.2f} | {c.published:.2f} | "
                           f"{c.difference:+.2f} | {c.tolerance:.2f} | {c.verdict} |")
            out.append("")
        if rep.unpublished:
            out += [f"Reproduced without a published value ({len(rep.unpublished)}): "
                    + ", ".join(rep.unpublished[:24]) + (" …" if len(rep.unpublished) > 24 else ""), ""]
        if rep.tables is not None:
            out += ["# Release tables (recomputed from the reproduced scores)", "", rep.tables.to_markdown()]
        return "\n".join(out).rstrip() + "\n"


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "–" if value is None else format(value, fmt)


def score_step(resolved: dict[str, Any]) -> str | None:
    for step in (resolved.get("recipe") or {}).get("steps") or []:
        if list(step.get("run") or []) == SCORE_STEP_RUN:
            return str(step["id"])
    return None


def recorded_scores(campaign: Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(resolved recipe, the score step's scores.json, its path relative to the campaign)."""
    resolved = read_campaign_recipe(campaign)
    step = score_step(resolved)
    name = (resolved.get("recipe") or {}).get("name")
    if step is None:
        raise UsageError(f"--campaign {campaign}: recipe {name} has no release-evaluator score step",
                         hint="`report --campaign` summarizes `full` campaigns; see `trace-tui status` for others")
    rel = f"outputs/{step}/{slice_path(STEP_SLICE)}/scores.json"
    try:
        data = json.loads((campaign / rel).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckFailed(f"{campaign / rel}: absent: step {step} has not completed",
                          hint=f"run `trace-tui --recipe {name}` again to finish the campaign") from None
    except ValueError as exc:
        raise CheckFailed(f"{campaign / rel}: not valid JSON ({exc})") from None
    return resolved, data, rel


def _slices(campaign: Path, data: dict[str, Any], rel: str) -> tuple[list[Any], list[str]]:
    """The recorded slices, each score file re-read and checked against the record and the receipts."""
    root = campaign / str(data.get("campaign_root", ""))
    slices, problems = [], []
    fields = set(EvalSlice.model_fields)
    for entry in data.get("slices") or []:
        s = EvalSlice(**{k: v for k, v in entry.items() if k in fields})
        if s.scores_path:
            path = root / s.scores_path
            where = f"{data.get('campaign_root')}/{s.scores_path}"
            if not path.is_file():
                problems.append(f"{where}: missing (recorded in {rel})")
                continue
            if sha256_file(path) != s.scores_sha256:
                problems.append(f"{where}: sha256 differs from {rel}")
                continue
            score = score_of(json.loads(path.read_text(encoding="utf-8")), s.benchmark)
            if score is None or abs(score - (s.score or 0.0)) > 1e-9:
                problems.append(f"{where}: score {score} differs from the recorded {s.score}")
                continue
        slices.append(s)
    seeds = sorted({s.seed for s in slices})
    problems += receipt_problems(root, slices, seeds)
    return slices, problems


def _sharded_slices(campaign: Path) -> tuple[dict[str, Any], list[Any], list[str]]:
    """A Slurm campaign: every shard's recorded slices, each checked as in a single-node campaign."""
    plan = read_plan(campaign)
    if not (campaign / MERGED_FILE).exists():
        raise CheckFailed(f"{campaign}: the shards are not merged yet",
                          hint="wait for the campaign's merge job, or run `trace-tui merge --campaign DIR`")
    damaged = merged_problem(campaign, plan)  # a merged.json that is not this plan's merge is no merge
    if damaged is not None:
        raise CheckFailed(f"{campaign}: {damaged}", hint="run `trace-tui merge --campaign DIR` again")
    resolved = read_campaign_recipe(campaign)
    slices: list[Any] = []
    problems: list[str] = []
    for shard in plan.shards:
        folder = shard_dir(campaign, shard)  # never a link to a campaign elsewhere
        if folder is None:
            problems.append(f"{shard.dir}: not run")
            continue
        _, data, rel = recorded_scores(folder)
        got, bad = _slices(folder, data, rel)
        slices += got
        problems += [f"{shard.dir}/{p}" for p in bad]
    return resolved, slices, problems


def release_dir_for(release_dir: str | Path | None, home: str | None = None) -> Path | None:
    """--release-dir when given, else the release files in the store (eval-setup fetches them), else None."""
    if release_dir:
        return release_dir_arg(str(release_dir))
    try:
        from trace_tui import paths
        from trace_tui.release import release_lock
        from trace_tui.store import release_entry
        from trace_tui.store.store import Store

        lock = release_lock()
        # Inside a recipe step the store is the one the engine mounted (TRACE_TUI_STORE).
        store = Store(Path(os.environ["TRACE_TUI_STORE"]) if os.environ.get("TRACE_TUI_STORE")
                      else paths.store_dir(paths.home(home)))
        name = release_entry(lock)
        if store.has(name):
            return store.path_of(name)
    except Exception:  # noqa: BLE001, S110 - no store or no release entry: the report says there is nothing to compare
        pass
    return None


def campaign_report(campaign_dir: str | Path, release_dir: Path | None, *, lock: Any = None) -> CampaignReport:
    if lock is None:
        lock = release_lock()
    campaign = Path(campaign_dir).expanduser()
    if not campaign.is_dir():
        raise UsageError(f"--campaign {campaign_dir}: no such directory")
    if (campaign / "shards.json").is_file() and not (campaign / "state.sqlite").is_file():
        resolved, slices, problems = _sharded_slices(campaign)
        data: dict[str, Any] = {}
    else:
        resolved, data, rel = recorded_scores(campaign)
        slices, problems = _slices(campaign, data, rel)
    rep = reproduction(slices, lock, release_dir)
    if problems:
        verdict = f"{len(problems)} score file(s) do not match their records; the comparison below is not trustworthy"
    elif release_dir is None:
        verdict = f"{len(slices)} slices scored; no published values to compare with"
    else:
        verdict = rep.verdict_line()
    return CampaignReport(campaign=str(campaign), recipe=(resolved.get("recipe") or {}).get("name"),
                          run_tag=resolved.get("run_tag") or data.get("run_tag"), suite=resolved.get("suite"),
                          published_source=str(release_dir) if release_dir is not None else None,
                          verdict=verdict, problems=problems, reproduction=rep)


def _as_step_output(report: CampaignReport) -> None:
    """As the recipe's summary step (a job spec in TRACE_TUI_JOB for this campaign): also keep the summary."""
    job_path, camp = os.environ.get("TRACE_TUI_JOB"), os.environ.get("TRACE_TUI_CAMPAIGN")
    if not job_path or not camp or Path(camp).resolve() != Path(report.campaign).resolve():
        return

    try:
        job = protocol.load_job(job_path)
    except Exception:  # noqa: BLE001 - not a stage job after all: print only
        return
    out = Path(camp) / str(job.get("output_dir") or "")
    if not job.get("output_dir") or not out.is_dir():
        return
    atomic_write_bytes(out / "summary.md", report.to_markdown().encode())
    atomic_write_json(out / "summary.json", report.to_dict())


def run_report(args: Any) -> int:
    """The `--campaign` branch of `trace-tui report`."""
    import sys

    release = release_dir_for(getattr(args, "release_dir", None), getattr(args, "home", None))
    report = campaign_report(args.campaign, release)
    _as_step_output(report)
    if getattr(args, "format", "markdown") == "json":
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(report.to_markdown())
    if report.problems:
        raise CheckFailed(f"{report.problems[0]}" + (f" (and {len(report.problems) - 1} more)"
                                                     if len(report.problems) > 1 else ""),
                          hint="run `trace-tui verify --campaign DIR` for every check")
    return 0

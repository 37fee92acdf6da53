"""A finished campaign written in the engine's own format, fast: the benchmark's full-size campaign (576 slices,
787,320 rows) and the small ones of the tests of the same checks.

The steps are the demo's per-slice pipeline (generate -> extract -> score) at any size: a generate row file per
row, an extract row file per row (trace_tui.stages.extract.extract_row on it), a score.json per slice
(trace_tui.stages.score.score_rows over the extract rows, its ``source`` and ``inputs`` as the worker writes them),
each step's worker receipt, and per job the engine's receipt (the content write_receipt records, every output's
sha256 and bytes) and its state row (trace_tui.engine.campaign.Campaign, planned by trace_tui.engine.planner as a
run plans it). Only the models' generation is not run: no model is loaded; the responses are a few fixed texts.
Written with one write per file and each file's sha256 taken from the bytes written (no second read), so a
full-size campaign takes a few minutes of two cores and ~7 GB of a disk's blocks (1.6 million small files).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

INFER_IMAGE_ID = "sha256:" + "1" * 64
SCORE_IMAGE_ID = "sha256:" + "2" * 64
IMAGE_IDS: dict[str | None, str] = {"infer": INFER_IMAGE_ID, "score": SCORE_IMAGE_ID, None: "host"}
# A few texts a model answers with: right, wrong, and unparsable (the extraction finds no answer).
RESPONSES = ('{"answer": "%d"}', '{"answer": "%d"}', "The answer is %d.", "I cannot tell.")


def _json_bytes(obj: Any) -> bytes:
    """Sorted keys as trace_tui.common.atomic.atomic_write_json writes them, without its indentation: the same
    content (every check parses it), and Python's C encoder, ten times as fast as the indenting one."""
    return (json.dumps(obj, sort_keys=True) + "\n").encode("utf-8")


def demo_shaped_recipe(*, models: list[str], seeds: list[int], benchmarks: dict[str, int],
                       name: str = "trustbench") -> Any:
    """A resolved recipe of the demo's generate -> extract -> score steps over local models."""
    from trace_tui.common.digest import sha256_json
    from trace_tui.recipe.schema import BenchmarkRef, LocalModel, Recipe, ResolvedRecipe, SliceKey, Step, config_data

    steps = [Step(id="generate", title="Generate", stage="infer", image="infer", run=["trace_tui.stages.generate"],
                  per_slice=True),
             Step(id="extract", title="Extract answers", stage="score", image="score",
                  run=["trace_tui.stages.extract", "--no-judge"], per_slice=True),
             Step(id="score", title="Score", stage="score", image="score", run=["trace_tui.stages.score"],
                  per_slice=True)]
    ms = [LocalModel(id=m, label=m, store_entry=f"local:model/{m}") for m in models]
    recipe = Recipe(name=name, title="trust benchmark", purpose="a finished campaign of any size",
                    canonical=False, image_flavor="cpu", selection={"suite": "demo"}, local_models=ms,
                    demo_tasks=[{"key": k, "rows": n} for k, n in benchmarks.items()], steps=steps)
    refs = [BenchmarkRef(key=k, rows=n) for k, n in benchmarks.items()]
    settings = {"max_tokens": 32}
    config = sha256_json(config_data(recipe, "demo", None, ms, list(seeds), refs, settings, None, {}))
    slices = [SliceKey(model=m, seed=s, benchmark=b) for m in models for s in seeds for b in benchmarks]
    return ResolvedRecipe(recipe=recipe, suite="demo", models=ms, seeds=list(seeds), benchmarks=refs,
                          settings=settings, slices=slices, rows_total=sum(benchmarks[x.benchmark] for x in slices),
                          config_sha256=config, run_tag=f"{name}-{config[:12]}")


def full_size_recipe() -> Any:
    """The release's size: its 8 models x 3 seeds x 24 benchmarks with their rows (576 slices, 787,320 rows)."""
    from trace_tui.release import release_lock

    lock = release_lock()
    models = [f"local-{m.id.replace('_', '-').lower()}" for m in lock.models]  # local: no release pin to match
    return demo_shaped_recipe(models=models, seeds=list(lock.trace_eval.seeds),
                              benchmarks={b.key.replace("_", "-"): b.rows for b in lock.trace_eval.benchmarks})


class _Files:
    """Writes files under a campaign and records each one's sha256 and bytes, campaign-relative."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.top = f"{root}/"  # plain strings in the loop over 1.6 million files: pathlib costs more than a write
        self.made: set[str] = set()

    def folder(self, rel: str) -> None:
        if rel not in self.made:
            os.makedirs(self.top + rel, exist_ok=True)
            self.made.add(rel)

    def write(self, rel: str, data: bytes, record: dict[str, dict[str, Any]] | None) -> str:
        fd = os.open(self.top + rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        digest = hashlib.sha256(data).hexdigest()
        if record is not None:
            record[rel] = {"sha256": digest, "bytes": len(data)}
        return digest


def write_campaign(path: Path, resolved: Any) -> dict[str, int]:
    """A finished campaign of ``resolved`` (demo_shaped_recipe) at ``path``; returns counts of what it wrote."""
    from trace_tui.campaign_files.presence import presence_record, store_presence
    from trace_tui.campaign_files.state import slice_path
    from trace_tui.common.digest import sha256_json, sha256_text
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.planner import dump, expected_jobs, plan_against, plan_rows
    from trace_tui.stages.extract import extract_row
    from trace_tui.stages.score import SCORE_FILE, score_rows

    path = Path(path)
    steps = resolved.recipe.steps
    files = _Files(path)
    judge_settings = {"entry": None, "budgets": [], "temperature": 0.0, "thinking": False, "prompt_sha256": None,
                      "backend": None}
    extracted_cache: dict[tuple[str, str], dict[str, Any]] = {}
    counts = {"jobs": 0, "row_files": 0, "files": 0}
    with Campaign(path) as c:
        plan = plan_against(expected_jobs(resolved, steps, IMAGE_IDS), {}, {})
        c.set_meta(run_tag=resolved.run_tag, recipe=resolved.recipe.name, config_sha256=resolved.config_sha256,
                   runtime="docker", rows_total=str(resolved.rows_total), offline="false",
                   last_run_started=str(time.time()), last_run_state="completed")
        c.upsert_steps((s.id, i, s.title, s.run[0], s.per_slice) for i, s in enumerate(steps))
        job_rows, _ = plan_rows(plan, time.time())
        c.record_plan(job_rows)
        (path / "recipe.json").write_bytes(_json_bytes(dump(resolved)))
        by_slice = {}
        for j in plan.jobs:
            by_slice.setdefault(j.slice, {})[j.step.id] = j
        done: list[tuple[Any, str, int, float | None, dict[str, Any]]] = []
        for name, jobs in by_slice.items():
            sp = slice_path(name)
            model, seed, bench = jobs["generate"].model, jobs["generate"].seed, jobs["generate"].benchmark
            total = jobs["generate"].total
            gen_dir, ext_dir, score_dir = (f"outputs/{s}/{sp}" for s in ("generate", "extract", "score"))
            for rel in (f"{gen_dir}/rows", f"{ext_dir}/rows", score_dir):
                files.folder(rel)
            outputs: dict[str, dict[str, dict[str, Any]]] = {"generate": {}, "extract": {}, "score": {}}
            responses: dict[str, str] = {}
            rows = []
            inputs_sha = sha256_json({"model": model, "seed": seed, "benchmark": bench})
            for i in range(total):
                gt = (i * 7 + seed) % 10
                text = RESPONSES[i % len(RESPONSES)] % (gt if i % 4 == 0 else (gt + 1) % 10) \
                    if "%d" in RESPONSES[i % len(RESPONSES)] else RESPONSES[i % len(RESPONSES)]
                gen = {"index": i, "instance_id": f"{bench}-{i:06d}", "domain": f"domain-{i % 3}",
                       "task": f"task-{i % 5}", "answer_type": "integer", "answer_gt": gt, "seed": seed,
                       "response": text, "response_sha256": sha256_text(text), "inputs_sha256": inputs_sha}
                row_rel = f"rows/{i:06d}.json"
                files.write(f"{gen_dir}/{row_rel}", _json_bytes(gen), outputs["generate"])
                responses[str(i)] = gen["response_sha256"]
                key = (text, "integer")
                if key not in extracted_cache:
                    extracted_cache[key] = {k: v for k, v in extract_row(gen).items()
                                            if k not in ("index", "instance_id", "domain", "task", "answer_gt")}
                row = {**extracted_cache[key], **{k: gen[k] for k in ("index", "instance_id", "domain", "task",
                                                                      "answer_gt")}}
                row.pop("needs_judge", None)
                row["judge_settings"] = judge_settings
                files.write(f"{ext_dir}/{row_rel}", _json_bytes(row), outputs["extract"])
                rows.append(row)
            counts["row_files"] += 2 * total
            gen_outputs = {k: v["sha256"] for k, v in outputs["generate"].items()}
            files.write(f"{gen_dir}/generate.receipt.json", _json_bytes({
                "schema": "trace-tui-stage-receipt-v1", "kind": "generate", "step": "generate",
                "slice": {"model": model, "seed": seed, "benchmark": bench},
                "content": {"inputs_sha256": inputs_sha, "rows": total, "responses": responses,
                            "responses_sha256": sha256_json(responses), "outputs": gen_outputs}}),
                outputs["generate"])
            ext_outputs = {k: v["sha256"] for k, v in outputs["extract"].items()}
            files.write(f"{ext_dir}/extract.receipt.json", _json_bytes({
                "schema": "trace-tui-stage-receipt-v1", "kind": "extract",
                "slice": {"model": model, "seed": seed, "benchmark": bench},
                "content": {"rows": total, "outputs": ext_outputs}}), outputs["extract"])
            result = score_rows(rows)
            record = {"schema": "trace-tui-stage-receipt-v1", "kind": "score",
                      "slice": {"model": model, "seed": seed, "benchmark": bench}, "source": f"{ext_dir}/rows",
                      "inputs": {k: v for k, v in ext_outputs.items()}, **result}
            files.write(f"{score_dir}/{SCORE_FILE}", _json_bytes(record), outputs["score"])
            for step_id, job in jobs.items():
                score = result["accuracy"] if step_id == "score" else None
                content = {"schema": "trace-tui-receipt-v1", "step": step_id, "kind": job.step.run[0],
                           "slice": job.slice, "model": job.model, "seed": job.seed, "benchmark": job.benchmark,
                           "input_hash": job.input_hash, "inputs": job.inputs, "rows": total, "total": total,
                           "score": score, "outputs": dict(sorted(outputs[step_id].items()))}
                receipt = c.receipt_path(step_id, job.slice).relative_to(path).as_posix()
                files.folder(receipt.rsplit("/", 1)[0])
                files.write(receipt, _json_bytes({"content": content, "content_sha256": sha256_json(content),
                                                  "circumstance": {"runtime": "docker", "host": "bench"}}), None)
                done.append((job, receipt, total, score, presence_record(path, receipt, outputs[step_id], job.input_hash)))
            counts["files"] += sum(len(o) for o in outputs.values()) + 3
        now = time.time()
        with c._mutex:
            c.db.execute("BEGIN")
            for job, receipt, total, score, noted in done:
                c.update_job(job.step.id, job.slice, state="completed", done=total, total=total, score=score,
                             receipt=receipt, phase=job.step.id, started_at=now, finished_at=now, message="")
                store_presence(c.db, job.step.id, job.slice, receipt, noted)
            c.db.execute("COMMIT")
        for s in steps:
            c.set_step_state(s.id, "completed")
        counts["jobs"] = len(done)
    return counts


__all__ = ["IMAGE_IDS", "demo_shaped_recipe", "full_size_recipe", "write_campaign"]

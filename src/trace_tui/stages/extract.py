"""The extract worker: the release's answer extraction over one slice's responses, with the judge
fallback of CONTRACTS §4 for rows it leaves missing or ambiguous.

Job spec: the runner's per-slice job. Read here: ``slice``; ``upstream_outputs.generate``
(or ``paths.responses``: the generate step's output folder, whose ``rows/`` it reads);
``output_dir``; ``args`` (the recipe step's arguments):

    --judge ENTRY           the judge's store entry (default: the release lock's judge,
                            Qwen/Qwen3-32B at its pinned revision); the demo names its tiny model
    --judge-max-tokens L    comma-separated retry budgets (default: the lock's 128,256,512)
    --no-judge              deterministic extraction only (unresolved rows stay unresolved)
    --backend NAME          transformers | vllm (default: vllm where installed: GPU or its CPU build)
    --judge-batch N         rows per judge batch (default 64 with vLLM, 8 otherwise)

The judge runs as the release's validation judge ran it: its system prompt is the
release's own ``SYSTEM_PROMPT`` (judge_extract.py), read at run time from the release
sources the images carry and checked against the lock (trace_tui.stages.judge_prompt);
the prompt is rendered with the judge's chat template (``enable_thinking=False``) and
completed as text (the release's ``/v1/completions``), temperature 0, top-p 1, seed 0,
with the release server's engine settings (max_model_len 8192, generation config
``vllm``, memory 0.90). It sees only the response and the answer type.

A batch job (``batch``: one such spec per slice, the runner's form for a ``keep_loaded``
step) serves its slices in turn with one judge, loaded once for all of them (on the first
row that needs it); each slice still gets its own rows, receipt and status line.

Outputs under ``output_dir``: ``rows/<index>.json`` (extraction record, judge record,
final status and value), written atomically per row so a rerun resumes, and
``extract.receipt.json`` (contracts, judge identity, the prompt's sha256 and where it was
read, budgets, counts, row file hashes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import response_sha256, sha256_file
from trace_tui.scoring import (
    AMBIGUOUS,
    EXTRACTION_CONTRACT_ID,
    MISSING,
    JudgeAttempt,
    JudgePrompt,
    JudgeResult,
    check_judge_output,
    extract_answer,
    judge_messages,
)
from trace_tui.scoring.judge import RESOLVED, UNRESOLVED
from trace_tui.stages import protocol
from trace_tui.stages.backends import GenerationBackend, Request, Sampling, build_backend
from trace_tui.stages.entry import OptionsError, parse_step_options
from trace_tui.stages.generate import choose_backend, engine_versions
from trace_tui.stages.jobs import (
    RECEIPT_SCHEMA,
    JobError,
    campaign_dir,
    dir_sha256set,
    entry_path,
    judge_entry,
    output_dir,
    read_json,
    run_slices,
    run_worker,
    slice_fields,
    store_dir,
    upstream_rows_dir,
    writable_rows_dir,
)
from trace_tui.stages.judge_prompt import judge_prompt

FINAL_FOUND = "found"  # the deterministic extraction found the answer
FINAL_JUDGED = "judged"  # the judge stated an answer (status ok)
FINAL_UNRESOLVED = "unresolved"  # no answer: scores 0, stays in the denominator


@dataclass(frozen=True)
class ExtractOptions:
    """The recipe step's arguments: --judge ENTRY, --judge-max-tokens N[,N...], --no-judge, --backend NAME,
    --judge-batch N."""

    judge: str | None = None
    judge_max_tokens: str | None = None
    no_judge: bool = False
    backend: str | None = None
    judge_batch: int | None = None


def parse_args(args: list[str]) -> ExtractOptions:
    try:
        ns, extra = parse_step_options(ExtractOptions, args, prog="trace_tui.stages.extract")
    except OptionsError as exc:
        raise JobError(f"extract step arguments {args!r}: {exc}", "see trace_tui.stages.extract's docstring") from None
    if extra:
        raise JobError(f"extract step: unknown argument(s) {extra}",
                       "allowed: --judge, --judge-max-tokens, --no-judge, --backend, --judge-batch")
    return ns


def judge_budgets(text: str | None) -> list[int]:
    if text is None:
        from trace_tui.release import release_lock

        return list(release_lock().judge.max_token_retries)
    try:
        budgets = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        budgets = []
    if not budgets or any(b <= 0 for b in budgets):
        raise JobError(f"--judge-max-tokens {text!r} must be positive integers separated by commas", "e.g. 128,256,512")
    return budgets


def responses_dir(job: dict[str, Any]) -> Path:
    return upstream_rows_dir(job, "responses", step="extract", upstream="generate")


class JudgeClient:
    """The judge behind `generate(messages, max_tokens) -> str`, built on first use (it is large:
    minutes for Qwen3-32B), then kept for every slice the worker serves."""

    def __init__(self, model_dir: Path | None, backend_name: str, backend: GenerationBackend | None = None, gpus: int = 1,
                 label: str | None = None) -> None:
        self.model_dir = model_dir
        self.label = label or (model_dir.name if model_dir is not None else "judge")  # what the log names
        self.gpus = max(1, gpus)
        self.on_cpu = gpus < 1  # the job was given no GPU: the log says CPU, not "1 GPU(s) requested"
        self.backend_name = backend_name
        self.backend = backend
        self.calls = 0
        self.loads = 0  # how often this worker loaded the judge (0 or 1; receipts record it per slice)

    def __call__(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        return self.many([messages], max_tokens)[0]

    def many(self, conversations: list[list[dict[str, str]]], max_tokens: int) -> list[str]:
        """One judge output per conversation, in one backend call (vLLM batches them on the GPU)."""
        if not conversations:
            return []
        if self.backend is None:
            assert self.model_dir is not None
            options: dict[str, Any] = {}
            if self.backend_name == "vllm":  # the engine settings the release served its judge with
                options = judge_engine_options(self.gpus)
            t0 = time.monotonic()
            self.backend = build_backend(self.backend_name, str(self.model_dir), **options)
            self.loads += 1
            where = "on CPU" if self.on_cpu else f"{self.gpus} GPU(s)"
            protocol.log(f"judge loaded: {self.label} ({self.backend_name}, {where}) in {time.monotonic() - t0:.1f} s")
        self.calls += len(conversations)
        # Temperature 0 (greedy), thinking off, as the release's judge ran; text only.
        reqs = [Request(messages=m, images=[], sampling=Sampling(temperature=0.0, top_p=1.0, max_tokens=max_tokens),
                        seed=0, template_kwargs={"enable_thinking": False}) for m in conversations]
        return self.backend.generate(reqs)


def judge_engine_options(gpus: int) -> dict[str, Any]:
    """The release's judge server settings for the vLLM engine: max_model_len, memory, generation config."""
    from trace_tui.release import release_lock

    serving = release_lock().judge.vllm
    # generation_config "vllm": vLLM's own sampling defaults, not the checkpoint's generation_config.json
    return {"tensor_parallel_size": max(1, gpus), "max_model_len": serving.max_model_len,
            "gpu_memory_utilization": serving.gpu_memory_utilization,
            "generation_config": serving.generation_config}


def judge_rows(judge: JudgeClient, pending: list[tuple[str | None, str]], budgets: list[int], prompt: JudgePrompt) -> list[Any]:
    """CONTRACTS §4 for many rows at once: every row still without a valid output is retried at the
    next budget, all of them in one batch per budget. Row by row this is exactly
    ``trace_tui.scoring.judge_with_retries`` (a test holds the two equal); batching only lets a
    GPU judge serve the rows together."""

    attempts: list[list[Any]] = [[] for _ in pending]
    verdicts: dict[int, Any] = {}
    open_rows = list(range(len(pending)))
    for budget in budgets:
        if not open_rows:
            break
        outputs = judge.many([judge_messages(pending[i][0], pending[i][1], prompt) for i in open_rows], budget)
        still = []
        for i, output in zip(open_rows, outputs, strict=True):
            response, answer_type = pending[i]
            verdict, reason = check_judge_output(output, response or "", answer_type)
            attempts[i].append(JudgeAttempt(budget, output if isinstance(output, str) else repr(output),
                                            verdict is not None, reason))
            if verdict is not None:
                verdicts[i] = verdict
            else:
                still.append(i)
        open_rows = still
    return [JudgeResult(RESOLVED if i in verdicts else UNRESOLVED, verdicts.get(i), tuple(attempts[i]), prompt.sha256)
            for i in range(len(pending))]


def extract_row(rec: dict[str, Any]) -> dict[str, Any]:
    """One row's deterministic extraction record (pure); ``needs_judge`` says whether §4 applies."""
    ex = extract_answer(rec.get("response"), rec["answer_type"])
    out = {k: rec[k] for k in ("index", "instance_id", "domain", "task", "answer_type", "answer_gt")}
    out.update(response_sha256=rec.get("response_sha256"), extraction=ex.to_dict(), judge=None)
    if ex.found:
        out.update(final=FINAL_FOUND, value=ex.value)
    else:
        out.update(final=FINAL_UNRESOLVED, value=None)
    out["needs_judge"] = ex.status in (MISSING, AMBIGUOUS)
    return out


def with_judgement(row: dict[str, Any], result: JudgeResult) -> dict[str, Any]:
    row = dict(row, judge=result.to_dict())
    if result.value is not None:
        row.update(final=FINAL_JUDGED, value=result.value)
    return row


def check_generated_row(rec: object, path: Path) -> None:
    """A generate row this step reads: its response's sha256 must be its own ``response_sha256`` (JobError otherwise:
    an edited response is not extracted, and so not scored, under the hash the generate receipt lists)."""
    said = rec.get("response_sha256") if isinstance(rec, dict) else None
    if not isinstance(said, str) or said != response_sha256(rec.get("response")):
        raise JobError(f"{path}: its response does not match its response_sha256 (the row was edited)",
                       "move the row aside and run the same command again: the generate step makes it again")


class _RecordedJudge:
    """A judge that answers with the outputs a row's judge record holds, in order: replaying them through
    judge_rows gives the judge record (and the row) the real judge would have given for those outputs."""

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = outputs
        self.calls = 0

    def many(self, conversations: list[Any], max_tokens: int) -> list[Any]:
        if self.calls >= len(self.outputs):
            raise LookupError("more judge calls than recorded outputs")
        self.calls += 1
        return [self.outputs[self.calls - 1]] * len(conversations)


def extract_row_proves_itself(prev: object, rec: dict[str, Any], judge_settings: dict[str, Any], budgets: list[int],
                              prompt: JudgePrompt) -> bool:
    """Whether an extract row found on resume is kept: every field of it derived again, from its generate row
    (the deterministic extraction, pure) and from the judge outputs it records (replayed through judge_rows),
    equals what it says. Anything else is redone: a resume writes a fresh receipt over what it keeps, so a
    kept row must not be able to carry an edit (a `final`, a `value`, a copied answer_gt)."""
    import json

    if not isinstance(prev, dict) or prev.get("judge_settings") != judge_settings:
        return False
    want = extract_row(rec)
    if want.pop("needs_judge") and budgets:
        record = prev.get("judge")
        attempts = record.get("attempts") if isinstance(record, dict) else None
        if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
            return False
        replay = _RecordedJudge([a.get("output") for a in attempts])
        try:
            (result,) = judge_rows(replay, [(rec.get("response"), rec["answer_type"])], budgets, prompt)
        except (LookupError, TypeError, ValueError):
            return False
        if replay.calls != len(attempts):
            return False  # outputs recorded that no budget asked for
        want = with_judgement(want, result)
    want["judge_settings"] = judge_settings

    def canonical(obj: object) -> str:
        return json.dumps(obj, sort_keys=True, default=repr)

    return canonical(prev) == canonical(want)


def judged_identity(name: str | None, folder: Path | None) -> str | None:
    """The judge's sha256set: the store's record (hashed and verified on import; the judge is
    large), else computed over its folder."""
    if name is None or folder is None:
        return None
    try:
        from trace_tui.store.store import Store

        rec = Store(store_dir()).record(name)
        if rec is not None:
            return rec.sha256set
    except Exception:  # noqa: BLE001 - not a store entry name (a folder): compute it
        pass
    return dir_sha256set(folder)[1]


def shared_prompt(shared: dict[str, Any] | None, judge_name: str) -> JudgePrompt:
    """The judge's system prompt, read once per worker (trace_tui.stages.judge_prompt)."""
    key = f"judge-prompt:{judge_name == judge_entry()}"
    if shared is not None and key in shared:
        return shared[key]
    prompt = judge_prompt(judge_is_release=judge_name == judge_entry())
    if prompt.source == "trace-tui":
        protocol.log(f"judge {judge_name}: no release sources here, so trace-tui's own judge prompt "
                     f"(sha256 {prompt.sha256[:12]}…), not the release's")
    if shared is not None:
        shared[key] = prompt
    return prompt


def shared_judge(shared: dict[str, Any] | None, model_dir: Path | None, backend_name: str, backend: GenerationBackend | None,
                 gpus: int, label: str | None = None) -> JudgeClient:
    """The worker's judge for these settings: the one already built for an earlier slice, else a new one."""
    if shared is None:
        return JudgeClient(model_dir, backend_name, backend, gpus=gpus, label=label)
    key = f"judge:{model_dir}:{backend_name}:{max(1, gpus)}:{id(backend) if backend is not None else ''}"
    if key not in shared:
        shared[key] = JudgeClient(model_dir, backend_name, backend, gpus=gpus, label=label)
    return shared[key]


def run(job: dict[str, Any], *, judge_backend: GenerationBackend | None = None, shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """Extract every row of the slice not yet extracted; return the receipt. ``judge_backend`` replaces the
    built one; ``shared`` (a batch worker's) keeps the judge across the slices it serves."""
    campaign = campaign_dir()
    sl = slice_fields(job)
    ns = parse_args(list(job.get("args") or []))
    budgets = judge_budgets(ns.judge_max_tokens)
    src = responses_dir(job)
    out = output_dir(job)
    rows = writable_rows_dir(out)  # never a folder linked out of the campaign
    gen_rows = sorted(src.glob("*.json"))
    total = len(gen_rows)
    where = {"model": sl["model"], "seed": sl["seed"], "benchmark": sl["benchmark"]}
    judge_name = None if ns.no_judge else (ns.judge or judge_entry())
    judge_dir = None
    if judge_name and judge_backend is None:
        judge_dir = entry_path(judge_name) if not Path(judge_name).is_dir() else Path(judge_name)
    backend_name = ns.backend or choose_backend(job)
    judge = None if judge_name is None else shared_judge(shared, judge_dir, backend_name, judge_backend,
                                                         len(job.get("gpus") or []), label=judge_name)
    calls0, loads0 = (judge.calls, judge.loads) if judge is not None else (0, 0)
    prompt = shared_prompt(shared, judge_name) if judge_name else None
    judge_settings = {"entry": judge_name, "budgets": budgets, "temperature": 0.0, "top_p": 1.0, "seed": 0,
                      "thinking": False, "prompt_sha256": prompt.sha256 if prompt else None,
                      "prompt_source": prompt.source if prompt else None,
                      "backend": backend_name if judge_name else None}
    done = 0
    protocol.progress(phase="extract", done=0, total=total, **where)
    last = time.monotonic()
    todo: list[tuple[Path, dict[str, Any]]] = []
    for f in gen_rows:
        target = rows / f.name
        rec = read_json(f)
        check_generated_row(rec, f)
        if target.is_file():
            try:
                prev = read_json(target)
            except ValueError:
                prev = None  # unreadable: redone
            if extract_row_proves_itself(prev, rec, judge_settings, budgets if judge is not None else [], prompt):
                done += 1
                continue
        todo.append((target, rec))
    if todo:
        protocol.progress(phase="extract", done=done, total=total, **where)
    # Rows go to the judge in chunks (one batch per budget each), written as each chunk ends,
    # so a kill loses at most one chunk of judge work.
    chunk_size = max(1, ns.judge_batch or (64 if backend_name == "vllm" else 8))
    for start in range(0, len(todo), chunk_size):
        chunk = todo[start:start + chunk_size]
        extracted = [extract_row(rec) for _, rec in chunk]
        pending = [i for i, row in enumerate(extracted) if row["needs_judge"] and judge is not None]
        if pending:
            protocol.progress(phase="judge", done=done, total=total, **where)
            results = judge_rows(judge, [(chunk[i][1].get("response"), chunk[i][1]["answer_type"]) for i in pending],
                                 budgets, prompt)
            for i, result in zip(pending, results, strict=True):
                extracted[i] = with_judgement(extracted[i], result)
        for (target, _rec), row in zip(chunk, extracted, strict=True):
            row.pop("needs_judge")
            row["judge_settings"] = judge_settings
            atomic_write_json(target, row)
        done += len(chunk)
        if time.monotonic() - last > 0.5 or done == total:
            last = time.monotonic()
            protocol.progress(phase="judge" if pending else "extract", done=done, total=total, **where)
    protocol.progress(phase="extract", done=total, total=total, **where)

    counts: dict[str, int] = {}
    outputs: dict[str, str] = {}
    for f in gen_rows:
        row = read_json(rows / f.name)
        key = row["final"] if row["final"] != FINAL_UNRESOLVED else f"unresolved_{row['extraction']['status']}"
        counts[key] = counts.get(key, 0) + 1
        outputs[(rows / f.name).relative_to(campaign).as_posix()] = sha256_file(rows / f.name)
    judge_identity = judged_identity(judge_name, judge_dir) if counts.keys() - {FINAL_FOUND} else None
    receipt = {
        "schema": RECEIPT_SCHEMA, "kind": "extract", "slice": sl,
        "content": {"contract": EXTRACTION_CONTRACT_ID, "judge": dict(judge_settings, sha256set=judge_identity),
                    "rows": total, "counts": counts, "outputs": outputs},
        # Per slice: its judge calls, and whether the judge was loaded for it (a batch worker loads it once).
        "circumstance": {"judge_calls": judge.calls - calls0 if judge else 0,
                         "judge_loads": judge.loads - loads0 if judge else 0, "finished": time.time(),
                         # the judge's engine as it ran (its backend is in content.judge): vllm's version
                         "versions": engine_versions()},
    }
    path = out / "extract.receipt.json"
    atomic_write_json(path, receipt)
    protocol.artifact(path, campaign)
    protocol.log(f"extract {where['model']}/{where['seed']}/{where['benchmark']}: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return receipt


def run_job(job: dict[str, Any]) -> None:
    """One slice, or a batch of slices served with one judge."""
    if "batch" in job:
        run_slices(lambda sub, shared: run(sub, shared=shared), job)
    else:
        run(job)


def main() -> int:
    return run_worker(run_job)


if __name__ == "__main__":
    raise SystemExit(main())

"""The generate worker: one slice (model x seed x benchmark) of responses, one atomic file per row.

Job spec (``TRACE_TUI_JOB``): the runner's per-slice job. Read here::

    {"slice": {"model": "<model id>", "seed": 42, "benchmark": "<benchmark key>"},
     "model": {...the model pin: repo_id + revision, or a local model's store_entry...},
     "benchmark": {"key": ..., "rows": N, "route": "trace_validation" | "demo"},
     "settings": {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "max_tokens": 2048,
                  "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
                  "min_image_pixels": 262144, "max_image_pixels": 4194304, ...},
     "output_dir": "outputs/generate/<model>/<seed>/<benchmark>",   # relative to the campaign
     "gpus": [...],
     # optional:
     "backend": "transformers" | "vllm",        # else TRACE_TUI_BACKEND, else vllm where installed (GPU or its CPU build)
     "paths": {"model": <input>, "dataset": <input>, "system_prompt": <input>},
     "prompt_key": "prompt_answer", "image_key": "images", "rows": [indices], "batch_size": N}

Without ``paths`` the inputs follow from the slice (trace_tui.stages.jobs.generation_inputs):
the model's store entry; for TRACE validation the pinned validation parquet and the release's
system prompt file, both checked against the release lock's sha256; for the demo the task
group's parquet and the prompt beside it in ``local:dataset/demo-tasks``. An ``<input>`` is
``{"path": ABS}``, ``{"store": REL}``, ``{"campaign": REL}`` or ``{"entry": NAME[, "file": REL]}``,
optionally with ``"sha256"`` (checked before anything runs).

The seed is the slice's seed for every row (as the release sent the run seed with every
request), so a row's sample depends on its prompt and the seed alone.

Outputs under ``output_dir``: ``rows/<index>.json`` (one per row, written atomically as
soon as it is generated; a rerun resumes at the first missing row) and
``generate.receipt.json`` (content: model revision and computed sha256set, settings and
their hash, dataset sha256, system prompt sha256, every row file's sha256 and response
hash; circumstance: host, times, versions — recorded, never compared).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_batch, atomic_write_json, json_bytes
from trace_tui.common.digest import response_sha256, sha256_bytes, sha256_file, sha256_json, sha256_text
from trace_tui.stages import protocol
from trace_tui.stages.backends import BACKENDS, GenerationBackend, Request, Sampling, build_backend
from trace_tui.stages.dataset import TraceDataset, TraceRow, build_messages, fit_pixels
from trace_tui.stages.jobs import (
    RECEIPT_SCHEMA,
    JobError,
    campaign_dir,
    dir_sha256set,
    generation_inputs,
    input_path,
    output_dir,
    read_json,
    rows_dir,
    run_worker,
    slice_fields,
    writable_rows_dir,
)
from trace_tui.stages.model_view import VIEW_NAME, runtime_model

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "presence_penalty", "frequency_penalty",
                 "repetition_penalty")


def generation_settings(settings: dict[str, Any], seed: int) -> dict[str, Any]:
    """The settings a row's sample depends on (hashed into every row and the receipt)."""
    missing = [k for k in ("temperature", "max_tokens", "min_image_pixels", "max_image_pixels") if k not in settings]
    if missing:
        raise JobError(f"job settings lack {', '.join(missing)}", "the recipe's generation settings must be resolved")
    out = {k: settings[k] for k in SAMPLING_KEYS if k in settings}
    out.update(min_image_pixels=int(settings["min_image_pixels"]), max_image_pixels=int(settings["max_image_pixels"]),
               seed=int(seed))
    return out


def row_file(rows: Path, index: int) -> Path:
    return rows / f"{index:06d}.json"


def choose_backend(job: dict[str, Any]) -> str:
    """The job's backend, else TRACE_TUI_BACKEND, else vLLM where it is installed and can run: on the GPUs
    the job was given, or anywhere where the installed vLLM is its CPU build (the cpu images); else
    transformers."""
    name = job.get("backend") or os.environ.get("TRACE_TUI_BACKEND")
    if name:
        return str(name)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None and (job.get("gpus") or vllm_cpu_build()):
        return "vllm"
    return "transformers"


def vllm_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the distribution vllm-cpu), read without importing it."""
    from importlib import metadata

    try:
        metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


def previous_inputs_sha256(content_inputs: dict[str, Any], model_files: dict[str, str],
                           settings: dict[str, Any]) -> str:
    """The row key the previous release wrote for the same inputs.

    It hashed JSON with ASCII escapes and gave the model a UTF-8 ``sha256set``; the two forms
    differ only where a model file path, a setting or a column name is not ASCII. Rows keyed
    this way are the same generation and are kept on resume."""
    def ascii_sha(obj: object) -> str:
        return sha256_text(json.dumps(obj, sort_keys=True, separators=(",", ":")))

    old = dict(content_inputs, model_sha256set="sha256set:" + sha256_json(model_files),
               settings_sha256=ascii_sha(settings))
    return ascii_sha(old)


def row_proves_itself(rec: object, path: Path, keys: set[str], *, seed: int | None = None) -> bool:
    """Whether a row found on resume may be kept: written under these inputs (``keys``), in the file of its
    own index, for this seed, its response's sha256 its own ``response_sha256``. (What it copied from the
    dataset is compared with the dataset's by the caller.) Anything else is redone, never kept: a resume
    writes a fresh receipt over what it keeps, so a kept row must not be able to carry an edit."""
    if not isinstance(rec, dict) or rec.get("inputs_sha256") not in keys:
        return False
    index = rec.get("index")
    if type(index) is not int or index < 0 or path.name != row_file(path.parent, index).name:
        return False
    if seed is not None and rec.get("seed") != seed:
        return False
    said = rec.get("response_sha256")
    return isinstance(said, str) and said == response_sha256(rec.get("response"))


def proven_rows(rows: Path, keys: set[str], *, seed: int | None = None) -> dict[int, dict[str, Any]]:
    """{index: row} of the rows found that prove themselves (row_proves_itself, without the dataset's facts)."""
    found: dict[int, dict[str, Any]] = {}
    if not rows.is_dir():
        return found
    for f in rows.glob("*.json"):
        try:
            rec = read_json(f)
        except ValueError:
            continue  # unreadable: cannot happen with atomic writes, but redo rather than trust it
        if row_proves_itself(rec, f, keys, seed=seed):
            found[int(rec["index"])] = rec
    return found


def existing_rows(rows: Path, inputs_sha256: str, *, also: tuple[str, ...] = (), seed: int | None = None) -> set[int]:
    """Indices already generated under the same inputs whose rows prove themselves (row_proves_itself);
    any other row is redone."""
    return set(proven_rows(rows, {inputs_sha256, *also}, seed=seed))


def copies_the_dataset(rec: dict[str, Any], facts: dict[str, Any]) -> bool:
    """Whether a row still says what it copied from its dataset row (compared as the JSON the row is)."""
    return all(json.dumps(rec.get(k), sort_keys=True) == json.dumps(v, sort_keys=True) for k, v in facts.items())


def make_request(row: TraceRow, system_prompt: str, sampling: Sampling, seed: int, min_px: int, max_px: int) -> Request:
    return Request(messages=build_messages(system_prompt, row.prompt, len(row.images)),
                   images=[fit_pixels(im, min_px, max_px) for im in row.images], sampling=sampling, seed=seed)


def run(job: dict[str, Any], *, backend: GenerationBackend | None = None) -> dict[str, Any]:
    """Generate every missing row of the job's slice; return the receipt. ``backend`` replaces the built one."""
    campaign = campaign_dir()
    sl = slice_fields(job)
    seed = int(sl["seed"])
    settings = generation_settings(job.get("settings") or {}, seed)
    inputs = generation_inputs(job)
    model_dir = input_path(inputs, "model", want="dir")
    dataset = input_path(inputs, "dataset", want="file", check_sha256=True)
    prompt_file = input_path(inputs, "system_prompt", want="file", check_sha256=True)
    system_prompt = prompt_file.read_text(encoding="utf-8")
    backend_name = choose_backend(job)
    if backend_name not in BACKENDS:
        raise JobError(f"backend {backend_name!r} is not one of {', '.join(BACKENDS)}",
                       "set the job's 'backend' or TRACE_TUI_BACKEND to transformers or vllm")
    prompt_key = job.get("prompt_key") or "prompt_answer"
    image_key = job.get("image_key") or "images"
    out = output_dir(job)
    rows = writable_rows_dir(out)  # never a folder linked out of the campaign

    model_files, model_set = dir_sha256set(model_dir)
    model_spec = inputs.get("model")
    pinned = model_spec.get("validation_sha256set") if isinstance(model_spec, dict) else None
    store_model_dir = model_dir
    model_dir, model_files, model_set = runtime_model(sl["model"], model_dir, model_files, model_set, pinned)
    dataset_sha256 = sha256_file(dataset)
    settings_sha256 = sha256_json(settings)
    content_inputs = {"model_sha256set": model_set, "dataset_sha256": dataset_sha256,
                      "system_prompt_sha256": sha256_text(system_prompt), "settings_sha256": settings_sha256,
                      "prompt_key": prompt_key, "image_key": image_key, "backend": backend_name}
    inputs_sha256 = sha256_json(content_inputs)

    data = TraceDataset(dataset, prompt_key=prompt_key, image_key=image_key)
    n = len(data)
    wanted = sorted(set(job["rows"])) if job.get("rows") is not None else list(range(n))
    bad = [i for i in wanted if not 0 <= i < n]
    if bad:
        raise JobError(f"job rows {bad[:5]} are outside the dataset's {n} rows", "fix the job's 'rows'")
    previous = previous_inputs_sha256(content_inputs, model_files, settings)
    found = proven_rows(rows, {inputs_sha256, previous}, seed=seed)
    present = sorted(set(found) & set(wanted))
    # and what they copied from the dataset is still the dataset's (text columns only: cheap), so an edited
    # answer_gt is redone, not kept
    facts = data.facts(present) if present else {}
    done = {i for i in present if copies_the_dataset(found[i], facts[i])}
    todo = [i for i in wanted if i not in done]
    total = len(wanted)
    where = {"model": sl["model"], "seed": seed, "benchmark": sl["benchmark"]}
    protocol.progress(phase="generate", done=len(done), total=total, **where)
    if todo and done:
        protocol.log(f"generate {where['model']}/{seed}/{where['benchmark']}: {len(done)} of {total} rows present, "
                     f"resuming at row {todo[0]}")
    elif todo:  # a fresh slice: nothing to resume ("resuming at row 0" on a first run)
        protocol.log(f"generate {where['model']}/{seed}/{where['benchmark']}: {total} rows to generate")
    started = time.time()
    if todo and backend is None:
        options: dict[str, Any] = {}
        if backend_name == "vllm":  # one endpoint over the GPUs this job was given
            options["tensor_parallel_size"] = max(1, len(job.get("gpus") or []))
        backend = build_backend(backend_name, str(model_dir), min_pixels=settings["min_image_pixels"],
                                max_pixels=settings["max_image_pixels"], **options)
    sampling = Sampling.from_settings(settings)
    # vLLM schedules a large batch itself; the transformers backend runs rows one by one anyway.
    batch = max(1, int(job.get("batch_size") or (256 if backend_name == "vllm" else 8)))
    count = len(done)
    # A batch's rows are written (tmp + fsync + rename each, the folder fsync'd once) on one writer thread
    # while the next batch generates; progress counts only rows whose file has landed. What was written
    # is remembered (the file's and the response's sha256), so the receipt does not read it back.
    from concurrent.futures import ThreadPoolExecutor

    written: dict[int, tuple[str, str]] = {}

    def write(batch_rows: list[Any], texts: list[str]) -> int:
        files, shas = [], {}
        for r, text in zip(batch_rows, texts, strict=True):
            text_sha256 = sha256_text(text)
            data = json_bytes({
                "index": r.index, "instance_id": r.instance_id, "domain": r.domain, "task": r.task,
                "answer_type": r.answer_type, "answer_gt": r.answer_gt, "seed": seed,
                "response": text, "response_sha256": text_sha256, "inputs_sha256": inputs_sha256})
            files.append((row_file(rows, r.index), data))
            shas[r.index] = (sha256_bytes(data), text_sha256)
        atomic_write_batch(files)
        written.update(shas)
        return len(files)

    pending = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="row-writer") as writer:
        for start in range(0, len(todo), batch):
            chunk = todo[start:start + batch]
            loaded = data.rows(chunk)
            requests = [make_request(r, system_prompt, sampling, seed, settings["min_image_pixels"],
                                     settings["max_image_pixels"]) for r in loaded]
            responses = backend.generate(requests)
            if len(responses) != len(requests):
                raise JobError(f"backend returned {len(responses)} responses for {len(requests)} requests",
                               "a backend must answer every request")
            if pending is not None:  # the previous batch: landed by now, or wait for it
                count += pending.result()
                protocol.progress(phase="generate", done=count, total=total, **where)
            pending = writer.submit(write, loaded, responses)
        if pending is not None:
            count += pending.result()
    if todo:
        protocol.progress(phase="generate", done=count, total=total, **where)

    receipt = build_receipt(job, out, wanted, content_inputs, inputs_sha256, settings, model_dir, model_files,
                            model_set, dataset, dataset_sha256, backend_name, started, written)
    if model_dir != store_model_dir:  # said only where it happened: every other receipt keeps its content
        receipt["content"]["model"]["compatibility_view"] = VIEW_NAME
    path = out / "generate.receipt.json"
    atomic_write_json(path, receipt)
    protocol.artifact(path, campaign)
    return receipt


def build_receipt(job: dict[str, Any], out: Path, wanted: list[int], content_inputs: dict[str, Any],
                  inputs_sha256: str, settings: dict[str, Any], model_dir: Path, model_files: dict[str, str],
                  model_set: str, dataset: Path, dataset_sha256: str, backend_name: str,
                  started: float, written: dict[int, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The slice's receipt. Rows in ``written`` (index -> the sha256 of the file and of the response, as
    this run wrote them) are taken from there; every other wanted row is read back and checked."""
    campaign = campaign_dir()
    rows = rows_dir(out)
    outputs: dict[str, str] = {}
    responses: dict[str, str] = {}
    written = written or {}
    for i in wanted:
        f = row_file(rows, i)
        if i in written:
            outputs[f.relative_to(campaign).as_posix()], responses[str(i)] = written[i]
            continue
        rec = read_json(f)
        if rec.get("inputs_sha256") != inputs_sha256:
            raise JobError(f"{f}: written under other inputs", "rerun the step")
        outputs[f.relative_to(campaign).as_posix()] = sha256_file(f)
        responses[str(i)] = rec["response_sha256"]
    model_in = generation_inputs(job).get("model") or {}
    return {
        "schema": RECEIPT_SCHEMA, "kind": "generate", "step": job.get("step"), "recipe": job.get("recipe"),
        "slice": slice_fields(job),
        "content": {
            "model": {"id": slice_fields(job)["model"], "repo_id": model_in.get("repo_id"),
                      "revision": model_in.get("revision"), "sha256set": model_set, "files": model_files},
            "dataset": {"file": dataset.name, "sha256": dataset_sha256},
            "system_prompt_sha256": content_inputs["system_prompt_sha256"],
            "settings": settings, "settings_sha256": content_inputs["settings_sha256"],
            "backend": backend_name, "inputs_sha256": inputs_sha256,
            "rows": len(wanted), "responses": responses, "responses_sha256": sha256_json(responses),
            "outputs": outputs,
        },
        "circumstance": {"host": platform.node(), "python": sys.version.split()[0], "versions": engine_versions(),
                         "started": started, "finished": time.time(), "duration_s": round(time.time() - started, 3),
                         "pid": os.getpid()},
    }


def engine_versions() -> dict[str, str]:
    """The versions of the engines this worker imported (torch, transformers, vllm): what receipts record."""
    out: dict[str, str] = {}
    for mod in ("torch", "transformers", "vllm", "datasets"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = getattr(m, "__version__", "?")
    return out


def main() -> int:
    return run_worker(run)


if __name__ == "__main__":
    raise SystemExit(main())

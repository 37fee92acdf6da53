"""The demo's prepare step (host): a tiny random Qwen2.5-VL and synthetic TRACE-style tasks, into the store.

Nothing is downloaded. The tiny checkpoint (tokenizer, PIL image processor,
chat template, random weights from a fixed seed) is built locally, given a short
supervised warm-up on the demo's own tasks (``WARM_UP_STEPS`` steps toward
``{"answer": ...}`` replies, so that its sampled replies earn varying TRACE rewards
and the demo's GRPO step has non-zero advantages and gradients to learn from), and
imported as the unpinned entry ``local:model/<name>`` for each of the recipe's local
models; the task groups are written as parquet files in the release's columns,
with the release's system prompt beside them (checked against the lock's
sha256), and imported as ``local:dataset/demo-tasks``. Both are deterministic,
so a rerun finds them in place and skips them.

Job spec: the runner's whole-step job (``models``: the recipe's local models
with their ``store_entry``; ``benchmarks``: the task groups with ``key`` and
``rows``; ``output_dir``). Output: ``prepare.json`` there, naming each entry
and its sha256set.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from trace_tui.common.atomic import atomic_write_bytes, atomic_write_json
from trace_tui.common.digest import sha256_text
from trace_tui.stages import demo_tasks, protocol
from trace_tui.stages.jobs import (
    DEMO_SYSTEM_PROMPT_FILE,
    DEMO_TASKS_ENTRY,
    JobError,
    campaign_dir,
    model_entry_of,
    output_dir,
    run_worker,
    store_dir,
)
from trace_tui.stages.tiny_model import build_tiny_qwen25vl, supervised_warm_up

TINY_MODEL_SEED = 0
TASKS_SEED = 0
# The warm-up: a random tiny model never ends a reply in a JSON answer object (every reward 0, a GRPO
# step that learns nothing); this many supervised steps on the demo's rows make its replies often end
# in {"answer": ...}, mostly with wrong values, so rewards vary honestly. Small images keep it fast.
WARM_UP_STEPS = 60
WARM_UP_LR = 3e-3
WARM_UP_ROWS_PER_GROUP = 4
WARM_UP_MIN_PIXELS = 56 * 56
WARM_UP_MAX_PIXELS = 28 * 28 * 64


def warm_up_examples(groups: list[str], seed: int = TASKS_SEED) -> list[dict[str, Any]]:
    """(prompt, target) pairs from the first rows of each demo task group, as train_smoke renders them:
    the release system prompt, the image in place of ``<image>``, the reply ``{"answer": value}``."""
    import io
    import json

    from PIL import Image

    examples = []
    for group in groups:
        for row in demo_tasks.build_rows(group, seed=seed)[:WARM_UP_ROWS_PER_GROUP]:
            examples.append({
                "messages": [{"role": "system", "content": demo_tasks.RELEASE_SYSTEM_PROMPT},
                             {"role": "user", "content": [{"type": "image"}, {
                                 "type": "text", "text": row["prompt_answer"].removeprefix("<image>")}]}],
                "images": [Image.open(io.BytesIO(im["bytes"])) for im in row["images"]],
                "target": json.dumps({"answer": json.loads(row["answer_gt"])["value"]}),
            })
    return examples


def build_demo_model(out_dir: Path, groups: list[str]) -> Path:
    """The tiny random Qwen2.5-VL after its warm-up (deterministic: fixed seeds, one thread)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest on shared cores, and reproducible
    try:
        with tempfile.TemporaryDirectory(prefix="trace-tui-tiny-raw-") as raw:
            build_tiny_qwen25vl(Path(raw) / "model", seed=TINY_MODEL_SEED)
            return supervised_warm_up(Path(raw) / "model", out_dir, warm_up_examples(groups), steps=WARM_UP_STEPS,
                                      lr=WARM_UP_LR, seed=TINY_MODEL_SEED, min_pixels=WARM_UP_MIN_PIXELS,
                                      max_pixels=WARM_UP_MAX_PIXELS)
    finally:
        torch.set_num_threads(threads)


def check_groups(benchmarks: list[dict[str, Any]]) -> list[str]:
    """The requested task groups must be the demo's own, with the rows it makes."""
    known = {k: demo_tasks.ROWS_PER_GROUP for k, _d, _t in demo_tasks.GROUPS}
    keys = []
    for b in benchmarks:
        key, rows = b.get("key"), b.get("rows")
        if key not in known:
            raise JobError(f"demo task group {key!r} is not one the demo makes",
                           f"recipes/demo.yaml demo_tasks keys must be among {', '.join(known)}")
        if rows is not None and int(rows) != known[key]:
            raise JobError(f"demo task group {key!r} has {known[key]} rows, the recipe says {rows}",
                           f"set rows: {known[key]} in recipes/demo.yaml")
        keys.append(key)
    return keys


def prepare(job: dict[str, Any]) -> dict[str, Any]:
    from trace_tui.release import release_lock
    from trace_tui.store.store import Store

    store = Store(store_dir())
    out = output_dir(job)
    models = job.get("models") or []
    benchmarks = job.get("benchmarks") or [{"key": k, "rows": demo_tasks.ROWS_PER_GROUP} for k, *_ in demo_tasks.GROUPS]
    groups = check_groups(benchmarks)
    expected_prompt = release_lock().trace_validation.system_prompt_sha256
    if sha256_text(demo_tasks.RELEASE_SYSTEM_PROMPT) != expected_prompt:
        raise JobError("the demo's copy of the release system prompt does not match the lock's sha256",
                       "restore trace_tui/stages/demo_tasks.py")
    entries: dict[str, Any] = {}
    total = len(models) + 1
    done = 0
    protocol.progress(phase="prepare", done=0, total=total)
    for m in models:
        name = model_entry_of(m)
        if not store.has(name):
            protocol.log(f"building the tiny random Qwen2.5-VL for {m.get('id')} (seed {TINY_MODEL_SEED}) and "
                         f"warming it up ({WARM_UP_STEPS} supervised steps toward {{\"answer\": ...}} replies)")
            with tempfile.TemporaryDirectory(prefix="trace-tui-tiny-") as tmp:
                build_demo_model(Path(tmp) / "model", groups)
                store.import_local(name, Path(tmp) / "model",
                                   notes={"built_by": "trace_tui.stages.demo_prepare", "seed": TINY_MODEL_SEED,
                                          "warm_up_steps": WARM_UP_STEPS, "warm_up_lr": WARM_UP_LR})
        else:
            protocol.log(f"{name} already in the store")
        rec = store.record(name)
        entries[name] = {"sha256set": rec.sha256set, "files": len(rec.files)}
        done += 1
        protocol.progress(phase="prepare", done=done, total=total)

    rec = store.record(DEMO_TASKS_ENTRY) if store.has(DEMO_TASKS_ENTRY) else None
    have = {f.path for f in rec.files} if rec else set()
    want = {f"{g}.parquet" for g in groups} | {DEMO_SYSTEM_PROMPT_FILE}
    if not want <= have or rec.notes.get("seed") != TASKS_SEED:
        protocol.log(f"writing {len(groups)} demo task groups ({', '.join(groups)})")
        with tempfile.TemporaryDirectory(prefix="trace-tui-tasks-") as tmp:
            folder = Path(tmp) / "tasks"
            # Every group is written (a subset selection still finds the others in place).
            demo_tasks.write_tasks(folder, seed=TASKS_SEED)
            atomic_write_bytes(folder / DEMO_SYSTEM_PROMPT_FILE,
                               demo_tasks.RELEASE_SYSTEM_PROMPT.encode("utf-8"))
            store.import_local(DEMO_TASKS_ENTRY, folder,
                               notes={"built_by": "trace_tui.stages.demo_prepare", "seed": TASKS_SEED})
        rec = store.record(DEMO_TASKS_ENTRY)
    else:
        protocol.log(f"{DEMO_TASKS_ENTRY} already in the store")
    entries[DEMO_TASKS_ENTRY] = {"sha256set": rec.sha256set, "files": {f.path: f.sha256 for f in rec.files}}
    protocol.progress(phase="prepare", done=total, total=total)
    manifest = {"kind": "demo_prepare", "entries": entries, "groups": groups,
                "system_prompt_sha256": expected_prompt, "tiny_model_seed": TINY_MODEL_SEED, "tasks_seed": TASKS_SEED,
                "warm_up_steps": WARM_UP_STEPS}
    path = out / "prepare.json"
    atomic_write_json(path, manifest)
    protocol.artifact(path, campaign_dir())
    return manifest


def main() -> int:
    return run_worker(prepare)


if __name__ == "__main__":
    raise SystemExit(main())

"""Receipts: what a finished job leaves behind to be verified — its outputs record and its receipt.

A receipt's ``content`` (pinned inputs, rows, score, every output's sha256 and size) is hashed into
``content_sha256``; its ``circumstance`` (when, where, on which GPUs) is not, so a job redone on
another machine with the same results has the same content. ``verify --campaign`` reads them.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.campaign_files.presence import presence_record, store_presence
from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import sha256_file_size, sha256_json
from trace_tui.common.safe_write import NotWritten, directory_inside

if TYPE_CHECKING:
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.live import Live
    from trace_tui.engine.planner import PlannedJob
    from trace_tui.runtime.base import ExitInfo

RECEIPT_SCHEMA = "trace-tui-receipt-v1"


def outputs_record(campaign: Path, out_rel: str) -> dict[str, dict[str, Any]]:
    """Every file under the job's output folder (campaign-relative path -> sha256 and bytes),
    leaving out the temporaries of an atomic write that did not finish."""
    outputs: dict[str, dict[str, Any]] = {}
    top = campaign / out_rel
    for p in [top, *sorted(top.rglob("*"))]:
        if p.is_symlink():  # rglob never goes down one: what a worker wrote through it would go unlisted
            raise NotWritten(p, "is a link; a job's outputs are written only inside the campaign, never through a "
                                "link: remove the link")
        if p.is_file() and not (p.name.startswith(".") and p.name.endswith(".tmp")):
            digest, size = sha256_file_size(p)
            outputs[p.relative_to(campaign).as_posix()] = {"sha256": digest, "bytes": size}
    return outputs


def check_artifacts(campaign: Path, outputs: dict[str, dict[str, Any]], artifacts: dict[str, str]) -> str | None:
    """Each artifact the worker announced is written with the sha256 it announced (adds those outside
    the job's own folder to ``outputs``); returns the first problem, or None."""
    for path, digest in artifacts.items():
        got = outputs.get(path)
        if got is None and (campaign / path).is_file():  # an artifact outside the job's own directory
            d, size = sha256_file_size(campaign / path)
            got = outputs[path] = {"sha256": d, "bytes": size}
        if got is None:
            return f"artifact {path} announced but not written"
        if got["sha256"] != digest:
            return f"artifact {path} changed after the worker announced it"
    return None


def short_slices_reason(subs: Iterable[Live]) -> str | None:
    """A whole-step job's slices that did not reach their planned rows (None: every one did).

    The worker exiting 0 is not enough: a slice is complete only when its finished rows (as the
    worker read them from its layout) equal the rows planned for it.
    """
    subs = list(subs)
    planned = {id(x): x.job.total or x.total for x in subs}  # the plan's rows, not what the worker says
    short = [x for x in subs if planned[id(x)] and x.done < planned[id(x)]]
    if not short:
        return None
    names = ", ".join(f"{x.job.model}/{x.job.seed}/{x.job.benchmark} ({x.done}/{planned[id(x)]})" for x in short[:6])
    return (f"{len(short)} of {len(subs)} slices short of their planned rows: {names}"
            + (f" and {len(short) - 6} more" if len(short) > 6 else ""))


def write_receipt(campaign: Campaign, job: PlannedJob, *, rows: int, total: int, score: float | None,
                  artifacts: dict[str, str], subs: Iterable[Live], info: ExitInfo, started_wall: float,
                  gpus: list[int], runtime: str, worker: str | None = None,
                  checkpoint_signatures: list[dict[str, str]] | None = None,
                  store_trust: dict[str, str] | None = None, gaps: Iterable[str] = (),
                  gpu_request: dict[str, Any] | None = None) -> tuple[str | None, str | None]:
    """Write the job's receipt. Returns (its campaign-relative path, None) or (None, the problem).

    ``subs``: a whole-step job's slices as they ended (each with ``job``, ``done``, ``total``, ``score``).
    ``checkpoint_signatures``: the checkpoints the runner signed (folder, signature file, keyid, scheme).
    ``store_trust``: the trust level of each store entry the step read (store.trust), as it stood for this run.
    ``gaps``: what the runtime could not give the step that Docker gives (Charliecloud: no memory limit, ...).
    ``gpu_request``: how the runtime was asked for the step's GPUs (Docker's device request, CDI devices, ...).
    """
    c, step = campaign, job.step
    try:
        outputs = outputs_record(c.path, c.output_rel(step.id, job.slice))
        directory_inside(c.path, c.receipt_path(step.id, job.slice).parent.relative_to(c.path))
    except NotWritten as exc:
        return None, str(exc)
    problem = check_artifacts(c.path, outputs, artifacts)
    if problem is not None:
        return None, problem
    content: dict[str, Any] = {"schema": RECEIPT_SCHEMA, "step": step.id, "kind": step.run[0], "slice": job.slice,
                               "model": job.model, "seed": job.seed, "benchmark": job.benchmark,
                               "input_hash": job.input_hash, "inputs": job.inputs, "rows": rows, "total": total,
                               "score": score, "outputs": outputs}
    if checkpoint_signatures:  # the signature files themselves are among the outputs above
        content["checkpoint_signatures"] = checkpoint_signatures
    subs = list(subs)
    if subs:
        content["slices"] = {x.job.slice: {"model": x.job.model, "seed": x.job.seed, "benchmark": x.job.benchmark,
                                           "input_hash": x.job.input_hash, "rows": x.done, "total": x.total,
                                           "score": x.score} for x in subs}
    finished = time.time()
    circumstance = {"started_at": started_wall, "finished_at": finished,
                    "duration_s": round(finished - started_wall, 3), "host": socket.gethostname(),
                    "runtime": runtime, "gpus": gpus, "exit_code": info.exit_code}
    if worker is not None:  # served in turn with other slices by one worker (a keep_loaded step)
        circumstance["worker"] = worker
    if store_trust:  # circumstance: how far the inputs were trusted here, not what they are (content's hashes)
        circumstance["store_trust"] = dict(sorted(store_trust.items()))
    gaps = list(gaps)
    if gaps:  # where this runtime ran the step with less isolation than the stage contract asks
        circumstance["isolation_gaps"] = gaps
    if gpu_request and gpus:
        circumstance["gpu_request"] = json.loads(json.dumps(gpu_request, default=str))
    path = c.receipt_path(step.id, job.slice)
    atomic_write_json(path, {"content": content, "content_sha256": sha256_json(content),
                             "circumstance": circumstance})
    rel = path.relative_to(c.path).as_posix()
    # What `status` and a resume look at later to know it is all still there (campaign_files.presence).
    noted = presence_record(c.path, rel, outputs, job.input_hash)
    with c._mutex:
        store_presence(c.db, step.id, job.slice, rel, noted)
    return rel, None

"""Stage worker: the release evaluator's inputs prepared from the read-only store (network none).

    python -m trace_tui.stages.eval_prepare

Runs in the score image (GPU flavour, which carries the release evaluator at its
pinned commit). From the store only:

1. the dataset view: each benchmark's evaluation file (fetched by `trace-tui store
   fetch`, checked against the provenance matrix's md5, sha256 recorded) is linked
   into the campaign's ``evaluator/LMUData/`` under the name VLMEvalKit's dataset reads
   (``<official alias>.tsv``, dataset_link_name), then the release's
   ``prepare_trace_eval_manifest.py`` writes ``trace_eval_v1_dataset_manifest.json``. A benchmark
   published as a Hub dataset repository (EvoChart, CountQA) is read by the release's adapters with
   ``datasets.load_dataset(REPO, split=...)`` under the launcher's HF_HOME (``LMUData/.hf-cache``): its
   store snapshot is also prepared there as the ``datasets`` cache that call reads offline
   (hub_dataset_cache);
2. the models: each model (the selected ones and the Qwen3-32B judge) gets a
   writable view ``evaluator/models/<slug>/`` of links to its store files with its
   ``.trace_model_revision.json`` marker. A model pinned to a Hugging Face commit
   gets the marker ``prepare_trace_eval_models.py download-public`` writes (origin
   public_download, immutable revision = resolved commit = the pin, per-file sha256):
   the store fetched those files at that commit, and there is no network here. A
   user's own checkpoint is registered by the script itself (``register-local``),
   whose revision is its content hash (``sha256set:``, the store's sha256set).
   Then ``prepare_trace_eval_models.py verify --entry SLUG=PATH=REVISION ... --deep``
   checks them all, as the launcher's own validation will.

What the release's launcher keeps under ``rlvr/evaluation/.work`` lives in the campaign
(``evaluator/``, its real path: work_root): the image's root filesystem is read-only, and
vLLM checks an image's resolved path against its ``--allowed-local-media-path``, so no path
the evaluator is given goes through a link. The generation and scoring steps of the same
campaign read this view (release_eval passes the launcher TMP_ROOT=work_root). The scripts' command lines are
data here, in one place each (manifest_argv, register_local_argv, verify_argv,
public_marker), checked against the release's scripts by the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.atomic import atomic_write_bytes, atomic_write_json
from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed, RequirementsError
from trace_tui.stages import protocol
from trace_tui.stages.entry import parse_options
from trace_tui.stages.hub_dataset_cache import cache_hub_dataset
from trace_tui.stages.jobs import WorkerContext, described_models, run_step

if TYPE_CHECKING:
    from collections.abc import Callable

    from trace_tui.release import ReleaseLock
    from trace_tui.store.sources import BenchmarkSource
    from trace_tui.store.store import Store

MANIFEST_SCRIPT = "rlvr/evaluation/scripts/prepare_trace_eval_manifest.py"
MODELS_SCRIPT = "rlvr/evaluation/scripts/prepare_trace_eval_models.py"
WORK = "rlvr/evaluation/.work"  # the launcher's TMP_ROOT in the checkout (only its eval_deps are used there)
EVAL_DEPS = f"{WORK}/eval_deps"
WORK_DIRS = ("LMUData", "models", "results", "logs")
DATASET_MANIFEST = "LMUData/trace_eval_v1_dataset_manifest.json"
# The launcher's default HF_HOME (`${LMUData}/.hf-cache`), also the manifest script's without --hf-home;
# both point HF_DATASETS_CACHE at its datasets/ folder.
HF_HOME = "LMUData/.hf-cache"
MARKER = ".trace_model_revision.json"
MARKER_SCHEMA = "trace-model-revision-v1"


# --------------------------------------------------------------------------- the plan, as data

def dataset_link_name(source: BenchmarkSource) -> str:
    """Where a benchmark's file goes under LMUData: ``<official alias>.tsv``, the file VLMEvalKit's dataset
    reads at the pinned commit (ImageBaseDataset.prepare_tsv; the published file name is only its legacy
    name, which it renames to the alias when the md5 matches: it would move our link, and the record of the
    view would name a link that is gone). A whole-repository snapshot (EvoChart, CountQA: built into TSVs
    by the release's adapters, which read it through ``datasets``, from the cache link_dataset_view
    prepares) goes under its suite key, so the view records its files."""
    if source.kind == "hf-repo":
        return source.key
    if not source.alias:
        raise ValueError(f"benchmark {source.key}: the provenance matrix names no official_alias")
    return f"{source.alias}.tsv"


def register_local_argv(python: str, slug: str, path: str, source: str) -> list[str]:
    """register-local computes the revision itself (the content hash) and writes the marker into PATH."""
    return [python, MODELS_SCRIPT, "register-local", "--slug", slug, "--path", path, "--source", source]


def verify_argv(python: str, entries: list[tuple[str, str, str]], *, deep: bool = True) -> list[str]:
    """`verify --entry SLUG=PATH=IMMUTABLE_REVISION ...` (the launcher verifies with --deep by default)."""
    argv = [python, MODELS_SCRIPT, "verify"]
    for slug, path, revision in entries:
        argv += ["--entry", f"{slug}={path}={revision}"]
    return argv + (["--deep"] if deep else [])


def manifest_argv(python: str, lmu_root: str, manifest: str, *, verify_only: bool = False) -> list[str]:
    return [python, MANIFEST_SCRIPT, "--lmu-root", lmu_root, "--manifest", manifest,
            *(["--verify-only"] if verify_only else [])]


def public_marker(slug: str, repo_id: str, revision: str, file_sha256: dict[str, str], registered_at: str) -> dict:
    """The marker download-public writes for a snapshot of REPO_ID at commit REVISION."""
    return {"schema_version": MARKER_SCHEMA, "slug": slug, "source": repo_id, "immutable_revision": revision,
            "resolved_commit": revision, "model_origin": "public_download", "file_count": len(file_sha256),
            "file_sha256": dict(sorted(file_sha256.items())), "registered_at": registered_at}


def marker_bytes(marker: dict) -> bytes:
    # The script's own encoding (canonical JSON and a newline), so a marker reads the same either way.
    return (json.dumps(marker, ensure_ascii=True, sort_keys=True, separators=(",", ":")) + "\n").encode()


def models_to_prepare(job: dict[str, Any], lock: ReleaseLock, campaign: Path | None) -> list[dict[str, str]]:
    """slug, store entry, immutable revision, source, label for every model the evaluator will read, judge last."""
    from trace_tui.store import model_entry

    pins = {m.id: m for m in lock.models}
    described = {m.get("id"): m for m in described_models(job, campaign) if isinstance(m, dict)}
    # The slices' models (release_eval's jobs) and the resolved ones (eval-setup's, which has no slices).
    ids = list(dict.fromkeys([s["model"] for s in job.get("slices") or []] + list(described)))
    out: list[dict[str, str]] = []
    for mid in ids:
        pin, m = pins.get(mid), described.get(mid) or {}
        if pin is not None:
            out.append({"id": pin.id, "slug": pin.evaluator_slug, "entry": model_entry(pin.repo_id, pin.revision),
                        "revision": pin.revision, "repo_id": pin.repo_id, "source": pin.ref, "label": pin.label})
        elif m.get("store_entry"):
            out.append({"id": mid, "slug": mid, "entry": m["store_entry"], "revision": "", "repo_id": "",
                        "source": "", "label": m.get("label") or mid})
    j = lock.judge
    out.append({"id": j.evaluator_slug, "slug": j.evaluator_slug, "entry": model_entry(j.repo_id, j.revision),
                "revision": j.revision, "repo_id": j.repo_id, "source": f"{j.repo_id}@{j.revision}",
                "label": "Qwen3-32B judge"})
    return list({m["slug"]: m for m in out}.values())


def work_root(campaign: Path) -> Path:
    """The launcher's TMP_ROOT: the campaign's ``evaluator/``, by its real path (no link on the way)."""
    return (Path(campaign) / "evaluator").resolve()


def model_view(work: Path, slug: str) -> Path:
    return work / "models" / slug


def prepared_model_path(work: Path, slug: str) -> Path | None:
    """The prepared model directory (with its revision marker), when this campaign has one."""
    view = model_view(work, slug)
    return view if (view / MARKER).is_file() else None


def marker_revision(work: Path, slug: str) -> str | None:
    """The immutable revision the prepared model's marker records (what the launcher must be given)."""
    return _marker_revision(model_view(work, slug))


# --------------------------------------------------------------------------- I/O

def make_work_dirs(work: Path) -> None:
    """The launcher's writable folders, in the campaign (nothing is written into the evaluator's checkout)."""
    for d in WORK_DIRS:
        (work / d).mkdir(parents=True, exist_ok=True)


def _replace_link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.is_file():
        if link.is_symlink() and os.readlink(link) == str(target):
            return
        link.unlink()
    elif link.is_dir():
        raise RuntimeError(f"{link}: a folder is in the way of the link to {target}")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def hf_home(work: Path) -> Path:
    """The HF_HOME the evaluator's scripts must run with to read the dataset view's Hub datasets."""
    return work / HF_HOME


def link_dataset_view(lmu: Path, store: Store, sources: dict[str, BenchmarkSource], lock: ReleaseLock,
                      step: Callable[[], None] | None = None) -> list[dict]:
    """Each benchmark's store entry linked into LMU under dataset_link_name, and a Hub dataset snapshot also
    prepared as the ``datasets`` cache under ``LMU/.hf-cache``; the record of each."""
    from trace_tui.store import benchmark_entry

    datasets = []
    for b in lock.trace_eval.benchmarks:
        name = benchmark_entry(b.key)
        rec = store.record(name)
        link = lmu / dataset_link_name(sources[b.key])
        _replace_link(link, store.path_of(name))
        datasets.append({"benchmark": b.key, "store_entry": name, "link": f"LMUData/{link.name}",
                         "files": {f.path: f.sha256 for f in rec.files}, "md5": sources[b.key].md5})
        src = sources[b.key]
        if src.kind == "hf-repo":
            cached = cache_hub_dataset(store.root_of(name), src.repo_id, src.revision,
                                       lmu / Path(HF_HOME).name / "datasets")
            datasets[-1]["hf_datasets_cache"] = str(cached.relative_to(lmu.parent))
        if step is not None:
            step()
    return datasets


def script_env(evaluator: str | Path, environ: dict[str, str]) -> dict[str, str]:
    """ENVIRON with the launcher's PYTHONPATH in front (the manifest script imports VLMEvalKit, whose
    dependencies the image installs in the checkout's eval_deps, not in its python)."""
    from trace_tui.evaluator.launcher import script_pythonpath

    return {**environ, "PYTHONPATH": script_pythonpath(os.path.abspath(evaluator), environ.get("PYTHONPATH"))}


def _run(argv: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    protocol.log(f"{what}: {' '.join(argv[1:])}")
    done = subprocess.run(argv, cwd=cwd, env=script_env(cwd, dict(os.environ)), capture_output=True, text=True,
                          check=False)
    for line in (done.stdout + done.stderr).splitlines()[-20:]:
        protocol.log(line, level="output")
    return done


def _manifest_entries(data: object) -> dict[str, dict[str, Any]]:
    """The dataset manifest's per-benchmark receipts by key (`datasets`, an object of objects)."""
    items = data.get("datasets") if isinstance(data, dict) else None
    out: dict[str, dict[str, Any]] = {}
    if isinstance(items, dict):
        return {str(k): v for k, v in items.items() if isinstance(v, dict)}
    for e in items or []:
        if isinstance(e, dict):
            key = e.get("benchmark_id") or e.get("benchmark_key") or e.get("key")
            if key:
                out[str(key)] = e
    return out


def manifest_problems(data: object, lock: ReleaseLock) -> list[str]:
    """Every suite benchmark present in the dataset manifest, with the suite's row count where it says one."""
    entries = _manifest_entries(data)
    problems = []
    for b in lock.trace_eval.benchmarks:
        e = entries.get(b.key)
        if e is None:
            problems.append(f"{b.key}: absent from the dataset manifest")
        elif isinstance(e.get("rows"), int) and e["rows"] != b.rows:
            problems.append(f"{b.key}: {e['rows']} rows, the suite has {b.rows}")
    return problems


def _fail(what: str, ran: subprocess.CompletedProcess[str]) -> None:
    raise CheckFailed(f"{what} exited {ran.returncode}: "
                      + " | ".join((ran.stdout + ran.stderr).strip().splitlines()[-3:]))


def _fail_manifest(manifest: Path, ran: subprocess.CompletedProcess[str]) -> None:
    """The manifest script's refusal, naming the benchmarks it could not prepare and why (its receipts say)."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    failed = {k: v for k, v in _manifest_entries(data).items() if v.get("status") != "ready"}
    if not failed:
        _fail("prepare_trace_eval_manifest.py", ran)
    first = next(iter(failed.values())).get("error") or "not ready"
    raise CheckFailed(f"prepare_trace_eval_manifest.py exited {ran.returncode}: {len(failed)} of 24 benchmarks not "
                      f"prepared ({', '.join(sorted(failed)[:6])}{' …' if len(failed) > 6 else ''}); first error: "
                      f"{str(first).splitlines()[0][:300]}")


def _marker_revision(view: Path) -> str | None:
    try:
        data = json.loads((view / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("immutable_revision") if isinstance(data, dict) else None


def prepare(job: dict[str, Any], campaign: Path, store_root: Path, evaluator: Path, *,
            only_missing: bool = False, report: bool = True) -> dict[str, Any]:
    """The dataset view and the model markers; returns the record of what was prepared.

    ``only_missing``: keep a dataset manifest and markers already made for the same revisions (the
    release_eval steps call this at their start, so a campaign is prepared once, in the campaign).
    Raises CheckFailed / RequirementsError with one line naming the cause.
    """
    from trace_tui.evaluator.launcher import local_source
    from trace_tui.release import release_lock
    from trace_tui.store import Store, benchmark_entry, fix_command
    from trace_tui.store.sources import PROVENANCE, benchmark_sources

    lock = release_lock()
    store = Store(store_root)
    python = sys.executable
    work = work_root(campaign)
    make_work_dirs(work)

    # The provenance matrix the evaluator carries must be the published one.
    prov_path = evaluator / PROVENANCE
    if not prov_path.is_file():
        raise CheckFailed(f"{prov_path}: absent (the image's evaluator is incomplete: rebuild it)")
    want = lock.published_hash("provenance").sha256
    got = sha256_file(prov_path)
    if got != want:
        raise CheckFailed(f"{prov_path}: sha256 {got[:12]}… is not the published {want[:12]}… "
                          "(the image's evaluator is not at the pinned commit: rebuild it)")
    sources = benchmark_sources(prov_path.read_bytes())
    models = models_to_prepare(job, lock, campaign)
    total = len(lock.trace_eval.benchmarks) + len(models) + 2
    done = 0

    def step(phase: str) -> None:
        nonlocal done
        done += 1
        if report:
            protocol.progress(phase=phase, done=done, total=total)

    missing = [benchmark_entry(b.key) for b in lock.trace_eval.benchmarks if store.record(benchmark_entry(b.key)) is None]
    missing += [m["entry"] for m in models if store.record(m["entry"]) is None]
    if missing:
        raise RequirementsError(f"the store lacks {len(missing)} entr{'y' if len(missing) == 1 else 'ies'} the "
                                "release evaluator reads: " + ", ".join(missing[:4]) + (" …" if len(missing) > 4 else ""),
                                hint=f"run `{fix_command(missing[0])}` or `trace-tui --recipe eval-setup`")

    # 1. the dataset view: links into the store, then the evaluator's own manifest
    lmu = work / "LMUData"
    datasets = link_dataset_view(lmu, store, sources, lock, step=lambda: step("datasets"))
    manifest = work / DATASET_MANIFEST
    if not (only_missing and manifest.is_file()):
        ran = _run(manifest_argv(python, str(lmu), str(manifest)), evaluator, "dataset manifest")
        if ran.returncode != 0 or not manifest.is_file():
            _fail_manifest(manifest, ran)
    problems = manifest_problems(json.loads(manifest.read_text(encoding="utf-8")), lock)
    if problems:
        raise CheckFailed(f"{DATASET_MANIFEST}: " + "; ".join(problems[:5]))
    step("datasets")

    # 2. the models: a writable view of links into the store, with the evaluator's revision marker
    registered = []
    for m in models:
        rec = store.record(m["entry"])
        src = store.root_of(m["entry"])
        view = model_view(work, m["slug"])
        revision = m["revision"] or rec.sha256set
        source = m["source"] or local_source(m["slug"], rec.sha256set)
        if not (only_missing and _marker_revision(view) == revision):
            view.mkdir(parents=True, exist_ok=True)
            for f in rec.files:
                _replace_link(view / f.path, src / f.path)
            if m["revision"]:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
                atomic_write_bytes(view / MARKER, marker_bytes(public_marker(
                    m["slug"], m["repo_id"], m["revision"], {f.path: f.sha256 for f in rec.files}, stamp)))
            else:
                ran = _run(register_local_argv(python, m["slug"], str(view), source), evaluator,
                           f"register {m['slug']}")
                if ran.returncode != 0 or not (view / MARKER).is_file():
                    _fail(f"register-local {m['slug']}", ran)
                revision = _marker_revision(view) or revision
        registered.append({"model": m["id"], "slug": m["slug"], "store_entry": m["entry"], "revision": revision,
                           "source": source, "marker_sha256": sha256_file(view / MARKER)})
        step("models")
    entries = [(r["slug"], str(model_view(work, r["slug"])), r["revision"]) for r in registered]
    ran = _run(verify_argv(python, entries), evaluator, "verify models")
    if ran.returncode != 0:
        _fail("prepare_trace_eval_models.py verify", ran)
    step("models")
    return {"schema": "trace-tui-eval-prepared-v1", "suite": lock.trace_eval.suite_id,
            "dataset_manifest_sha256": sha256_file(manifest), "datasets": datasets, "models": registered}


def run(job: dict[str, Any], campaign: Path, store_root: Path, evaluator: Path) -> int:
    record = prepare(job, campaign, store_root, evaluator)
    out_dir = campaign / str(job.get("output_dir") or "outputs/prepare")
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = out_dir / "dataset_manifest.json"
    atomic_write_bytes(kept, (work_root(campaign) / DATASET_MANIFEST).read_bytes())
    atomic_write_json(out_dir / "prepared.json", record)
    for p in (kept, out_dir / "prepared.json"):
        protocol.artifact(p, campaign)
    protocol.status("completed", f"{len(record['datasets'])} benchmark files and {len(record['models'])} models "
                    "prepared for the release evaluator")
    return 0


@dataclass(frozen=True)
class EvalPrepareOptions:
    """The command line: no options (a step's job spec says everything)."""


def run_step_job(job: dict[str, Any], context: WorkerContext) -> int:
    campaign, store, evaluator = context.campaign, context.store, context.evaluator
    if not (evaluator / MANIFEST_SCRIPT).is_file():
        protocol.status("failed", f"no release evaluator at {evaluator} (the GPU flavour of the score image "
                        "carries it; build it with `make appliance FLAVOR=gpu`)", exit_code=3)
        return 3

    # a store entry missing, a bad manifest (TraceTuiError) or a stop: one status line (run_step), not a traceback
    return run(job, campaign, store, evaluator)


def main(argv: list[str] | None = None) -> int:
    parse_options(EvalPrepareOptions, argv, prog="eval_prepare")
    return run_step(run_step_job, quiet=False)


if __name__ == "__main__":
    sys.exit(main())

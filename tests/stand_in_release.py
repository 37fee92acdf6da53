"""A release derived from the real one, for the files that cannot be had here, and trace-tui run under its lock.

The release lock publishes hashes of files that are not here and cannot be made: the dataset-v1 parquet
files (the equivalence receipt's sha256, GBs), the 21 benchmark files whose md5 the provenance matrix states,
and the sha256sets of the TRACE checkpoints. A test that fills a store with every entry a recipe reads stands
in for them, and restates their hashes where the trust chain states them:

- the dataset files are the TRACE sample's real rows (tests' TRACE_SAMPLE_DIR): validation the sample
  itself, train the sample cut into as many shards as the lock pins;
- a benchmark file whose md5 the matrix states is a small TSV of its own;
- a pinned model is a few small files the hub stand-in (tests/fake_hub.py) serves at the pinned revision.

The derived release is the real release copy (TRACE_RELEASE_DIR), byte for byte, except three files:
``dataset_equivalence.v1.json`` (each stand-in file's current sha256, size and rows), the provenance
matrix (each stand-in TSV's md5) and ``release_files.v1.json`` (those two files' sha256). The derived lock is
the real lock with the sha256 of the two published files among them, the dataset files' sha256/size/rows and
the checkpoints' published sha256sets restated. Nothing else differs: every entry name, revision, repository,
recipe and the rest of the release are the real ones.

trace-tui runs as an installed copy of this checkout's package (the wheel's layout: ``trace_tui`` with its
``recipe_files``) whose release lock is the derived one: the lock is package data, never a setting.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from trace_tui.common.digest import sha256_file, sha256set
from trace_tui.release import release_lock
from trace_tui.store.names import model_entry
from trace_tui.store.sources import EQUIVALENCE, PROVENANCE, RELEASE_MANIFEST, BenchmarkSource, benchmark_sources

REPO = Path(__file__).resolve().parents[1]
LOCK = release_lock()


@dataclass
class HubRepo:
    """One repository the hub stand-in serves at a pinned revision: {path: bytes}, and which are LFS files."""

    files: dict[str, bytes] = field(default_factory=dict)
    lfs: set[str] = field(default_factory=set)


@dataclass
class StandIns:
    release: Path  # holds rlvr/, the derived release
    data: Path  # the dataset files, under their pinned paths
    benchmarks: Path  # the TSVs of the benchmarks a plain URL serves (imported from a folder)
    hub: dict[tuple[str, str, str], HubRepo]  # (model|dataset, repo id, revision) -> what the hub stand-in serves
    lock: dict  # the derived release lock, as JSON
    sources: dict[str, BenchmarkSource]  # the (derived) provenance matrix's


def model_files(repo_id: str) -> dict[str, bytes]:
    """A pinned model as a few small files of its own (a config and LFS "weights")."""
    weights = hashlib.sha256(repo_id.encode()).digest() * 512
    return {"config.json": json.dumps({"model_type": "qwen2_5_vl", "stands_in_for": repo_id}).encode() + b"\n",
            "model.safetensors": weights}


def _tsv(key: str) -> bytes:
    return f"index\tquestion\tanswer\n0\tstand-in row of {key}\tA\n".encode()


def _dataset_files(sample: Path, data: Path) -> dict[str, Path]:
    """{pinned path: stand-in file}: validation the sample itself, train the sample cut into the pinned shards."""
    import pyarrow.parquet as pq

    out = {}
    table = pq.read_table(sample)
    train = LOCK.dataset.file("train")
    per = -(-table.num_rows // len(train))
    for i, pin in enumerate(train):
        dest = data / pin.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(i * per, per), dest)
        out[pin.path] = dest
    (pin,) = LOCK.dataset.file("validation")
    dest = data / pin.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sample, dest)
    out[pin.path] = dest
    return out


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def derive(real_release: Path, sample: Path, out: Path) -> StandIns:
    """The derived release, the stand-in files and the derived lock under OUT."""
    release = out / "release"
    shutil.copytree(real_release / "rlvr", release / "rlvr")
    for path in release.rglob("*"):  # the shared copy is read-only; this one is rewritten below
        path.chmod(0o755 if path.is_dir() else 0o644)
    lock = json.loads((REPO / "recipes" / "release.lock.json").read_text())

    # the dataset: the receipt's and the lock's current hashes, sizes and rows of the stand-in files
    data = out / "data"
    files = _dataset_files(sample, data)
    receipt_path = release / EQUIVALENCE
    receipt = json.loads(receipt_path.read_text())
    for item in receipt["parquet_files"]:
        stand_in = files[item["path"]]
        sha = sha256_file(stand_in)
        item["current"].update(sha256=sha, lfs_sha256=sha, bytes=stand_in.stat().st_size)
        item["rows"] = _rows(stand_in)
    receipt_path.write_text(json.dumps(receipt, indent=2) + "\n")
    for pin in lock["dataset"]["files"]:
        stand_in = files[pin["path"]]
        pin.update(sha256=sha256_file(stand_in), bytes=stand_in.stat().st_size, rows=_rows(stand_in))

    # the benchmarks: each md5 the provenance matrix states is that of a TSV of its own
    provenance_path = release / PROVENANCE
    provenance = json.loads(provenance_path.read_text())
    for bench in provenance["benchmarks"]:
        checksum = (bench.get("evaluation_artifact") or {}).get("checksum") or {}
        if checksum.get("algorithm") == "md5":
            checksum["value"] = hashlib.md5(_tsv(bench["benchmark_id"])).hexdigest()
    provenance_path.write_text(json.dumps(provenance, indent=2) + "\n")
    sources = benchmark_sources(provenance_path.read_bytes())
    benchmarks = out / "benchmarks"
    benchmarks.mkdir()
    hub: dict[tuple[str, str, str], HubRepo] = {}
    for key, src in sources.items():
        if src.kind == "url":
            (benchmarks / src.filename).write_bytes(_tsv(key))
        elif src.kind == "hf-file":
            repo = hub.setdefault(("dataset", src.repo_id, src.revision), HubRepo())
            repo.files[src.path] = _tsv(key)
        else:  # a whole hub dataset repository: a card and a parquet file, as the hub serves one
            repo = hub.setdefault(("dataset", src.repo_id, src.revision), HubRepo())
            repo.files.update({"README.md": f"# {key}\n".encode(),
                               "data/test-00000-of-00001.parquet": b"PAR1" + key.encode() * 64 + b"PAR1"})
            repo.lfs.add("data/test-00000-of-00001.parquet")

    # the release manifest states the two rewritten files' sha256; the lock publishes the manifest's and the
    # matrix's
    manifest_path = release / RELEASE_MANIFEST
    manifest = json.loads(manifest_path.read_text())
    rewritten = {EQUIVALENCE: sha256_file(receipt_path), PROVENANCE: sha256_file(provenance_path)}
    for item in manifest["files"]:
        item["sha256"] = rewritten.get(f"rlvr/{item['path']}", item["sha256"])
    manifest["dataset_release"]["equivalence_receipt"]["sha256"] = rewritten[EQUIVALENCE]
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    rewritten[RELEASE_MANIFEST] = sha256_file(manifest_path)
    for published in lock["published_hashes"]:
        published["sha256"] = rewritten.get(published["path"], published["sha256"])

    # the models: every pinned one served by the hub stand-in; the checkpoints' published sets are theirs
    pins = [(m["repo_id"], m["revision"]) for m in lock["models"]]
    pins += [(p["repo_id"], p["revision"]) for p in lock["training_base_models"].values()]
    pins.append((lock["judge"]["repo_id"], lock["judge"]["revision"]))
    for repo_id, revision in dict.fromkeys(pins):
        hub[("model", repo_id, revision)] = HubRepo(model_files(repo_id), {"model.safetensors"})
    for m in lock["models"]:
        stated = sha256set({p: hashlib.sha256(b).hexdigest() for p, b in model_files(m["repo_id"]).items()})
        m["published_revision_sets"] = {suite: stated for suite in m["published_revision_sets"]}
    return StandIns(release, data, benchmarks, hub, lock, sources)


def installed_copy(dest: Path, lock: dict) -> Path:
    """This checkout's trace_tui package laid out as its wheel installs it (recipe_files a folder of its own),
    with LOCK as its release lock; the folder to put on PYTHONPATH."""
    package = dest / "trace_tui"
    shutil.copytree(REPO / "src" / "trace_tui", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "recipe_files" / "release.lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    return dest


def published_models(lock: dict) -> set[str]:
    return {model_entry(m["repo_id"], m["revision"]) for m in lock["models"] if m["published_revision_sets"]}

"""What each pinned entry consists of, and the hash each of its files must have (pure functions).

The trust chain (SPEC §4): the release lock pins the published hashes and the sha256 of
``rlvr/release_files.v1.json``; that manifest states every other ``rlvr/`` file's sha256.
The dataset's parquet hashes are the equivalence receipt's ``current`` values (carried in the
lock). Benchmark files are checked against the provenance matrix's md5 where it gives one.
Model files are checked against the hub's metadata at the pinned revision (see fetch.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from trace_tui.common.digest import sha256_bytes
from trace_tui.errors import CheckFailed
from trace_tui.store.manifest import Expected
from trace_tui.store.names import dataset_entry, paper_entry, release_entry

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

RELEASE_MANIFEST = "rlvr/release_files.v1.json"
PROVENANCE = "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json"
EQUIVALENCE = "rlvr/dataset_equivalence.v1.json"
_DATA_SUFFIXES = (".json", ".yaml", ".yml", ".txt", ".jinja")


@dataclass(frozen=True)
class FileSpec:
    path: str  # relative to the entry root
    expected: tuple[Expected, ...] = ()
    size: int | None = None
    required: bool = True


@dataclass
class EntryPlan:
    """The files of one pinned entry, with their expected hashes."""

    name: str
    files: list[FileSpec]
    notes: dict[str, Any] = field(default_factory=dict)

    def by_path(self) -> dict[str, FileSpec]:
        return {f.path: f for f in self.files}


def _published(lock: "ReleaseLock") -> dict[str, Expected]:
    return {h.path: Expected(algorithm="sha256", value=h.sha256, source=f"release lock (published {h.role} hash)")
            for h in lock.published_hashes}


def release_required(rel_path: str) -> bool:
    """Files the appliance itself reads (results, suites, receipts, provenance, configs, prompts,
    requirement locks). The vendored trainer and the scripts are carried when the source has them;
    a release copy without them (as the data-only copy) is recorded with those files absent."""
    p = PurePosixPath(rel_path)
    return p.parts[1:2] != ("easyr1_backend",) and p.suffix in _DATA_SUFFIXES


def release_plan(lock: "ReleaseLock", manifest: bytes) -> EntryPlan:
    """Every file of ``rlvr/`` at the pinned commit, from the (already verified) release manifest."""
    published = _published(lock)
    data = json.loads(manifest)
    files = [FileSpec(RELEASE_MANIFEST, (published[RELEASE_MANIFEST],))]
    for item in data.get("files", []):
        path = f"rlvr/{item['path']}"
        exp = [Expected(algorithm="sha256", value=item["sha256"], source=RELEASE_MANIFEST)]
        if path in published and published[path].value != item["sha256"]:
            # The lock's published hash is the root of trust; a manifest that disagrees is its own failure.
            raise CheckFailed(f"{RELEASE_MANIFEST}: states {item['sha256']} for {path}, "
                              f"the published hash is {published[path].value}")
        if path in published:
            exp.append(published[path])
        files.append(FileSpec(path, tuple(exp), required=release_required(path)))
    return EntryPlan(release_entry(lock), files,
                     notes={"commit": lock.upstream.commit, "repository": lock.upstream.repository})


def check_release_manifest(lock: "ReleaseLock", data: bytes, display: str) -> None:
    want = lock.published_hash("release_files_manifest").sha256
    got = sha256_bytes(data)
    if got != want:
        raise CheckFailed(f"{display}: sha256 {got} differs from {want} stated by the release lock",
                          hint="not the release manifest at the pinned commit; nothing was stored")


def paper_plan(lock: "ReleaseLock") -> EntryPlan:
    h = lock.published_hash("paper")
    return EntryPlan(paper_entry(lock), [FileSpec(h.path, (_published(lock)[h.path],))],
                     notes={"branch": lock.upstream.paper_branch,
                            "pinned_by": "published sha256 (the paper lives on a branch, not at the release commit)"})


def dataset_plan(lock: "ReleaseLock", split: str) -> EntryPlan:
    """The split's parquet files at dataset-v1, expected as the equivalence receipt's current hashes."""
    ds = lock.dataset
    files = [FileSpec(f.path, (Expected(algorithm="sha256", value=f.sha256,
                                        source=f"{ds.equivalence_receipt} (current, via the release lock)"),),
                      size=f.bytes) for f in ds.file(split)]
    notes = {
        "tag": ds.tag,
        "measured_revision": ds.measured_revision,
        "historical_revision": ds.historical_revision,
        "historical_sha256": {f.path: f.historical_sha256 for f in ds.file(split)},
        "published_numbers_source": (
            f"the published campaigns ran on {ds.repo_id}@{ds.historical_revision}; the equivalence receipt "
            f"{ds.equivalence_receipt} shows its compared columns equal to these files"),
    }
    return EntryPlan(dataset_entry(lock, split), files, notes=notes)


def equivalence_current(receipt: bytes) -> dict[str, str]:
    """{path: current sha256} from the equivalence receipt, to cross-check the lock's dataset pins."""
    data = json.loads(receipt)
    out = {}
    for item in data.get("parquet_files", []):
        path = item.get("path") or item.get("current", {}).get("path")
        sha = item.get("current", {}).get("sha256")
        if path and sha:
            out[path] = sha
    return out


# -- benchmarks -------------------------------------------------------------------------------

_HF_URL = re.compile(r"^https://huggingface\.co/datasets/(?P<repo>[^/]+/[^/]+)/(?P<mode>resolve|tree)/"
                     r"(?P<rev>[0-9a-f]{40})(?:/(?P<path>.+))?$")


@dataclass(frozen=True)
class BenchmarkSource:
    """Where one benchmark's evaluation file comes from (provenance matrix, ``evaluation_artifact``)."""

    key: str
    kind: str  # "url" (a plain file URL), "hf-file" (one file of a hub dataset), "hf-repo" (a whole dataset snapshot)
    url: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    path: str | None = None
    md5: str | None = None
    alias: str | None = None  # the benchmark's VLMEvalKit dataset name (official_alias)

    @property
    def filename(self) -> str:
        if self.path:
            return PurePosixPath(self.path).name
        assert self.url
        return PurePosixPath(self.url.split("?", 1)[0]).name

    def expected(self) -> tuple[Expected, ...]:
        if self.md5:
            return (Expected(algorithm="md5", value=self.md5, source=f"{PROVENANCE} ({self.key})"),)
        return ()


def benchmark_sources(provenance: bytes) -> dict[str, BenchmarkSource]:
    data = json.loads(provenance)
    out: dict[str, BenchmarkSource] = {}
    for b in data["benchmarks"]:
        art = b.get("evaluation_artifact") or {}
        checksum = art.get("checksum") or {}
        md5 = checksum.get("value") if checksum.get("algorithm") == "md5" else None
        key = b["benchmark_id"]
        alias = b.get("official_alias")
        if "repository" in art:
            repo = art["repository"].removeprefix("https://huggingface.co/datasets/")
            out[key] = BenchmarkSource(key, "hf-file", repo_id=repo, revision=art["repository_revision"],
                                       path=art["path"], md5=md5, alias=alias)
            continue
        url = art["url"]
        m = _HF_URL.match(url)
        if m and m["mode"] == "resolve":
            out[key] = BenchmarkSource(key, "hf-file", repo_id=m["repo"], revision=m["rev"], path=m["path"], md5=md5,
                                       alias=alias)
        elif m:
            out[key] = BenchmarkSource(key, "hf-repo", repo_id=m["repo"], revision=m["rev"], md5=md5, alias=alias)
        else:
            out[key] = BenchmarkSource(key, "url", url=url, md5=md5, alias=alias)
    return out

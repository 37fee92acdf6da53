"""Benchmarks the provenance matrix pins only by a Hugging Face dataset revision (EvoChart and CountQA as whole
repositories, TreeBench's one file without a checksum): fetched, they are hub-stated; carried in a bundle, they
enter a site hub-stated only under a signature it verified, each file checked again against the hash the hub
stated, and only as the repository and revision the matrix names. A benchmark whose md5 the matrix states is
published; one whose file vouches only for itself is local.

The real release copy is in the store (its provenance matrix says where each benchmark comes from); the hub is
the local stand-in of tests/fake_hub.py, serving small files at the matrix's own repositories and revisions
(the real benchmark files are not here).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from fake_hub import FakeHub, hub  # noqa: F401 - the fixture is used by name

from trace_tui.errors import CheckFailed
from trace_tui.release import release_lock
from trace_tui.store import Store, benchmark_entry
from trace_tui.store.fetch import Fetcher
from trace_tui.store.importer import import_benchmark, import_entry_dir, import_release
from trace_tui.store.sources import PROVENANCE, BenchmarkSource, benchmark_sources
from trace_tui.store.trust import HUB_STATED, LOCAL, PUBLISHED, SIGNED_BY, entry_trust

LOCK = release_lock()
KEY = "0" * 64  # the keyid a verified bundle signature names (bundle/importing.py passes it on)
SNAPSHOT = {"README.md": b"---\nlicense: other\n---\n# a chart QA set\n",
            "data/train-00000-of-00001.parquet": b"PAR1" + bytes(range(256)) * 40 + b"PAR1"}
TREEBENCH_TSV = b"index\tquestion\tanswer\n0\tWhich box?\tA\n"


def store_with_release(root: Path, release_dir: Path) -> Store:
    store = Store(root)
    import_release(store, LOCK, release_dir)
    return store


def sources(release_dir: Path) -> dict[str, BenchmarkSource]:
    return benchmark_sources((release_dir / PROVENANCE).read_bytes())


def serve(hub: FakeHub, release_dir: Path) -> None:
    """EvoChart's repository and TreeBench's file at the revisions the provenance matrix pins."""
    srcs = sources(release_dir)
    evo, tree = srcs["evochart"], srcs["treebench"]
    hub.add_repo("dataset", evo.repo_id, evo.revision, dict(SNAPSHOT), {"data/train-00000-of-00001.parquet"})
    hub.add_repo("dataset", tree.repo_id, tree.revision, {tree.path: TREEBENCH_TSV}, set())


@pytest.fixture()
def fetched(hub, tmp_path, trace_release_dir):  # noqa: F811
    serve(hub, trace_release_dir)
    store = store_with_release(tmp_path / "here", trace_release_dir)
    fetcher = Fetcher(store, LOCK)
    for key in ("evochart", "treebench"):
        fetcher.fetch_benchmark(benchmark_entry(key))
    return store


def test_fetched_hub_benchmarks_are_hub_stated(fetched):
    for key in ("evochart", "treebench"):
        record = fetched.record(benchmark_entry(key))
        assert entry_trust(record, LOCK) == HUB_STATED, key
    assert {f.path for f in fetched.record(benchmark_entry("evochart")).files} == set(SNAPSHOT)


def test_a_bundled_hub_benchmark_enters_hub_stated_only_under_a_verified_signature(fetched, tmp_path,
                                                                                     trace_release_dir):
    site = store_with_release(tmp_path / "site", trace_release_dir)
    name = benchmark_entry("evochart")
    folder = fetched.entry_dir(name)
    with pytest.raises(CheckFailed) as err:
        import_entry_dir(site, folder)
    assert "a benchmark the provenance matrix states no file hash for enters a site hub-stated, only from a " \
           "bundle signed by a key the site trusts" in err.value.line()
    assert site.record(name) is None
    record = import_entry_dir(site, folder, signed_by=KEY)
    assert entry_trust(record, LOCK) == HUB_STATED and record.notes[SIGNED_BY] == KEY
    assert record.sha256set == fetched.record(name).sha256set
    assert all(c.ok for c in site.verify([name], deep=True))


def _copy_entry(store: Store, name: str, dest: Path, change) -> Path:  # noqa: ANN001 - change(record dict)
    import shutil

    shutil.copytree(store.entry_dir(name), dest)
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    record = json.loads((dest / "manifest.json").read_text())
    change(record)
    (dest / "manifest.json").write_text(json.dumps(record))
    return dest


def test_a_hub_benchmark_at_another_revision_or_with_other_files_is_refused(fetched, tmp_path, trace_release_dir):
    site = store_with_release(tmp_path / "site", trace_release_dir)
    evo = benchmark_entry("evochart")

    def moved(record: dict) -> None:
        record["revision"] = "9" * 40

    folder = _copy_entry(fetched, evo, tmp_path / "moved" / "e", moved)
    with pytest.raises(CheckFailed, match=r"records dataset repository \S+@9{40}, the provenance matrix pins"):
        import_entry_dir(site, folder, signed_by=KEY)

    tree = benchmark_entry("treebench")

    def extra_file(record: dict) -> None:
        record["files"].append({**record["files"][0], "path": "other.tsv"})

    folder = _copy_entry(fetched, tree, tmp_path / "extra" / "t", extra_file)
    (folder / "files" / "other.tsv").write_bytes(TREEBENCH_TSV)
    with pytest.raises(CheckFailed, match="the provenance matrix names the one file"):
        import_entry_dir(site, folder, signed_by=KEY)

    def no_hub_hashes(record: dict) -> None:
        for f in record["files"]:
            f["expected"] = []

    folder = _copy_entry(fetched, tree, tmp_path / "bare" / "t", no_hub_hashes)
    with pytest.raises(CheckFailed, match="does not carry the hub's hash of every file"):
        import_entry_dir(site, folder, signed_by=KEY)
    assert site.record(evo) is None and site.record(tree) is None


def test_a_changed_file_of_a_signed_hub_benchmark_is_refused_against_the_hubs_hash(fetched, tmp_path,
                                                                                  trace_release_dir):
    """The record's own sha256 rewritten to match a changed file: the hub's hash, kept in the record, still
    refuses it."""
    site = store_with_release(tmp_path / "site", trace_release_dir)
    name = benchmark_entry("treebench")
    forged = TREEBENCH_TSV.replace(b"A", b"B")

    def rewrite(record: dict) -> None:
        record["files"][0]["sha256"] = hashlib.sha256(forged).hexdigest()
        record["files"][0]["size"] = len(forged)
        from trace_tui.common.digest import sha256set

        record["sha256set"] = sha256set({f["path"]: f["sha256"] for f in record["files"]})

    folder = _copy_entry(fetched, name, tmp_path / "forged" / "t", rewrite)
    target = folder / "files" / "TreeBench.tsv"
    target.write_bytes(forged)
    with pytest.raises(CheckFailed, match=r"TreeBench\.tsv: git-sha1 .* hub metadata"):
        import_entry_dir(site, folder, signed_by=KEY)
    assert site.record(name) is None


def test_a_benchmark_is_published_only_through_the_provenance_matrix_md5(tmp_path):
    """The md5 the matrix states makes a benchmark file published; a file the matrix states no hash for,
    imported from a folder, vouches only for itself."""
    tsv = tmp_path / "MMStar.tsv"
    tsv.write_bytes(b"index\tquestion\n0\tq\n")
    store = Store(tmp_path / "store")
    stated = BenchmarkSource("mmstar", "url", url="https://example.invalid/MMStar.tsv",
                             md5=hashlib.md5(tsv.read_bytes()).hexdigest())
    assert entry_trust(import_benchmark(store, stated, tsv), LOCK) == PUBLISHED
    unstated = BenchmarkSource("treebench", "hf-file", repo_id="lab/tree", revision="1" * 40, path="TreeBench.tsv")
    tree = tmp_path / "TreeBench.tsv"
    tree.write_bytes(TREEBENCH_TSV)
    assert entry_trust(import_benchmark(store, unstated, tree), LOCK) == LOCAL

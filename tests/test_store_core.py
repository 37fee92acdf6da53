"""The store with real release files and real TRACE instances: import, lookup, verify, tampering."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from trace_tui.common.digest import sha256set
from trace_tui.errors import CheckFailed, RequirementsError, UsageError
from trace_tui.release import release_lock
from trace_tui.store import (
    Store,
    dataset_entry,
    expand_needs,
    missing_entries,
    model_entry,
    parse,
    pinned_entries,
    release_entry,
    store_status,
)
from trace_tui.store.importer import import_dir, import_release
from trace_tui.store.sources import benchmark_sources, release_plan

LOCK = release_lock()
RELEASE = release_entry(LOCK)


@pytest.fixture(scope="module")
def imported(tmp_path_factory, trace_release_dir, trace_sample_dir):
    """One store holding the real release copy and the real sample as an unpinned dataset."""
    home = tmp_path_factory.mktemp("home")
    store = Store(home / "store")
    result = import_dir(store, LOCK, trace_release_dir)
    assert result.refused == []
    store.import_local("local:dataset/trace-sample", trace_sample_dir / "trace-sample.parquet")
    return home, store


def _writable(path: Path) -> None:
    path.chmod(path.stat().st_mode | stat.S_IWUSR)


# -- names ----------------------------------------------------------------------------------

def test_pinned_names_come_from_the_lock():
    names = pinned_entries(LOCK)
    assert RELEASE == "release:maveryn/trace@af32fe0e668eb878e909daef7322ac1c4ae20f64"
    assert model_entry("Qwen/Qwen2.5-VL-3B-Instruct", "66285546d2b821cf421d4f5eb2576359d3770cd3") in names
    assert "model:Qwen/Qwen3-32B@9216db5781bf21249d130ec9da846c4624c16137" in names
    assert dataset_entry(LOCK, "validation") == \
        "dataset:maveryn/trace@4e5b54361360296a855542b40cfd8b7f81b355fe:validation"
    # 8 evaluated models (the training bases are two of them) + the judge
    assert len([n for n in names if n.startswith("model:")]) == 9
    assert len([n for n in names if n.startswith("benchmark:")]) == 24
    for n in names:
        assert parse(n).name == n


@pytest.mark.parametrize("bad", [
    "model:Qwen/Qwen2.5-VL-3B-Instruct@main",  # a branch moves: refused
    "model:Qwen2.5@66285546d2b821cf421d4f5eb2576359d3770cd3",
    "dataset:maveryn/trace@4e5b54361360296a855542b40cfd8b7f81b355fe:test",
    "weights:foo", "local:thing/x", "benchmark:Bad Key",
])
def test_bad_names_are_refused(bad):
    with pytest.raises(UsageError):
        parse(bad)


def test_symbolic_needs_expand_for_a_selection():
    out = expand_needs(["release", "models", "judge", "dataset:validation", "benchmarks", "base-model:7B",
                        "local:model/tiny"],
                       LOCK, models=["trace-qwen2.5-vl-3b", "local:model/demo"], benchmarks=["mmstar"])
    assert out == [RELEASE, "model:maveryn/trace-qwen2.5-vl-3b@2ec2374d5c219e6b12e26bda93d3b3adeb1e30c5",
                   "local:model/demo", "model:Qwen/Qwen3-32B@9216db5781bf21249d130ec9da846c4624c16137",
                   dataset_entry(LOCK, "validation"), "benchmark:mmstar",
                   "model:Qwen/Qwen2.5-VL-7B-Instruct@cc594898137f460bfe9f0759e9844b3ce807cfb5",
                   "local:model/tiny"]
    with pytest.raises(UsageError):
        expand_needs(["base-model:13B"], LOCK)


def test_sha256set_is_canonical_json_of_the_file_map():
    import hashlib

    files = {"b.json": "2" * 64, "a.safetensors": "1" * 64}
    want = hashlib.sha256(json.dumps(files, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert sha256set(files) == f"sha256set:{want}"


# -- the real release copy -----------------------------------------------------------------

def test_release_import_verifies_through_the_trust_chain(imported, trace_release_dir):
    _home, store = imported
    rec = store.record(RELEASE)
    assert rec is not None and rec.pinned and rec.revision == LOCK.upstream.commit
    paths = {f.path for f in rec.files}
    # the data-only copy: every file the appliance reads is present, the code files are recorded absent
    assert "rlvr/evaluation/trace_eval/results.json" in paths
    assert "rlvr/release_files.v1.json" in paths
    assert "rlvr/train.py" in rec.absent and len(paths) + len(rec.absent) == 139
    results = next(f for f in rec.files if f.path.endswith("trace_eval/results.json"))
    assert results.sha256 == LOCK.published_hash("results").sha256
    assert any("release lock" in e.source for e in results.expected)
    root = store.path_of(RELEASE)
    assert (root / "rlvr/evaluation/trace_eval/suite.v1.json").is_file()
    assert rec.sha256set == sha256set({f.path: f.sha256 for f in rec.files})


def test_sample_is_an_unpinned_local_dataset(imported, trace_sample_dir):
    _home, store = imported
    rec = store.record("local:dataset/trace-sample")
    assert rec is not None and not rec.pinned and rec.revision is None and rec.source.type == "local"
    path = store.path_of("local:dataset/trace-sample")
    assert path.name == "trace-sample.parquet" and path.read_bytes() == \
        (trace_sample_dir / "trace-sample.parquet").read_bytes()
    assert store.relpath_of("local:dataset/trace-sample").startswith("entries/local/")
    pq = pytest.importorskip("pyarrow.parquet")  # the stored file is the real dataset, readable as such

    assert pq.read_metadata(path).num_rows == 262


def test_status_and_missing_entries(imported):
    home, _store = imported
    model = model_entry("Qwen/Qwen2.5-VL-3B-Instruct", "66285546d2b821cf421d4f5eb2576359d3770cd3")
    assert store_status(home, [RELEASE, model]) == {RELEASE: True, model: False}
    missing = missing_entries(home, [RELEASE, model, "local:model/tiny"])
    assert [m[0] for m in missing] == [model, "local:model/tiny"]
    assert missing[0][1].startswith(f"trace-tui store fetch --entry {model}")
    assert missing[1][1] == "trace-tui store import --local model/tiny PATH"
    with pytest.raises(RequirementsError, match="missing"):
        Store(home / "store").path_of(model)


def test_nothing_unverified_stays_behind(imported):
    _home, store = imported
    assert not any(store.tmp_dir.iterdir())
    assert store.verify(deep=True) and all(c.ok for c in store.verify(deep=True))


# -- tampering ----------------------------------------------------------------------------------

def test_tampered_source_file_is_refused_with_the_file_named(tmp_path, trace_release_dir):
    src = tmp_path / "release"
    shutil.copytree(trace_release_dir, src)
    target = src / "rlvr/evaluation/trace_validation/results.v1.json"
    _writable(target)
    target.write_bytes(target.read_bytes().replace(b"TRACE validation", b"TRACE Validation", 1))
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed, match=str(target).replace(".", r"\.")) as exc:
        import_release(store, LOCK, src)
    assert "rlvr/release_files.v1.json" in exc.value.message
    assert store.record(RELEASE) is None
    assert not (store.entries_dir / "release").exists() or not any((store.entries_dir / "release").iterdir())
    assert not any(store.tmp_dir.iterdir())


def test_tampered_manifest_breaks_the_chain(tmp_path, trace_release_dir):
    src = tmp_path / "release"
    shutil.copytree(trace_release_dir, src)
    manifest = src / "rlvr/release_files.v1.json"
    _writable(manifest)
    manifest.write_bytes(manifest.read_bytes() + b"\n")
    result = import_dir(Store(tmp_path / "store"), LOCK, src)
    assert result.imported == []
    assert result.refused[0][0] == RELEASE and str(manifest) in result.refused[0][1]
    assert "release lock" in result.refused[0][1]


def test_missing_required_release_file_is_refused(tmp_path, trace_release_dir):
    src = tmp_path / "release"
    shutil.copytree(trace_release_dir, src)
    (src / "rlvr/evaluation/trace_eval/suite.v1.json").unlink()
    with pytest.raises(CheckFailed, match="suite.v1.json: missing"):
        import_release(Store(tmp_path / "store"), LOCK, src)


def test_half_copied_source_file_is_refused(tmp_path, trace_release_dir):
    src = tmp_path / "release"
    shutil.copytree(trace_release_dir, src)
    target = src / "rlvr/evaluation/trace_eval/results.json"
    _writable(target)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckFailed, match="results.json"):
        import_release(Store(tmp_path / "store"), LOCK, src)


def test_tampering_in_the_store_is_found_by_deep_verify(tmp_path, trace_release_dir, trace_sample_dir):
    store = Store(tmp_path / "store")
    import_release(store, LOCK, trace_release_dir)
    store.import_local("local:dataset/trace-sample", trace_sample_dir / "trace-sample.parquet")
    stored = store.path_of("local:dataset/trace-sample")
    assert not os.access(stored, os.W_OK) or os.geteuid() == 0  # stored read-only
    _writable(stored)
    with open(stored, "r+b") as fh:  # same size, different bytes: only a rehash sees it
        fh.seek(1000)
        b = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([b[0] ^ 0xFF]))
    # left writable, the file is flagged without a rehash
    writable = store.check("local:dataset/trace-sample")
    assert not writable.ok and "writable (mode 0644)" in writable.problems[0]
    os.chmod(stored, 0o444)  # read-only again: same size, same mode, other bytes
    shallow = {c.name: c for c in store.verify()}
    assert shallow["local:dataset/trace-sample"].ok
    deep = {c.name: c for c in store.verify(deep=True)}
    assert deep[RELEASE].ok
    bad = deep["local:dataset/trace-sample"]
    assert not bad.ok and str(stored) in bad.problems[0] and "sha256" in bad.problems[0]

    # a truncated file and a stray file are found without rehashing
    suite = store.root_of(RELEASE) / "rlvr/evaluation/trace_eval/suite.v1.json"
    _writable(suite)
    suite.write_bytes(b"{}")
    (store.root_of(RELEASE) / "rlvr/extra.txt").write_text("x")
    chk = store.check(RELEASE)
    assert not chk.ok and any(str(suite) in p and "bytes" in p for p in chk.problems)
    assert any("extra.txt: not in the manifest" in p for p in chk.problems)
    assert not store.has(RELEASE)


def test_broken_manifest_is_reported_not_raised(tmp_path, trace_sample_dir):
    store = Store(tmp_path / "store")
    store.import_local("local:dataset/s", trace_sample_dir / "trace-sample.parquet")
    manifest = store.entry_dir("local:dataset/s") / "manifest.json"
    manifest.write_text("{not json")
    assert store.has("local:dataset/s") is False
    assert not store.check("local:dataset/s").ok


# -- local imports -------------------------------------------------------------------------------

def test_local_model_folder_import_and_reimport(tmp_path):
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text('{"a": 1}')
    (model / "sub").mkdir()
    (model / "sub" / "w.bin").write_bytes(b"\0" * 100)
    (model / ".cache" / "huggingface").mkdir(parents=True)
    (model / ".cache" / "huggingface" / "x").write_text("ignored")
    store = Store(tmp_path / "store")
    rec = store.import_local("local:model/tiny", model)
    assert sorted(f.path for f in rec.files) == ["config.json", "sub/w.bin"]
    assert store.path_of("local:model/tiny").is_dir()
    (model / "config.json").write_text('{"a": 2}')
    rec2 = store.import_local("local:model/tiny", model)
    assert rec2.sha256set != rec.sha256set
    assert (store.path_of("local:model/tiny") / "config.json").read_text() == '{"a": 2}'
    assert all(c.ok for c in store.verify(deep=True))
    with pytest.raises(UsageError, match="no such file"):  # bad input (exit 2), as for `store import DIR`
        store.import_local("local:model/none", tmp_path / "nope")


def test_identical_files_share_one_blob(tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(b"same bytes")
    store = Store(tmp_path / "store")
    store.import_local("local:dataset/one", a)
    store.import_local("local:dataset/two", a)
    one, two = store.path_of("local:dataset/one"), store.path_of("local:dataset/two")
    assert one.stat().st_ino == two.stat().st_ino


# -- datasets and benchmarks from files a user has ----------------------------------------------

def _lock_with_dataset(files: dict[str, bytes], split: str = "validation"):
    """The release lock with its dataset pin pointed at small files (the real parquet files are GBs)."""
    import hashlib

    ds = LOCK.dataset
    pinned = [f.model_copy(update={"path": p, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest(),
                                   "split": split})
              for p, b, f in zip(files, files.values(), ds.files)]
    return LOCK.model_copy(update={"dataset": ds.model_copy(update={"files": pinned})})


def test_dataset_directory_import_checks_the_equivalence_hashes(tmp_path):
    files = {"data/validation/v.parquet": b"PAR1 validation PAR1"}
    lock = _lock_with_dataset(files)
    src = tmp_path / "ds"
    (src / "data/validation").mkdir(parents=True)
    (src / "data/validation/v.parquet").write_bytes(files["data/validation/v.parquet"])
    store = Store(tmp_path / "store")
    result = import_dir(store, lock, src)
    name = dataset_entry(lock, "validation")
    assert [r.name for r in result.imported] == [name] and result.refused == []
    rec = store.record(name)
    assert rec.notes["historical_revision"] == LOCK.dataset.historical_revision
    assert "published campaigns ran on" in rec.notes["published_numbers_source"]
    assert store.path_of(name).name == "v.parquet"
    (src / "data/validation/v.parquet").write_bytes(b"PAR1 tampered!!!!! PAR1")
    store.remove(name)
    result = import_dir(store, lock, src)
    assert result.refused and str(src / "data/validation/v.parquet") in result.refused[0][1]
    assert store.record(name) is None


def test_benchmark_sources_follow_the_provenance_matrix(trace_release_dir):
    srcs = benchmark_sources((trace_release_dir / "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json")
                             .read_bytes())
    assert set(srcs) == {b.key for b in LOCK.trace_eval.benchmarks}
    assert srcs["mmstar"].kind == "url" and srcs["mmstar"].md5 == "e1ecd2140806c1b1bbf54b43372efb9e"
    assert srcs["mmstar"].filename == "MMStar.tsv"
    assert srcs["erqa"].kind == "hf-file" and srcs["erqa"].repo_id == "lmms-lab-si/EASI-Leaderboard-Data"
    assert srcs["treebench"].kind == "hf-file" and srcs["treebench"].md5 is None
    assert srcs["evochart"].kind == "hf-repo" and srcs["evochart"].revision.startswith("7ad141b2")


def test_benchmark_file_import_checks_md5(tmp_path, imported, trace_release_dir):
    import hashlib

    _home, store = imported
    srcs = benchmark_sources((store.root_of(RELEASE) / "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json")
                             .read_bytes())
    src = tmp_path / "bench"
    src.mkdir()
    (src / "MMStar.tsv").write_text("index\tquestion\n0\twhat?\n")  # not the published file
    result = import_dir(store, LOCK, src)
    assert result.imported == []
    assert result.refused[0][0] == "benchmark:mmstar"
    assert "MMStar.tsv: md5" in result.refused[0][1] and srcs["mmstar"].md5 in result.refused[0][1]
    assert hashlib.md5((src / "MMStar.tsv").read_bytes()).hexdigest() in result.refused[0][1]


def test_import_of_an_unrecognised_folder_names_it(tmp_path):
    (tmp_path / "x").mkdir()
    result = import_dir(Store(tmp_path / "store"), LOCK, tmp_path / "x", only=[RELEASE])
    assert result.refused == [(RELEASE, f"{tmp_path / 'x'}: holds nothing recognisable as {RELEASE}")]


def test_release_plan_marks_only_data_files_required(trace_release_dir):
    plan = release_plan(LOCK, (trace_release_dir / "rlvr/release_files.v1.json").read_bytes())
    required = {f.path for f in plan.files if f.required}
    assert "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json" in required
    assert "rlvr/configs/trace-qwen2.5-vl-7b.yaml" in required
    assert "rlvr/train.py" not in required and "rlvr/easyr1_backend/VENDOR_MANIFEST.v1.json" not in required
    assert all((trace_release_dir / p).is_file() for p in required)


def test_staging_left_by_a_killed_process_is_cleaned(tmp_path, trace_sample_dir):
    store = Store(tmp_path / "store")
    stale = store.tmp_dir / "model-deadbeef0000"
    (stale / "files").mkdir(parents=True)
    (stale / "files" / "half.safetensors").write_bytes(b"\0" * 10)
    (store.tmp_dir / "model-deadbeef0000.lock").write_text("")  # its owner is gone: nobody holds the lock
    store.import_local("local:dataset/s", trace_sample_dir / "trace-sample.parquet")
    assert list(store.tmp_dir.iterdir()) == []


def test_dataset_pins_match_the_equivalence_receipt_in_the_store(imported):
    from trace_tui.store.importer import dataset_plan_checked

    _home, store = imported
    for split, count in (("validation", 1), ("train", 16)):
        plan = dataset_plan_checked(store, LOCK, split)
        assert len(plan.files) == count and plan.notes["equivalence_receipt_checked"] is True
    assert plan.notes["historical_revision"] == "e317b746b258630682367cc6a9d87dedd195113c"


def test_a_lock_that_disagrees_with_the_receipt_is_refused(imported):
    from trace_tui.store.importer import dataset_plan_checked

    _home, store = imported
    lock = _lock_with_dataset({"data/validation/trace_rlvr_validation_iid_2000_all1000_seed1042.parquet": b"x"})
    with pytest.raises(CheckFailed, match="dataset_equivalence.v1.json: states 051d1441"):
        dataset_plan_checked(store, lock, "validation")


def test_entries_copied_from_another_store_are_rechecked(tmp_path, imported):
    """A bundle carries entry folders (manifest.json + files/); importing them re-verifies every file."""
    _home, store = imported
    bundle = tmp_path / "bundle" / "store"
    for name in (RELEASE, "local:dataset/trace-sample"):
        src = store.entry_dir(name)
        shutil.copytree(src, bundle / src.relative_to(store.entries_dir))
    other = Store(tmp_path / "other")
    result = import_dir(other, LOCK, tmp_path / "bundle")
    assert sorted(r.name for r in result.imported) == sorted([RELEASE, "local:dataset/trace-sample"])
    assert other.record(RELEASE).sha256set == store.record(RELEASE).sha256set
    assert not other.record("local:dataset/trace-sample").pinned

    copied = bundle / store.entry_dir(RELEASE).relative_to(store.entries_dir) / "files/rlvr/source_map.v1.json"
    _writable(copied)
    copied.write_bytes(copied.read_bytes()[:-2])
    other.remove(RELEASE)
    result = import_dir(other, LOCK, tmp_path / "bundle", only=[RELEASE])
    assert result.imported == [] and str(copied) in result.refused[0][1]

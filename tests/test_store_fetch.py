"""`store fetch` download paths against a local HTTP server (tests/fake_hub.py).

The Hugging Face hub and the upstream repository host are unreachable here, so a small
http.server on 127.0.0.1 plays them, at the narrowest edge: it answers exactly the requests
huggingface_hub 2.x makes for ``model_info``/``dataset_info`` (GET
``/api/{models|datasets}/REPO/revision/REV?blobs=True``), ``get_paths_info`` (POST
``/api/{type}s/REPO/paths-info/REV``) and the metadata HEAD + GET of
``hf_hub_download`` (``/[datasets/]REPO/resolve/REV/PATH``: ``X-Repo-Commit``, ``ETag``;
for LFS files a 302 to a "CDN" on another origin with ``X-Linked-Etag``/``X-Linked-Size``),
with HTTP Range on the CDN; and a raw file host serving ``/OWNER/REPO/COMMIT/PATH`` like
raw.githubusercontent.com. Everything above that edge — huggingface_hub's HTTP client,
our resumable download, verification, staging and the store — is the real code.
"""

from __future__ import annotations

import hashlib

import pytest
from fake_hub import FakeHub, hub  # noqa: F401 - the fixture is used by name

from trace_tui.errors import CheckFailed, RequirementsError
from trace_tui.release import release_lock
from trace_tui.store import Store, dataset_entry, model_entry, release_entry
from trace_tui.store.fetch import Fetcher, FetchProgress, fetch_missing, fetch_order
from trace_tui.store.sources import BenchmarkSource

LOCK = release_lock()
COMMIT = "1" * 40
OTHER = "2" * 40


REPO = "acme/tiny-vl"
WEIGHTS = bytes(range(256)) * 1200  # ~300 KB "safetensors" (an LFS file)
FILES = {"config.json": b'{"model_type": "qwen2_5_vl"}\n', "tokenizer_config.json": b'{"a": 1}\n',
         "model.safetensors": WEIGHTS}


def _tiny_model(hub: FakeHub, **kw) -> str:
    hub.add_repo("model", REPO, COMMIT, dict(FILES), {"model.safetensors"}, **kw)
    return model_entry(REPO, COMMIT)


def test_model_fetch_verifies_each_file_against_hub_metadata(hub, tmp_path):
    name = _tiny_model(hub)
    store = Store(tmp_path / "store")
    events: list[FetchProgress] = []
    rec = Fetcher(store, LOCK, on_progress=events.append).fetch(name)
    assert rec.source.type == "huggingface" and rec.revision == COMMIT
    by = {f.path: f for f in rec.files}
    assert by["model.safetensors"].expected[0].algorithm == "sha256"
    assert by["model.safetensors"].sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    assert by["config.json"].expected[0].algorithm == "git-sha1"
    assert rec.sha256set.startswith("sha256set:")
    root = store.path_of(name)
    assert (root / "model.safetensors").read_bytes() == WEIGHTS
    stored = {e.file for e in events if e.phase == "stored"}
    assert stored == set(FILES)
    # the token went to the hub, never to the CDN; the CDN download was a plain GET
    cdn = [r for r in hub.requests if r[1].startswith("/cdn/")]
    assert cdn and all(r[3] is None for r in cdn)
    assert any(r[3] == "Bearer hf_test_secret_token" for r in hub.requests if r[1].startswith("/api/"))
    assert all(c.ok for c in store.verify(deep=True))
    assert not any(store.tmp_dir.iterdir())


def test_interrupted_download_resumes_with_range(hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 32 * 1024)  # several chunks in a small file
    name = _tiny_model(hub)
    store = Store(tmp_path / "store")

    def interrupt(p: FetchProgress) -> None:
        if p.file == "model.safetensors" and p.phase == "download" and p.done >= 100_000:
            raise KeyboardInterrupt  # the user pressed Ctrl-C mid-file

    with pytest.raises(KeyboardInterrupt):
        Fetcher(store, LOCK, on_progress=interrupt).fetch(name)
    part = store.partial_path(name, "model.safetensors")
    kept = part.stat().st_size
    assert 100_000 <= kept < len(WEIGHTS)
    assert store.record(name) is None  # nothing unverified entered the store
    hub.requests.clear()
    rec = Fetcher(store, LOCK).fetch(name)
    ranges = [r[2] for r in hub.requests if r[1].startswith("/cdn/")]
    assert ranges == [f"bytes={kept}-"]
    assert (store.path_of(name) / "model.safetensors").read_bytes() == WEIGHTS
    assert rec.files and not part.exists()


def test_hash_mismatch_is_refused_with_the_file_named(hub, tmp_path):
    name = _tiny_model(hub)
    hub.corrupt.add(hashlib.sha256(WEIGHTS).hexdigest())
    store = Store(tmp_path / "store")
    with pytest.raises(CheckFailed, match=r"acme/tiny-vl@1{40} model\.safetensors: sha256 [0-9a-f]{64} differs "
                                          r"from [0-9a-f]{64} stated by hub metadata \(LFS sha256\)"):
        Fetcher(store, LOCK).fetch(name)
    assert store.record(name) is None
    assert not store.partial_path(name, "model.safetensors").exists()  # complete and wrong: not resumed
    assert not any(store.tmp_dir.iterdir())
    hub.corrupt.clear()
    Fetcher(store, LOCK).fetch(name)
    assert store.has(name)


def test_revision_that_does_not_match_is_refused(hub, tmp_path):
    name = _tiny_model(hub, resolves_to=OTHER)
    with pytest.raises(CheckFailed, match=f"resolves this revision to {OTHER}"):
        Fetcher(Store(tmp_path / "store"), LOCK).fetch(name)
    with pytest.raises(CheckFailed, match="pinned revision does not exist"):
        Fetcher(Store(tmp_path / "store"), LOCK).fetch(model_entry(REPO, "3" * 40))


def test_server_failure_keeps_the_partial_and_names_the_file(hub, tmp_path):
    name = _tiny_model(hub)
    hub.fail_cdn = True
    store = Store(tmp_path / "store")
    with pytest.raises(RequirementsError, match="model.safetensors") as exc:
        Fetcher(store, LOCK).fetch(name)
    assert "secret" not in exc.value.line()  # neither the token nor the signed URL's query
    hub.fail_cdn = False
    Fetcher(store, LOCK).fetch(name)
    assert store.has(name)


def test_offline_and_local_entries_are_not_fetched(hub, tmp_path, monkeypatch):
    with pytest.raises(RequirementsError) as exc:
        Fetcher(Store(tmp_path / "s"), LOCK).fetch("local:model/tiny")
    assert "trace-tui store import --local model/tiny PATH" in exc.value.line()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RequirementsError, match="HF_HUB_OFFLINE"):
        Fetcher(Store(tmp_path / "s"), LOCK).fetch(_tiny_model(hub))


def test_dataset_fetch_checks_the_equivalence_hashes(hub, tmp_path):
    data = {"data/validation/v.parquet": b"PAR1" + b"v" * 5000 + b"PAR1"}
    ds = LOCK.dataset
    pins = [ds.files[-1].model_copy(update={"path": p, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()})
            for p, b in data.items()]
    lock = LOCK.model_copy(update={"dataset": ds.model_copy(update={"files": pins})})
    hub.add_repo("dataset", ds.repo_id, ds.revision, dict(data), set(data))
    store = Store(tmp_path / "store")
    name = dataset_entry(lock, "validation")
    rec = Fetcher(store, lock).fetch(name)
    f = rec.files[0]
    assert {e.source for e in f.expected} == {"hub metadata (LFS sha256)",
                                             "rlvr/dataset_equivalence.v1.json (current, via the release lock)"}
    assert rec.notes["historical_revision"] == ds.historical_revision
    assert store.path_of(name).read_bytes() == data["data/validation/v.parquet"]

    # the hub stating another hash than the equivalence receipt: refused before any download
    hub.add_repo("dataset", ds.repo_id, ds.revision, {"data/validation/v.parquet": b"other"},
                 {"data/validation/v.parquet"})
    store.remove(name)
    with pytest.raises(CheckFailed, match="the equivalence receipt"):
        Fetcher(store, lock).fetch(name)


def test_release_fetch_from_the_raw_host(hub, tmp_path, trace_release_dir):
    """The real release files, served at the pinned commit; the code files this copy lacks answer 404."""
    commit = LOCK.upstream.commit
    for p in (trace_release_dir / "rlvr").rglob("*"):
        if p.is_file():
            hub.raw[f"/maveryn/trace/{commit}/{p.relative_to(trace_release_dir).as_posix()}"] = p.read_bytes()
    store = Store(tmp_path / "store")
    rec = Fetcher(store, LOCK).fetch(release_entry(LOCK))
    assert rec.source.type == "git-raw" and len(rec.files) == 20 and "rlvr/train.py" in rec.absent
    assert all(r[1].startswith(f"/raw/maveryn/trace/{commit}/") for r in hub.requests)
    assert all(r[3] is None for r in hub.requests)  # no token to the repository host

    # a tampered file on the host: refused, named
    store.remove(release_entry(LOCK))
    key = f"/maveryn/trace/{commit}/rlvr/evaluation/trace_eval/suite.v1.json"
    hub.raw[key] = hub.raw[key].replace(b"trace_eval_v1", b"trace_eval_v2", 1)
    with pytest.raises(CheckFailed, match=r"suite\.v1\.json: sha256 .* stated by rlvr/release_files\.v1\.json"):
        Fetcher(store, LOCK).fetch(release_entry(LOCK))
    assert store.record(release_entry(LOCK)) is None


def test_benchmark_fetch_from_a_url_and_from_the_hub(hub, tmp_path):
    tsv = b"index\tquestion\tanswer\n0\tq\ta\n"
    hub.raw["/bench/MMStar.tsv"] = tsv
    md5 = hashlib.md5(tsv).hexdigest()
    hub.add_repo("dataset", "lab/bench", COMMIT, {"sub/ERQA.tsv": tsv}, set())
    sources = {
        "mmstar": BenchmarkSource("mmstar", "url", url=f"{hub.base}/raw/bench/MMStar.tsv", md5=md5),
        "erqa": BenchmarkSource("erqa", "hf-file", repo_id="lab/bench", revision=COMMIT, path="sub/ERQA.tsv",
                                md5=md5),
        "treebench": BenchmarkSource("treebench", "hf-file", repo_id="lab/bench", revision=COMMIT,
                                     path="sub/ERQA.tsv"),
        "blink": BenchmarkSource("blink", "url", url=f"{hub.base}/raw/bench/MMStar.tsv", md5="0" * 32),
    }
    store = Store(tmp_path / "store")
    f = Fetcher(store, LOCK)
    rec = f.fetch_benchmark("benchmark:mmstar", sources)
    assert rec.files[0].path == "MMStar.tsv" and rec.files[0].expected[0].algorithm == "md5"
    assert rec.files[0].sha256 == hashlib.sha256(tsv).hexdigest()
    assert store.path_of("benchmark:mmstar").name == "MMStar.tsv"
    rec = f.fetch_benchmark("benchmark:erqa", sources)
    assert rec.files[0].path == "ERQA.tsv" and {e.algorithm for e in rec.files[0].expected} == {"git-sha1", "md5"}
    rec = f.fetch_benchmark("benchmark:treebench", sources)
    assert "publishes none" in rec.notes["checksum"]
    with pytest.raises(CheckFailed, match="MMStar.tsv: md5 .* stated by rlvr/evaluation/trace_eval/"):
        f.fetch_benchmark("benchmark:blink", sources)


def test_fetch_missing_skips_what_is_there_and_orders_release_first(hub, tmp_path):
    name = _tiny_model(hub)
    store = Store(tmp_path / "store")
    bad = model_entry("acme/missing", COMMIT)
    result = fetch_missing(store, LOCK, [bad, name])
    assert [r.name for r in result.fetched] == [name] and result.present == []
    assert [n for n, _e in result.failed] == [bad] and "repository not found" in result.failed[0][1].line()
    hub.requests.clear()
    result = fetch_missing(store, LOCK, [name])
    assert result.fetched == [] and result.present == [name] and hub.requests == []
    assert fetch_order(["benchmark:mmstar", name, release_entry(LOCK)])[0] == release_entry(LOCK)


# -- the air-gapped path: folders huggingface_hub itself wrote -----------------------------------

def _download_all(hub: FakeHub, repo_id: str, **kw) -> None:
    from huggingface_hub import hf_hub_download

    for f in FILES:
        hf_hub_download(repo_id, f, revision=COMMIT, endpoint=hub.base, **kw)


def test_import_of_a_hub_cache_verifies_against_the_blob_names(hub, tmp_path):
    """The cache layout is written by the real hf_hub_download; import then runs with no server."""
    from trace_tui.store.importer import import_dir

    base = LOCK.training_base_models["3B"]  # a pinned name, recognised without --entry
    hub.add_repo("model", base.repo_id, base.revision, dict(FILES), {"model.safetensors"})
    from huggingface_hub import hf_hub_download

    cache = tmp_path / "hub"
    for f in FILES:
        hf_hub_download(base.repo_id, f, revision=base.revision, endpoint=hub.base, cache_dir=cache)
    store = Store(tmp_path / "store")
    result = import_dir(store, LOCK, cache)
    name = model_entry(base.repo_id, base.revision)
    assert [r.name for r in result.imported] == [name] and result.refused == []
    rec = store.record(name)
    assert {e.algorithm for f in rec.files for e in f.expected} == {"sha256", "git-sha1"}
    assert (store.path_of(name) / "model.safetensors").read_bytes() == WEIGHTS

    # a blob changed after download: refused, naming the snapshot file
    blob = next(p for p in (cache / f"models--{base.repo_id.replace('/', '--')}" / "blobs").iterdir()
                if p.stat().st_size == len(WEIGHTS))
    blob.write_bytes(WEIGHTS[:-1] + b"\0")
    store.remove(name)
    result = import_dir(store, LOCK, cache)
    assert result.imported == [] and "snapshots" in result.refused[0][1]
    assert "model.safetensors: sha256" in result.refused[0][1]


def test_import_of_a_local_dir_download_needs_the_entry_and_checks_the_commit(hub, tmp_path):
    from trace_tui.store.importer import import_dir

    hub.add_repo("model", REPO, COMMIT, dict(FILES), {"model.safetensors"})
    folder = tmp_path / "tiny"
    _download_all(hub, REPO, local_dir=folder)
    store = Store(tmp_path / "store")
    name = model_entry(REPO, COMMIT)
    result = import_dir(store, LOCK, folder, only=[name])
    assert [r.name for r in result.imported] == [name], result.refused
    result = import_dir(store, LOCK, folder, only=[model_entry(REPO, OTHER)])
    assert f"the pin is {OTHER}" in result.refused[0][1]
    (folder / "config.json").write_bytes(b"{}")
    store.remove(name)
    result = import_dir(store, LOCK, folder, only=[name])
    assert str(folder / "config.json") in result.refused[0][1] and "git-sha1" in result.refused[0][1]


def test_a_complete_partial_left_before_staging_is_verified_not_refetched(hub, tmp_path):
    """Killed after the last byte but before the file was staged: the next run asks for the rest
    (HTTP 416: there is none) and verifies what it has."""
    tsv = b"index\tquestion\n0\tq\n"
    hub.raw["/bench/MMStar.tsv"] = tsv
    src = BenchmarkSource("mmstar", "url", url=f"{hub.base}/raw/bench/MMStar.tsv", md5=hashlib.md5(tsv).hexdigest())
    store = Store(tmp_path / "store")
    part = store.partial_path("benchmark:mmstar", "MMStar.tsv")
    part.parent.mkdir(parents=True)
    part.write_bytes(tsv)
    rec = Fetcher(store, LOCK).fetch_benchmark("benchmark:mmstar", {"mmstar": src})
    assert rec.files[0].size == len(tsv)
    assert [r[2] for r in hub.requests] == [f"bytes={len(tsv)}-"]

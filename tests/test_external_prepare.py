"""The eval_prepare stage worker: the release evaluator's dataset view and model markers, from the store.

The release's prepare_trace_eval_manifest.py and prepare_trace_eval_models.py
need the evaluator's environment and the real benchmark files; their stand-ins
(tests/fake_evaluator) speak only the documented interface (the dataset manifest
and the `.trace_model_revision.json` marker, register-local, verify). The store,
its entries, the real provenance matrix (checked against its published sha256),
the links and the worker are real. Benchmark files are small TSVs with the suite's
row counts (the real ones are not redistributable and not here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.engine.events import parse_stage_line
from trace_tui.release import release_lock
from trace_tui.stages import eval_prepare
from trace_tui.store import Store, benchmark_entry, local_entry, model_entry
from trace_tui.store.manifest import Source
from trace_tui.store.sources import PROVENANCE, benchmark_sources

FAKE = Path(__file__).parent / "fake_evaluator"
LOCK = release_lock()
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]


def install_fake_evaluator(where: Path, release_dir: Path) -> Path:
    """The stand-in scripts where the release's are, and the provenance matrix the repository carries."""
    scripts = where / "rlvr" / "evaluation" / "scripts"
    scripts.mkdir(parents=True)
    for f in FAKE.iterdir():
        if f.is_file():
            shutil.copy(f, scripts / f.name)
    (where / PROVENANCE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(release_dir / PROVENANCE, where / PROVENANCE)
    return where


def _entry(store: Store, name: str, files: dict[str, str], revision: str | None, scratch: Path) -> None:
    with store.staging(name) as st:
        for rel, text in files.items():
            src = scratch / name.replace("/", "_").replace(":", "_") / rel
            src.parent.mkdir(parents=True, exist_ok=True)
            src.write_text(text)
            st.add(rel, src)
        st.commit(revision=revision, source=Source(type="local", imported_from="test"))


def fill_store(root: Path, release_dir: Path, models=TWO, *, benchmarks: bool = True, release: bool = False) -> Store:
    """The entries eval-setup fetches: the models at their pins, the judge, the 24 benchmark files."""
    store = Store(root)
    scratch = root.parent / f"{root.name}-src"
    for m in LOCK.models:
        if m.id in models:
            _entry(store, model_entry(m.repo_id, m.revision), {"config.json": json.dumps({"model": m.id})},
                   m.revision, scratch)
    j = LOCK.judge
    _entry(store, model_entry(j.repo_id, j.revision), {"config.json": "{}"}, j.revision, scratch)
    if benchmarks:
        sources = benchmark_sources((release_dir / PROVENANCE).read_bytes())
        for b in LOCK.trace_eval.benchmarks:
            tsv = "index\tquestion\n" + "".join(f"{i}\tq{i}\n" for i in range(b.rows))
            files = ({f"{b.key}.tsv": tsv, "images/0.png": "png"} if sources[b.key].kind == "hf-repo"
                     else {sources[b.key].filename: tsv})
            _entry(store, benchmark_entry(b.key), files, None, scratch)
    if release:
        from trace_tui.store.importer import import_release

        import_release(store, LOCK, release_dir)
    return store


@pytest.fixture()
def setup(tmp_path, trace_release_dir):
    evaluator = install_fake_evaluator(tmp_path / "trace", trace_release_dir)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    store = fill_store(tmp_path / "store", trace_release_dir)
    return tmp_path, evaluator, campaign, store


def _job(tmp_path: Path, models: list) -> Path:
    job = {"step": "prepare-eval", "recipe": "eval-setup", "run_tag": "eval-setup-test",
           "output_dir": "outputs/prepare-eval/_step", "slice": None, "models": models, "slices": []}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    return path


def _pins(ids=TWO) -> list[dict]:
    return [m.model_dump(mode="json") for m in LOCK.models if m.id in ids]


def run_worker(module: str, tmp_path: Path, evaluator: Path, campaign: Path, store: Store, job: Path, *args: str):
    env = {**os.environ, "TRACE_TUI_JOB": str(job), "TRACE_TUI_CAMPAIGN": str(campaign),
           "TRACE_TUI_STORE": str(store.root), "TRACE_TUI_EVALUATOR": str(evaluator)}
    done = subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    return done, [parse_stage_line(line) for line in done.stdout.splitlines()]


def test_the_dataset_view_and_model_markers_come_from_the_store(setup):
    tmp_path, evaluator, campaign, store = setup
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, campaign, store,
                              _job(tmp_path, _pins()))
    status = [e for e in events if e.type == "status"][-1]
    assert status.state == "completed", (status.message, done.stderr[-800:])
    # the view lives in the campaign, linked from the evaluator's .work
    lmu = campaign / "evaluator" / "LMUData"
    assert (evaluator / "rlvr/evaluation/.work/LMUData").resolve() == lmu.resolve()
    manifest = json.loads((lmu / "trace_eval_v1_dataset_manifest.json").read_text())
    assert {e["benchmark_id"] for e in manifest["benchmarks"]} == {b.key for b in LOCK.trace_eval.benchmarks}
    assert {e["status"] for e in manifest["benchmarks"]} == {"ready"}
    assert os.readlink(lmu / "chartqapro.tsv") == str(store.path_of(benchmark_entry("chartqapro")))
    assert (lmu / "evochart").is_symlink() and (lmu / "evochart" / "evochart.tsv").is_file()
    # every model, the judge included, has its marker at the pinned revision
    for m in [m for m in LOCK.models if m.id in TWO] + [LOCK.judge]:
        marker = json.loads((campaign / "evaluator/models" / m.evaluator_slug / ".trace_model_revision.json").read_text())
        assert (marker["slug"], marker["revision"]) == (m.evaluator_slug, m.revision)
        assert marker["source"] == f"{m.repo_id}@{m.revision}" and set(marker["files"]) == {"config.json"}
    prepared = json.loads((campaign / "outputs/prepare-eval/_step/prepared.json").read_text())
    assert len(prepared["datasets"]) == 24 and len(prepared["models"]) == 3
    chart = next(d for d in prepared["datasets"] if d["benchmark"] == "chartqapro")
    assert chart["md5"] == "27653ea8dd8dd3a85bc4f432db96447a" and len(chart["files"]["chartqapro.tsv"]) == 64
    assert {e.path for e in events if e.type == "artifact"} == {"outputs/prepare-eval/_step/prepared.json",
                                                                "outputs/prepare-eval/_step/dataset_manifest.json"}
    progress = [e for e in events if e.type == "progress"]
    assert progress[-1].done == progress[-1].total == 24 + 3 + 2


def test_a_missing_benchmark_file_names_the_fetch(tmp_path, trace_release_dir):
    evaluator = install_fake_evaluator(tmp_path / "trace", trace_release_dir)
    (tmp_path / "campaign").mkdir()
    store = fill_store(tmp_path / "store", trace_release_dir, benchmarks=False)
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, tmp_path / "campaign", store,
                              _job(tmp_path, _pins()))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 3 and status.state == "failed" and "Traceback" not in done.stderr
    assert "the store lacks 24 entries" in status.message and "benchmark:chartqapro" in status.message
    assert "trace-tui store fetch --entry benchmark:chartqapro" in status.message


def test_an_evaluator_not_at_the_pinned_commit_is_refused(setup):
    tmp_path, evaluator, campaign, store = setup
    prov = evaluator / PROVENANCE
    prov.write_text(prov.read_text().replace("ChartQAPro_CoT", "ChartQAPro"))
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, campaign, store,
                              _job(tmp_path, _pins()))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 1 and "is not the published" in status.message and "rebuild" in status.message


def test_the_evaluator_refusing_the_view_is_a_failed_step(setup):
    tmp_path, evaluator, campaign, store = setup
    # a benchmark file the evaluator cannot find (e.g. linked under another name) fails its manifest script
    original = eval_prepare.dataset_link_name
    assert original(benchmark_sources((evaluator / PROVENANCE).read_bytes())["mathvista"]) == "MathVista_MINI.tsv"
    (evaluator / "rlvr/evaluation/scripts/prepare_trace_eval_manifest.py").write_text(
        "import sys\nprint('mathvista: md5 mismatch')\nsys.exit(1)\n")
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, campaign, store,
                              _job(tmp_path, _pins()))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 1 and "prepare_trace_eval_manifest.py exited 1: mathvista: md5 mismatch" in status.message


def test_a_users_checkpoint_is_registered_with_its_revision(setup):
    tmp_path, evaluator, campaign, store = setup
    ckpt = tmp_path / "my-ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    entry = local_entry("model", "my-ckpt")
    store.import_local(entry, ckpt)
    models = [{"id": "my-ckpt", "label": "My checkpoint", "store_entry": entry, "revision": "v1"},
              {"id": "no-revision", "label": "x", "store_entry": entry}]
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, campaign, store,
                              _job(tmp_path, models))
    assert [e for e in events if e.type == "status"][-1].state == "completed", done.stdout[-800:]
    marker = json.loads((campaign / "evaluator/models/my-ckpt/.trace_model_revision.json").read_text())
    assert (marker["revision"], marker["source"]) == ("v1", "local/my-ckpt@v1")
    # without a revision: the content hash of its files (the store's sha256set)
    other = json.loads((campaign / "evaluator/models/no-revision/.trace_model_revision.json").read_text())
    assert other["revision"] == f"sha256set:{store.record(entry).sha256set}"


def test_argument_lists_are_data(trace_release_dir):
    assert eval_prepare.manifest_argv("py") == ["py", "rlvr/evaluation/scripts/prepare_trace_eval_manifest.py"]
    assert eval_prepare.register_local_argv("py", "s", "/p", "r", "o/r@r", "/root") == [
        "py", "rlvr/evaluation/scripts/prepare_trace_eval_models.py", "register-local", "--model-root", "/root",
        "--slug", "s", "--path", "/p", "--revision", "r", "--source", "o/r@r"]
    assert eval_prepare.verify_argv("py", "/root", ["a", "b"], deep=True)[2:] == [
        "verify", "--model-root", "/root", "--only", "a", "b", "--deep"]
    sources = benchmark_sources((trace_release_dir / PROVENANCE).read_bytes())
    names = {k: eval_prepare.dataset_link_name(s) for k, s in sources.items()}
    assert names["evochart"] == "evochart" and names["countqa"] == "countqa"
    assert names["embspatial"] == "EmbSpatialBench.tsv" and names["mme_reasoning"] == "MME_Reasoning.tsv"

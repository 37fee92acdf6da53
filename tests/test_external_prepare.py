"""The eval_prepare stage worker: the release evaluator's dataset view and model markers, from the store.

The release's own prepare_trace_eval_manifest.py and prepare_trace_eval_models.py run
here, unchanged, in the checkout laid out from the pinned sources (tests/fixtures_evaluator.py),
against a store laid out as ours is. Benchmark files are small TSVs with the suite's row
counts and model weights a few bytes (the real ones are not redistributable and not here):
the manifest script is run up to the point where it imports VLMEvalKit's datasets, whose
dependencies only the images' eval_deps hold, and its refusal is asserted (that VLMEvalKit
reads the view's file names is checked in the score image: tests/test_gpu_images.py); the
model script (register-local, verify --deep) runs to the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import evaluator_layout as lay
import pytest

from trace_tui.engine.events import parse_stage_line
from trace_tui.release import release_lock
from trace_tui.stages import eval_prepare
from trace_tui.store import Store, benchmark_entry, local_entry, model_entry, parse
from trace_tui.store.manifest import Expected, Source
from trace_tui.store.sources import PROVENANCE, benchmark_sources

LOCK = release_lock()
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]


def prepared_dataset_view(checkout: Path, campaign: Path) -> Path:
    """The dataset manifest as prepare_trace_eval_manifest.py leaves it after a successful run (it needs the
    real benchmark data, which is not here): the suite's view and rows, written by tests/evaluator_layout.py."""
    lay.use(checkout)
    manifest = campaign / "evaluator" / eval_prepare.DATASET_MANIFEST
    lay.write_dataset_manifest(manifest)
    return manifest


def _entry(store: Store, name: str, files: dict[str, str | bytes], revision: str | None, scratch: Path) -> None:
    """A store entry written directly (the hub cannot be reached here). A model is recorded as `store fetch`
    records one, each file with the hash the hub stated for it (hub-stated trust: a pinned model that only
    vouches for itself is refused by a run's preflight)."""
    import hashlib

    entry = parse(name)
    with store.staging(name) as st:
        for rel, content in files.items():
            src = scratch / name.replace("/", "_").replace(":", "_") / rel
            src.parent.mkdir(parents=True, exist_ok=True)
            data = content if isinstance(content, bytes) else content.encode()
            src.write_bytes(data)
            stated = [Expected(algorithm="sha256", value=hashlib.sha256(data).hexdigest(),
                               source=f"hub metadata (LFS sha256) of {rel}")] if entry.kind == "model" else []
            st.add(rel, src, expected=stated)
        source = (Source(type="huggingface", repo_id=entry.repo_id, repo_type="model", revision=revision)
                  if entry.kind == "model" else Source(type="local", imported_from="test"))
        st.commit(revision=revision, source=source)


# The Hub dataset repositories' split (the release adapters' HF_SPLIT) and a few rows of their columns (the
# fields the adapters read); the store holds the repository snapshot as the Hub serves it: a card and
# data/<split>-00000-of-00001.parquet with an image feature.
HUB_SNAPSHOTS = {
    "evochart": ("train", {"question": ["How many bars?", "Peak year?", "Value in 2020?"], "answer": ["3", "2019", "4.5"],
                           "attribute": ["count", "year", "value"], "is_clear": [True, True, False],
                           "chart_type": ["bar", "line", "bar"]}),
    "countqa": ("test", {"questions": [["How many cups?", "How many spoons?"], ["How many birds?"]],
                         "answers": [["4", "2"], ["7"]], "objects": ["cups, spoons", "birds"],
                         "categories": ["kitchen", "animals"], "is_focused": [True, False],
                         "full_config": ["{}", "{}"]}),
}


def hub_snapshot_files(key: str, scratch: Path) -> dict[str, str | bytes]:
    """A Hub dataset repository snapshot of HUB_SNAPSHOTS[key], its parquet written by `datasets`."""
    import datasets
    from PIL import Image

    split, columns = HUB_SNAPSHOTS[key]
    n = len(next(iter(columns.values())))
    rows = {**columns, "image": [Image.new("RGB", (8 + i, 8), (40 * i, 0, 0)) for i in range(n)]}
    parquet = scratch / f"{key}-{split}.parquet"
    parquet.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image()).to_parquet(str(parquet))
    return {"README.md": f"---\nlicense: other\n---\n# {key}\n", f"data/{split}-00000-of-00001.parquet":
            parquet.read_bytes()}


def fill_store(root: Path, release_dir: Path, models=TWO, *, benchmarks: bool = True, release: bool = False) -> Store:
    """The entries eval-setup fetches: the models at their pins, the judge, the 24 benchmark files."""
    store = Store(root)
    scratch = root.parent / f"{root.name}-src"
    for m in LOCK.models:
        if m.id in models:
            _entry(store, model_entry(m.repo_id, m.revision), {"config.json": json.dumps({"model": m.id}),
                                                                 "model.safetensors": f"weights of {m.id}"},
                   m.revision, scratch)
    j = LOCK.judge
    _entry(store, model_entry(j.repo_id, j.revision), {"config.json": "{}", "model.safetensors": "judge"},
           j.revision, scratch)
    if benchmarks:
        sources = benchmark_sources((release_dir / PROVENANCE).read_bytes())
        for b in LOCK.trace_eval.benchmarks:
            tsv = "index\tquestion\n" + "".join(f"{i}\tq{i}\n" for i in range(b.rows))
            files = (hub_snapshot_files(b.key, scratch) if sources[b.key].kind == "hf-repo"
                     else {sources[b.key].filename: tsv})
            _entry(store, benchmark_entry(b.key), files, None, scratch)
    if release:
        from trace_tui.store.importer import import_release

        import_release(store, LOCK, release_dir)
    return store


@pytest.fixture()
def setup(tmp_path, trace_release_dir, evaluator_checkout):
    evaluator = evaluator_checkout
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


def test_the_dataset_view_is_linked_and_the_evaluators_manifest_script_names_what_it_lacks(setup):
    """The real manifest script over our view: it gets past its own checks (suite, VLMEvalKit pin, paths) to
    materializing each benchmark, which needs VLMEvalKit's dataset packages (the images' eval_deps) and the
    real files; the step fails naming every benchmark and the first cause."""
    tmp_path, evaluator, campaign, store = setup
    done, events = run_worker("trace_tui.stages.eval_prepare", tmp_path, evaluator, campaign, store,
                              _job(tmp_path, _pins()))
    status = [e for e in events if e.type == "status"][-1]
    assert done.returncode == 1 and status.state == "failed" and "Traceback" not in done.stderr
    assert "prepare_trace_eval_manifest.py exited 1: 24 of 24 benchmarks not prepared" in status.message
    assert "blink, chartqapro" in status.message and "first error: " in status.message
    # the view lives in the campaign (nothing in the evaluator's .work), under VLMEvalKit's file names
    lmu = campaign / "evaluator" / "LMUData"
    assert not (evaluator / "rlvr/evaluation/.work/LMUData").exists()
    assert os.readlink(lmu / "ChartQAPro_CoT.tsv") == str(store.path_of(benchmark_entry("chartqapro")))
    assert (lmu / "evochart").is_symlink() and (lmu / "evochart" / "data/train-00000-of-00001.parquet").is_file()
    # the script's own receipts: one per benchmark, each recording why
    manifest = json.loads((lmu / "trace_eval_v1_dataset_manifest.json").read_text())
    assert manifest["dataset_views"] == {"trace_eval_v1": [b.key for b in LOCK.trace_eval.benchmarks]}
    assert {k: v["status"] for k, v in manifest["datasets"].items()} == \
        {b.key: "error" for b in LOCK.trace_eval.benchmarks}
    assert manifest["lmu_data_root"] == str(lmu.resolve())


def test_the_model_markers_pass_the_evaluators_own_deep_verify(setup):
    """With the dataset view prepared, every model's view (links into the store plus its marker) passes the
    release's `prepare_trace_eval_models.py verify --entry ... --deep`, as the launcher will run it."""
    tmp_path, evaluator, campaign, store = setup
    prepared_dataset_view(evaluator, campaign)
    job = json.loads(_job(tmp_path, _pins()).read_text())
    record = eval_prepare.prepare(job, campaign, store.root, evaluator, only_missing=True, report=False)
    for m in [m for m in LOCK.models if m.id in TWO] + [LOCK.judge]:
        marker = json.loads((campaign / "evaluator/models" / m.evaluator_slug / ".trace_model_revision.json").read_text())
        assert (marker["slug"], marker["immutable_revision"], marker["resolved_commit"]) == \
            (m.evaluator_slug, m.revision, m.revision)
        assert marker["source"] == m.repo_id and set(marker["file_sha256"]) == {"config.json", "model.safetensors"}
    assert [r["revision"] for r in record["models"]] == [m.revision for m in LOCK.models if m.id in TWO] + \
        [LOCK.judge.revision]
    # a weight changed after preparation: the evaluator's deep verify names the file
    view = campaign / "evaluator/models/qwen25vl3b-base"
    target = view / "model.safetensors"
    target.unlink()
    target.write_text("other weights")
    argv = eval_prepare.verify_argv(sys.executable, [("qwen25vl3b-base", str(view), LOCK.models[0].revision)])
    done = subprocess.run(argv, cwd=evaluator, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and f"model content hash mismatch: {target}" in done.stderr


def test_a_model_without_weights_is_refused_naming_them(setup):
    tmp_path, evaluator, campaign, store = setup
    prepared_dataset_view(evaluator, campaign)
    view = eval_prepare.model_view(eval_prepare.work_root(campaign), "empty")
    view.mkdir(parents=True)
    (view / "config.json").write_text("{}")
    argv = eval_prepare.register_local_argv(sys.executable, "empty", str(view), "local/empty@" + "0" * 64)
    done = subprocess.run(argv, cwd=evaluator, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and f"missing or empty model weights under {view}" in done.stderr


def test_a_missing_benchmark_file_names_the_fetch(tmp_path, trace_release_dir, evaluator_checkout):
    evaluator = evaluator_checkout
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


def test_a_users_checkpoint_is_registered_by_the_evaluator_with_its_content_revision(setup):
    tmp_path, evaluator, campaign, store = setup
    prepared_dataset_view(evaluator, campaign)
    ckpt = tmp_path / "my-ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"my weights")
    entry = local_entry("model", "my-ckpt")
    store.import_local(entry, ckpt)
    job = json.loads(_job(tmp_path, [{"id": "my-ckpt", "label": "My checkpoint", "store_entry": entry}]).read_text())
    record = eval_prepare.prepare(job, campaign, store.root, evaluator, only_missing=True, report=False)
    marker = json.loads((campaign / "evaluator/models/my-ckpt/.trace_model_revision.json").read_text())
    # register-local's revision is the content hash of the files: the store's sha256set, the same value
    sha256set = store.record(entry).sha256set
    assert (marker["model_origin"], marker["immutable_revision"]) == ("local_registration", sha256set)
    assert marker["source"] == f"local/my-ckpt@{sha256set.split(':')[1]}"
    mine = next(r for r in record["models"] if r["model"] == "my-ckpt")
    assert mine["revision"] == sha256set == eval_prepare.marker_revision(eval_prepare.work_root(campaign), "my-ckpt")


def test_argument_lists_are_data(trace_release_dir):
    assert eval_prepare.manifest_argv("py", "/l", "/l/m.json") == [
        "py", "rlvr/evaluation/scripts/prepare_trace_eval_manifest.py", "--lmu-root", "/l", "--manifest", "/l/m.json"]
    assert eval_prepare.manifest_argv("py", "/l", "/m", verify_only=True)[-1] == "--verify-only"
    assert eval_prepare.register_local_argv("py", "s", "/p", "o/r@" + "a" * 64) == [
        "py", "rlvr/evaluation/scripts/prepare_trace_eval_models.py", "register-local", "--slug", "s", "--path", "/p",
        "--source", "o/r@" + "a" * 64]
    assert eval_prepare.verify_argv("py", [("a", "/m/a", "r1"), ("b", "/m/b", "r2")])[2:] == [
        "verify", "--entry", "a=/m/a=r1", "--entry", "b=/m/b=r2", "--deep"]
    # the launcher's PYTHONPATH (run_trace_eval.sh), for the scripts run outside it
    from trace_tui.evaluator.launcher import script_pythonpath

    assert script_pythonpath("/opt/trace/", "/app") == ("/opt/trace/rlvr/evaluation/.work/eval_deps:/opt/trace/src:"
                                                        "/opt/trace/rlvr/evaluation/scripts:/opt/trace/external/VLMEvalKit:"
                                                        "/opt/trace/external/VLMEvalKit/scripts:/app")
    assert script_pythonpath("/opt/trace", None).endswith("/VLMEvalKit/scripts")
    sources = benchmark_sources((trace_release_dir / PROVENANCE).read_bytes())
    names = {k: eval_prepare.dataset_link_name(s) for k, s in sources.items()}
    assert names["evochart"] == "evochart" and names["countqa"] == "countqa"
    # VLMEvalKit's dataset name (official_alias), not the published file name (chartqapro.tsv, MME_Reasoning.tsv)
    assert names["embspatial"] == "EmbSpatialBench.tsv" and names["mme_reasoning"] == "MME-Reasoning.tsv"
    assert names["chartqapro"] == "ChartQAPro_CoT.tsv" and names["tablevqabench"] == "TableVQABench.tsv"


# --------------------------------------------------------------------------- Hub dataset repositories, offline

ADAPTERS = {"evochart": ("rlvr/evaluation/vlmevalkit_extensions/evochart.py", "EvoChart"),
            "countqa": ("rlvr/evaluation/vlmevalkit_extensions/trace_eval_local_vqa.py", "CountQA")}


def _adapter_load_call(checkout: Path, key: str) -> tuple[str, str, list[str]]:
    """HF_DATASET, HF_SPLIT and the keywords of the load_dataset call in the release adapter's load_data, read
    from its source (importing it needs VLMEvalKit's dependencies, which only the images' eval_deps hold)."""
    import ast

    path, name = ADAPTERS[key]
    cls = next(n for n in ast.parse((checkout / path).read_text()).body if isinstance(n, ast.ClassDef) and n.name == name)
    attrs = {t.id: n.value.value for n in cls.body if isinstance(n, ast.Assign) for t in n.targets
             if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    load_data = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "load_data")
    calls = [c for c in ast.walk(load_data) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "load_dataset"]
    assert len(calls) == 1 and [ast.unparse(a) for a in calls[0].args] == ["self.HF_DATASET"], ast.unparse(load_data)
    assert ast.unparse(next(k.value for k in calls[0].keywords if k.arg == "split")) == "self.HF_SPLIT"
    return attrs["HF_DATASET"], attrs["HF_SPLIT"], sorted(k.arg for k in calls[0].keywords)


_LOAD = """
import json, os, sys
from datasets import load_dataset
hf = load_dataset(sys.argv[1], split=sys.argv[2], token=os.environ.get("HF_TOKEN"))
rows = [{k: (list(v.size) if k == "image" else v) for k, v in ex.items()} for ex in hf]
print(json.dumps(rows))
"""


def test_the_adapters_hub_datasets_load_offline_from_the_view(tmp_path, trace_release_dir, release_evaluator):
    """EvoChart and CountQA: the release's adapters call `datasets.load_dataset(HF_DATASET, split=HF_SPLIT,
    token=...)` (no revision) under the launcher's HF_HOME, with the Hub out of reach (network none,
    HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set by the image). The view built from the store's snapshot makes
    exactly that call return the snapshot's rows and images. Before, only `LMUData/<key>/` was linked and the
    call failed with "Couldn't reach '<repo>' on the Hub"."""
    store = fill_store(tmp_path / "store", trace_release_dir, [], benchmarks=True)
    sources = benchmark_sources((trace_release_dir / PROVENANCE).read_bytes())
    work = eval_prepare.work_root(tmp_path / "campaign")
    lmu = work / "LMUData"
    records = {d["benchmark"]: d for d in eval_prepare.link_dataset_view(lmu, store, sources, LOCK)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HOME=str(eval_prepare.hf_home(work)), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    for key in ADAPTERS:
        repo, split, keywords = _adapter_load_call(release_evaluator, key)
        assert keywords == ["split", "token"]  # no revision, data_files or name: the repository's default
        assert repo == sources[key].repo_id and split == HUB_SNAPSHOTS[key][0], (repo, split)
        assert records[key]["hf_datasets_cache"].endswith(f"/{sources[key].revision}")
        done = subprocess.run([sys.executable, "-c", _LOAD, repo, split], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, (key, done.stderr[-1500:])
        rows = json.loads(done.stdout)
        columns = HUB_SNAPSHOTS[key][1]
        assert [{k: r[k] for k in columns} for r in rows] == [dict(zip(columns, vals)) for vals in zip(*columns.values())]
        assert [r["image"] for r in rows] == [[8 + i, 8] for i in range(len(rows))]

    # A second view over the same store keeps the cache; the manifest script's own HF_HOME is the same folder.
    again = {d["benchmark"]: d for d in eval_prepare.link_dataset_view(lmu, store, sources, LOCK)}
    assert again["evochart"]["hf_datasets_cache"] == records["evochart"]["hf_datasets_cache"]
    assert eval_prepare.hf_home(work) == lmu / ".hf-cache"


def test_the_launcher_runs_with_the_views_hf_home(release_evaluator, tmp_path):
    """The score image sets HF_HOME=/tmp/hf and the launcher keeps an inherited HF_HOME
    (`${HF_HOME:-${LMUData}/.hf-cache}`) and hands it to the scorer (--hf-home): our launch environment points
    it at the view's cache, the launcher's own default."""
    from trace_tui.evaluator import launcher
    from trace_tui.stages.release_eval import launch_environment

    text = (release_evaluator / launcher.LAUNCHER).read_text()
    assert 'export HF_HOME="${HF_HOME:-${LMUData}/.hf-cache}"' in text
    assert 'export LMUData="${LMUData:-${TMP_ROOT}/LMUData}"' in text and 'TMP_ROOT="${TMP_ROOT:-${EVALUATION_ROOT}/.work}"' in text
    work = eval_prepare.work_root(tmp_path / "campaign")
    env = launch_environment({"HF_HOME": "/tmp/hf", "PATH": "/bin", "TMPDIR": "/var/tmp"}, tmp_path, work, "tag",
                             launcher.launcher_env("score", [[0]]))
    assert env["HF_HOME"] == str(work / "LMUData/.hf-cache") and env["PATH"] == "/bin"
    assert env["GPU_GROUPS"] == "0"
    # Everything the launcher writes is in the campaign (TMP_ROOT and what it derives, TMPDIR), not in the
    # checkout (a read-only root in the images); only its dependency target is the checkout's.
    for name in ("TMP_ROOT", "CAMPAIGN_ROOT", "SCORE_ROOT", "LOG_ROOT", "RESULTS_ROOT", "MODEL_ROOT", "LMUData",
                 "DATASET_MANIFEST", "TMPDIR", "LOCAL_ARCHIVE_SPOOL_ROOT"):
        assert env[name].startswith(str(work)) and f'{name}="${{{name}:-' in text.replace("export ", ""), name
    assert env["EVAL_DEPS_ROOT"] == str(tmp_path.resolve() / "rlvr/evaluation/.work/eval_deps")
    assert env["CAMPAIGN_ROOT"] == str(work / "tag")
    # on CPU (no GPU groups) the pool's `vllm serve` gets torch.compile without dynamo (its fixed arguments
    # have no --enforce-eager); on GPUs nothing changes
    assert "TORCHDYNAMO_DISABLE" not in env
    cpu = launch_environment({}, tmp_path, work, "tag", launcher.launcher_env("generate", [[0]]), cpu=True)
    assert cpu["TORCHDYNAMO_DISABLE"] == "1"

"""Our side of `full` against the release's own evaluator scripts, run unchanged.

The checkout is laid out from the pinned sources as the images lay it out
(tests/fixtures_evaluator.py). What needs a GPU (vLLM generation and judge
endpoints) cannot run here; everything else does: the launcher's
`--print-config` with the command line our worker builds, status_trace_eval.py
and verify_trace_eval.py over campaign layouts (written by tests/evaluator_layout.py
with the evaluator's own path and contract functions), the model preparation
script on a store laid out as ours.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import evaluator_layout as lay
import pytest
from fixtures_evaluator import RLVR_TREE, VLMEVALKIT_COMMIT, copy_checkout, run_script, script_env
from test_external_prepare import fill_store

from trace_tui.evaluator import launcher, layout
from trace_tui.release import release_lock
from trace_tui.stages import release_eval
from trace_tui.store import local_entry

LOCK = release_lock()
ALL = [m.id for m in LOCK.models]
SEEDS = list(LOCK.trace_eval.seeds)
ROWS = {b.key: b.rows for b in LOCK.trace_eval.benchmarks}
BASE_OF = {m.id: m.base_model_id for m in LOCK.models if m.base_model_id}


# --------------------------------------------------------------------------- the checkout

def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_checkout_is_the_pinned_evaluator_and_keeps_its_git(release_evaluator, tmp_path):
    """The launcher fingerprints both checkouts with git (HEAD, ls-files): the images must keep their .git."""
    assert _git(release_evaluator, "rev-parse", "HEAD:rlvr") == RLVR_TREE
    assert _git(release_evaluator / "external/VLMEvalKit", "rev-parse", "HEAD") == VLMEVALKIT_COMMIT
    done = run_script(release_evaluator, "trace_eval_evaluator_provenance.py", "--hash-only")
    assert done.returncode == 0 and len(done.stdout.strip()) == 64, done.stderr[-400:]
    bare = copy_checkout(release_evaluator, tmp_path / "no-git")
    shutil.rmtree(bare / "external/VLMEvalKit/.git")
    done = run_script(bare, "trace_eval_evaluator_provenance.py", "--hash-only")
    assert done.returncode != 0 and "VLMEvalKit git checkout does not exist" in done.stderr


def test_setup_verify_only_accepts_our_checkout_up_to_the_gpu_packages(release_evaluator):
    """`setup_trace_eval_env.sh --verify-only` on the laid-out checkout: the pinned VLMEvalKit HEAD and the
    dependency target pass; it stops at the first package only the GPU image has, and names it."""
    done = run_script(release_evaluator, "setup_trace_eval_env.sh", "--verify-only")
    assert "VLMEvalKit HEAD is not pinned" not in done.stderr and "missing official VLMEvalKit" not in done.stderr
    assert done.returncode != 0 and ("vllm" in done.stderr or "No module named" in done.stderr), done.stderr[-600:]


def test_setup_without_verify_only_keeps_our_checkout(release_evaluator, tmp_path):
    """At image build the setup runs without --verify-only after our own VLMEvalKit checkout: it must not
    clone or fetch (HEAD is already the pin) and goes straight to its dependency install, which here
    (no index) fails; the checkout is untouched."""
    mine = copy_checkout(release_evaluator, tmp_path / "trace")
    done = run_script(mine, "setup_trace_eval_env.sh", env=script_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path)))
    assert "Cloning" not in done.stderr and "git clone" not in done.stderr
    assert done.returncode != 0 and "No matching distribution" in (done.stdout + done.stderr), done.stderr[-600:]
    assert _git(mine / "external/VLMEvalKit", "rev-parse", "HEAD") == VLMEVALKIT_COMMIT


# --------------------------------------------------------------------------- --print-config

def _job(models: list[str], seeds: list[int], local: list[dict] | None = None) -> dict:
    return {"slices": [{"model": m, "seed": s, "benchmark": b} for m in models for s in seeds for b in ROWS],
            "models": local or None}


def _print_config(checkout: Path, models: list, seeds: list[int], run_tag: str):
    argv = launcher.launcher_argv(models, seeds, run_tag, deltas=launcher.deltas_for(models, BASE_OF),
                                  print_config=True)
    env = script_env(**launcher.launcher_env("generate", [[0, 1], [2, 3]]))
    return subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_print_config_accepts_full_all_eight_models_three_seeds(release_evaluator, tmp_path, trace_release_dir):
    store = fill_store(tmp_path / "store", trace_release_dir, ALL, benchmarks=False)
    models = release_eval.evaluator_models(_job(ALL, SEEDS), LOCK, store.root)
    done = _print_config(release_evaluator, models, SEEDS, "full-abc")
    assert done.returncode == 0, done.stderr
    printed = launcher.parse_print_config(done.stdout)
    assert launcher.config_mismatches(printed, models, SEEDS, "full-abc", LOCK.trace_eval.suite_id) == []
    assert [m["model"] for m in printed.models] == [m.evaluator_slug for m in LOCK.models]
    # labels with spaces come back whole (the launcher prints them unquoted)
    assert printed.models[0]["label"] == "Qwen2.5-VL-3B Base"
    assert len(printed.deltas) == 6 and printed.deltas[0] == "TRACE Qwen2.5-VL 3B - Qwen2.5-VL-3B Base=" \
        "trace-qwen25vl3b=qwen25vl3b-base"


def test_print_config_accepts_a_local_model_and_a_subset(release_evaluator, tmp_path, trace_release_dir):
    store = fill_store(tmp_path / "store", trace_release_dir, ["qwen2.5-vl-3b-base"], benchmarks=False)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"weights")
    entry = local_entry("model", "my-ckpt")
    store.import_local(entry, ckpt)
    local = [{"id": "my-ckpt", "label": "My checkpoint (step 200)", "store_entry": entry}]
    models = release_eval.evaluator_models(_job(["qwen2.5-vl-3b-base", "my-ckpt"], [43], local), LOCK, store.root)
    mine = models[1]
    assert mine.revision == store.record(entry).sha256set and launcher.SOURCE_RE.match(mine.source)
    done = _print_config(release_evaluator, models, [43], "full-sub")
    assert done.returncode == 0, done.stderr
    printed = launcher.parse_print_config(done.stdout)
    assert launcher.config_mismatches(printed, models, [43], "full-sub", LOCK.trace_eval.suite_id) == []
    assert printed.models[1]["label"] == "My checkpoint (step 200)"


def test_print_config_refuses_what_the_launcher_refuses(release_evaluator):
    pin = LOCK.models[0]
    bad = launcher.EvaluatorModel(model_id="x", slug="x", path="/m", revision="v1", source="local/x@v1", label="x")
    done = _print_config(release_evaluator, [bad], [42], "t")
    assert done.returncode == 2 and "model source must be owner/repo@immutable-commit" in done.stderr
    ok = launcher.EvaluatorModel(model_id=pin.id, slug=pin.evaluator_slug, path="/m", revision=pin.revision,
                                 source=pin.ref, label=pin.label)
    assert _print_config(release_evaluator, [ok], [42], "t").returncode == 0


def test_the_environment_we_set_is_what_the_launcher_reads(release_evaluator):
    """Each variable our launcher_env sets (the phase toggles, GPU_GROUPS) is one the release launcher reads
    with a default (`NAME="${NAME:-...}"`): a misspelt toggle would silently run the phase we meant to skip."""
    text = (release_evaluator / launcher.LAUNCHER).read_text()
    for phase in ("generate", "score"):
        env = launcher.launcher_env(phase, [[0, 1], [2, 3]])
        for name in env:
            assert f'{name}="${{{name}:-' in text, (phase, name)
    assert launcher.launcher_env("generate", [[0, 1], [2, 3]])["GPU_GROUPS"] == "0,1 2,3"


_RECORDER = """#!/bin/sh
# stands in for the vLLM server process only (it needs GPUs): records what the pool started it with
# written beside the folder and moved in, so the test never reads a file the shell has created but not yet filled
printf '%s\\n' "$CUDA_VISIBLE_DEVICES" "$*" > "$POOL_RECORD.$VLLM_PORT.part"
mv "$POOL_RECORD.$VLLM_PORT.part" "$POOL_RECORD/$VLLM_PORT"
"""


@pytest.mark.parametrize("groups", [[[0, 1], [2, 3]], [[0], [1], [2]], [[0, 1, 2, 3]]])
def test_gpu_groups_are_parsed_by_the_endpoint_pool_as_we_mean_them(release_evaluator, tmp_path, groups):
    """GPU_GROUPS as launcher_env writes it, read by the release's start_vllm_endpoint_pool.sh (run as the
    launcher's start_pool runs it, WAIT_READY=0) and by the launcher's endpoint_args: one endpoint per group,
    on that group's GPUs (CUDA_VISIBLE_DEVICES), tensor-parallel over all of them, on consecutive ports, and
    the launcher addresses exactly those ports. Only the vLLM server process is a recorder (PYTHON_BIN)."""
    scripts = release_evaluator / "rlvr/evaluation/scripts"
    value = launcher.launcher_env("generate", groups)["GPU_GROUPS"]
    recorder = tmp_path / "python"
    recorder.write_text(_RECORDER)
    recorder.chmod(0o755)
    record = tmp_path / "record"
    record.mkdir()
    env = {"PATH": "/usr/bin:/bin", "MODEL_PATH": "/models/m", "GPU_GROUPS": value, "WAIT_READY": "0",
           "PYTHON_BIN": str(recorder), "PORT_START": "18000", "LOG_DIR": str(tmp_path / "pool"),
           "POOL_RECORD": str(record)}
    done = subprocess.run(["bash", str(scripts / "start_vllm_endpoint_pool.sh")], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 30
    while len(list(record.iterdir())) < len(groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    vllm_ports = sorted(record.iterdir(), key=lambda p: int(p.name))
    started = [p.read_text().splitlines() for p in vllm_ports]
    assert [s[0] for s in started] == [",".join(map(str, g)) for g in groups]
    for (_, argv), g, i in zip(started, groups, range(len(groups))):
        args = argv.split()
        assert args[args.index("--tensor-parallel-size") + 1] == str(len(g))
        assert args[args.index("--port") + 1] == str(18000 + i)
    endpoints = (tmp_path / "pool" / "endpoints.txt").read_text().split()
    assert endpoints == [f"http://127.0.0.1:{18000 + i}/v1" for i in range(len(groups))]
    # the launcher's own endpoint_args (its function, run from its file) over the same value
    func = subprocess.run(["sed", "-n", "/^endpoint_args() {/,/^}/p", str(scripts / "run_trace_eval.sh")],
                          capture_output=True, text=True, check=True).stdout
    assert func.startswith("endpoint_args() {")
    listed = subprocess.run(["bash", "-c", func + '\nendpoint_args 18000 --api-base'],
                            env={"PATH": "/usr/bin:/bin", "GPU_GROUPS": value, "HOST": "127.0.0.1"},
                            capture_output=True, text=True, timeout=30, check=True).stdout.split()
    assert listed[1::2] == endpoints and set(listed[0::2]) == {"--api-base"}


# --------------------------------------------------------------------------- status and verify

def _models_of(ids: list[str]) -> dict[str, tuple[str, str]]:
    """slug -> (model path, revision) for the release models."""
    return {m.evaluator_slug: (f"/models/{m.evaluator_slug}", m.revision) for m in LOCK.models if m.id in ids}


def _status(checkout: Path, root: Path, manifest: Path, slugs: list[str], seeds: list[int]) -> dict:
    args = ["--campaign-root", str(root), "--dataset-manifest", str(manifest), "--no-gpu", "--json", "--seeds",
            *map(str, seeds)]
    for slug in slugs:
        args += ["--model-slug", slug]
    done = run_script(checkout, "status_trace_eval.py", *args)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout)


def _verify(checkout: Path, root: Path, manifest: Path, models: dict[str, tuple[str, str]], seeds: list[int],
            phase: str) -> tuple[int, dict]:
    evaluator, code = lay.provenance(str(checkout))
    args = ["--campaign-root", str(root), "--phase", phase, "--dataset-manifest", str(manifest), "--json",
            "--code-hash", code, "--evaluator-provenance-sha256", evaluator, "--seeds", *map(str, seeds)]
    for slug, (path, revision) in models.items():
        args += ["--model-entry", f"{slug}={path}={revision}"] if phase == "generation" else ["--model-slug", slug]
    done = run_script(checkout, "verify_trace_eval.py", *args)
    assert done.returncode in (0, 1), done.stderr[-800:]
    return done.returncode, json.loads(done.stdout)


def _rows_for(i: int, bench: str) -> int:
    """A spread of slice states: absent, a few rows, most rows, all rows (complete)."""
    n = ROWS[bench]
    return [0, 1 + i % 17, 25 + i % 5, n if n <= 500 else 3][i % 4]


@pytest.fixture(scope="module")
def all_slices(release_evaluator, tmp_path_factory):
    """All 576 slices (8 models x 3 seeds x 24 benchmarks) in every state, written once."""
    lay.use(release_evaluator)
    base = tmp_path_factory.mktemp("layout")
    manifest = base / "manifest.json"
    dataset = lay.write_dataset_manifest(manifest)
    root = base / "campaign"
    models = _models_of(ALL)
    i = 0
    for slug, (path, revision) in models.items():
        for seed in SEEDS:
            for bench in ROWS:
                rows = _rows_for(i, bench)
                if rows:
                    lay.write_generation(root, release_evaluator, slug=slug, model=path, revision=revision, seed=seed,
                                         bench=bench, rows=rows, dataset=dataset)
                i += 1
    # a partial slice whose summary says so (rows < expected_rows): incomplete for everyone
    out = lay.write_generation(root, release_evaluator, slug="qwen25vl3b-base", model=models["qwen25vl3b-base"][0],
                               revision=models["qwen25vl3b-base"][1], seed=42, bench="erqa", rows=400, dataset=dataset)
    for f in sorted((out / "api_row_results").iterdir())[2:]:
        f.unlink()
    summary = json.loads((out / "generation_summary.json").read_text())
    (out / "generation_summary.json").write_text(json.dumps({**summary, "rows": 2}))
    return root, manifest, models, dataset


def test_progress_equals_the_evaluators_status_for_all_576_slices(all_slices, release_evaluator):
    root, manifest, models, _ = all_slices
    slugs = list(models)
    theirs = _status(release_evaluator, root, manifest, slugs, SEEDS)
    ours = layout.scan_campaign(root, slugs=slugs, seeds=SEEDS, rows=ROWS)
    assert len(ours) == 576 and {s.benchmark for s in ours} == set(ROWS)
    records = {(r["seed"], r["model_slug"]): r for r in theirs["records"]}
    assert len(records) == 24
    for (seed, slug), r in records.items():
        mine = [s for s in ours if (s.seed, s.slug) == (seed, slug)]
        assert (sum(s.rows_done for s in mine), sum(s.generation_complete for s in mine)) == \
            (r["durable_rows"], r["generation_benchmarks"]), (seed, slug)
        assert r["expected_rows"] == sum(s.rows_expected for s in mine)
    assert theirs["durable_rows"] == sum(s.rows_done for s in ours) and theirs["complete"] is False
    partial = next(s for s in ours if (s.slug, s.seed, s.benchmark) == ("qwen25vl3b-base", 42, "erqa"))
    assert (partial.rows_done, partial.generation_complete) == (2, False)


def test_generation_completeness_agrees_with_the_evaluators_verify(all_slices, release_evaluator):
    root, manifest, models, _ = all_slices
    code, report = _verify(release_evaluator, root, manifest, models, SEEDS, "generation")
    assert code == 1 and report["expected_slices"] == 576
    theirs = {(r["model_slug"], r["seed"], r["benchmark_key"]): r["complete"] for r in report["records"]}
    ours = {(s.slug, s.seed, s.benchmark): s.generation_complete
            for s in layout.scan_campaign(root, slugs=list(models), seeds=SEEDS, rows=ROWS)}
    assert ours == theirs
    assert 0 < sum(theirs.values()) < 576 and theirs[("qwen25vl3b-base", 42, "erqa")] is False


@pytest.fixture()
def scored(release_evaluator, tmp_path):
    """Two models, one seed: every slice generated and scored, receipts written. The finished slices'
    row files are left out (their summaries carry the rows; test_a_partial_slice writes its own)."""
    lay.use(release_evaluator)
    manifest = tmp_path / "manifest.json"
    dataset = lay.write_dataset_manifest(manifest)
    root = tmp_path / "campaign"
    models = _models_of(["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"])
    for slug, (path, revision) in models.items():
        for bench in ROWS:
            lay.write_generation(root, release_evaluator, slug=slug, model=path, revision=revision, seed=42,
                                 bench=bench, rows=ROWS[bench], dataset=dataset, row_files=False)
    scores = {(slug, bench): 40.0 + i * 0.25 for i, (slug, bench) in enumerate((s, b) for s in models for b in ROWS)}
    lay.write_scores(root, release_evaluator, seed=42, models={s: p for s, (p, _) in models.items()}, scores=scores,
                     dataset=dataset)
    return root, manifest, models, scores


def _our_score_check(root: Path, models: dict, seeds: list[int]) -> bool:
    slices = layout.scan_campaign(root, slugs=list(models), seeds=seeds, rows=ROWS)
    return all(s.score is not None for s in slices) and not layout.receipt_problems(root, slices, seeds)


def test_score_completeness_agrees_with_the_evaluators_verify(scored, release_evaluator):
    root, manifest, models, scores = scored
    code, report = _verify(release_evaluator, root, manifest, models, [42], "score")
    assert (code, report["complete"], report["completed_slices"]) == (0, True, 48), report["incomplete"][:2]
    assert _our_score_check(root, models, [42]) is True
    slices = layout.scan_campaign(root, slugs=list(models), seeds=[42], rows=ROWS)
    assert {(s.slug, s.benchmark): s.score for s in slices} == scores
    gen_code, gen = _verify(release_evaluator, root, manifest, models, [42], "generation")
    assert gen_code == 0 and gen["complete"] and all(s.generation_complete for s in slices)


def test_a_tampered_score_file_fails_both(scored, release_evaluator):
    root, manifest, models, _ = scored
    path = lay.score_file(root, 42, "mathvista", "trace-qwen25vl3b")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "score": data["score"] + 5}))
    code, report = _verify(release_evaluator, root, manifest, models, [42], "score")
    assert code == 1 and not report["complete"]
    assert _our_score_check(root, models, [42]) is False


def test_a_missing_score_slice_is_incomplete_for_both(scored, release_evaluator):
    root, manifest, models, _ = scored
    lay.score_file(root, 42, "erqa", "qwen25vl3b-base").unlink()
    completion = root / "scoring/score_campaign_completion_seed_42.json"
    data = json.loads(completion.read_text())
    data["slices"] = [s for s in data["slices"] if (s["model_slug"], s["benchmark_key"]) != ("qwen25vl3b-base", "erqa")]
    data["completed_slices"] = len(data["slices"])
    completion.write_text(json.dumps(data))
    code, report = _verify(release_evaluator, root, manifest, models, [42], "score")
    assert code == 1 and not report["complete"]
    assert _our_score_check(root, models, [42]) is False


def test_a_partial_slice_is_incomplete_for_both(scored, release_evaluator):
    """A slice cut short after its summary was written (rows < expected): their verify and status, and our scan."""
    root, manifest, models, _ = scored
    slug, (path, revision) = "trace-qwen25vl3b", models["trace-qwen25vl3b"]
    summary = lay.write_generation(root, release_evaluator, slug=slug, model=path, revision=revision, seed=42,
                                   bench="logicvista", rows=100, dataset=lay.write_dataset_manifest(manifest)) \
        / "generation_summary.json"
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "rows": 100}))
    code, report = _verify(release_evaluator, root, manifest, models, [42], "generation")
    assert code == 1 and [r["benchmark_key"] for r in report["incomplete"]] == ["logicvista"]
    status = _status(release_evaluator, root, manifest, list(models), [42])
    record = next(r for r in status["records"] if r["model_slug"] == "trace-qwen25vl3b")
    assert record["generation_benchmarks"] == 23 and record["durable_rows"] == sum(ROWS.values()) - 447 + 100
    assert not status["complete"]
    ours = next(s for s in layout.scan_campaign(root, slugs=list(models), seeds=[42], rows=ROWS)
                if (s.slug, s.benchmark) == ("trace-qwen25vl3b", "logicvista"))
    assert (ours.rows_done, ours.generation_complete) == (100, False)


# --------------------------------------------------------------------------- the slugs

def test_the_evaluator_knows_our_public_slugs_and_none_for_the_trace_checkpoints(release_evaluator, tmp_path):
    """download-public knows the six public models and the judge by exactly our evaluator slugs; the two TRACE
    checkpoints are not public models to it (they are registered local, with any slug: ours are in the one
    mapping table, results.json names them by model_id). Offline, download-public stops at the Hub after
    accepting a slug, and before it with an unknown one."""
    trace = {m.evaluator_slug for m in LOCK.models if m.id.startswith("trace-")}
    public = [m.evaluator_slug for m in LOCK.models if not m.id.startswith("trace-")] + [LOCK.judge.evaluator_slug]
    env = script_env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    for slug in public:
        done = run_script(release_evaluator, "prepare_trace_eval_models.py", "download-public", "--model-root",
                          str(tmp_path / "m"), "--only", slug, env=env)
        assert done.returncode != 0 and "unknown public model slugs" not in done.stderr, (slug, done.stderr[-300:])
    for slug in sorted(trace):
        done = run_script(release_evaluator, "prepare_trace_eval_models.py", "download-public", "--model-root",
                          str(tmp_path / "m"), "--only", slug, env=env)
        assert done.returncode != 0 and f"unknown public model slugs: ['{slug}']" in done.stderr
    assert trace == {"trace-qwen25vl3b", "trace-qwen25vl7b"}


def test_manifest_verify_only_names_every_benchmark_without_real_receipts(release_evaluator, tmp_path):
    """`prepare_trace_eval_manifest.py --verify-only` (the launcher's first validation) with our command line:
    a manifest with only the suite's view and rows (as tests/evaluator_layout.py writes it) is not a prepared
    dataset view; the script names each benchmark whose receipt (media and content hashes) is not complete."""
    import sys

    from trace_tui.stages import eval_prepare

    lay.use(release_evaluator)
    lmu = tmp_path / "LMUData"
    manifest = lmu / "trace_eval_v1_dataset_manifest.json"
    lay.write_dataset_manifest(manifest)
    argv = eval_prepare.manifest_argv(sys.executable, str(lmu), str(manifest), verify_only=True)
    done = subprocess.run(argv, cwd=release_evaluator, env=script_env(), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stderr[-400:]
    stale = [line.split("key=")[1].split()[0] for line in done.stdout.splitlines() if "verify-error" in line]
    assert stale == list(ROWS)
    assert "ready=0/24" in done.stdout

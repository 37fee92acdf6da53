"""The release's own inference and scoring scripts, for real, in the cpu infer image under the production
container options (read-only root, a tmpfs /tmp, an unprivileged uid, no capabilities, network none: the
vLLM servers are on the container's own loopback).

For the benchmarks whose files VLMEvalKit does not pin by md5 (TreeBench, EvoChart, CountQA: the loaders
accept a local file of the right shape), on synthetic data in each benchmark's format
(tests/release_synthetic_benchmarks.py):

- prepare_trace_eval_manifest.py hashes the rows and images into the dataset manifest;
- the launcher's own text (run_trace_eval.sh up to its driver) computes the provenance and starts the
  endpoint pool (start_vllm_endpoint_pool.sh: real `vllm serve`, vLLM 0.10.2's CPU build, the tiny model);
  its generation client (run_external_benchmark_generation_api_queue.py) writes api_row_results through it,
  then finalizes the prediction workbooks;
- the score campaign's own phases (tests/release_pipeline/score_narrowed.py) score them:
  run_official_vlmevalkit_saved_score.py (TreeBench's and CountQA's pinned dataset.evaluate) and the score
  queue run_external_benchmark_score_queue.py (EvoChart), then validate the score files into its per-seed
  completion receipt;
- our progress grid's reader (scan_campaign), the receipt check and `verify --campaign`'s per-slice re-read
  (recompute_score) run on what it wrote.

The other benchmarks' files are pinned by md5 in VLMEvalKit (MME-Reasoning by the release's
build_vlmeval_dataset), so a synthetic file would be refused: these three are all there are.

What does not run, and why: the launcher's driver. Its first step, setup_trace_eval_env.sh --verify-only,
refuses this build (torch 2.8.0 and the distribution `vllm` are pinned; the image has vLLM's CPU build on
torch 2.6.0: test_release_eval_container.py), and its generation and scoring passes take no benchmark filter
(all 24, of which the others' files are md5-pinned release data). tests/release_pipeline/ says what each
step changes from the launcher's own calls (a benchmark filter, max_tokens, no judge check).

The image lacks the evaluator's Python dependencies on cpu (the gpu images install eval-deps into
.work/eval_deps). The layer here installs them the same way from the index, for the image's CPython 3.13:
the eval-deps lock's pins less Polygon3 and editdistance (no cp313 wheel, C sources), which nothing on this
path imports (it would fail with ModuleNotFoundError), plus what the gpu infer image's lock carries and
VLMEvalKit imports or its workbooks need (qwen-vl-utils, openpyxl, pytz, av).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import release_synthetic_benchmarks as synthetic
from test_release_eval_container import infer_image  # noqa: F401 - the fixture, shared

from trace_tui import images
from trace_tui.common.digest import sha256_file
from trace_tui.evaluator.layout import receipt_problems, scan_campaign
from trace_tui.release import release_lock
from trace_tui.runtime.docker import DockerRuntime, ensure_writable
from trace_tui.stages.eval_prepare import work_root
from trace_tui.stages.release_eval import SCORES_SCHEMA, launch_environment
from trace_tui.workers.recompute_release_eval import recompute_score

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700)]
REPO = Path(__file__).resolve().parents[1]
HARNESS = Path(__file__).parent / "release_pipeline"
LOCKS = REPO / "appliance" / "requirements"
BENCHMARKS = ("treebench", "evochart", "countqa")
SLUG, SEED, RUN_TAG, MAX_TOKENS = "trace-qwen2.5-vl-3b", 42, "full-test", 16
# C extensions without a cp313 wheel; not imported on this path.
NOT_BUILT = {"polygon3", "editdistance"}
# What the gpu infer image's lock carries and VLMEvalKit's import or its workbooks need.
FROM_INFER = ("qwen-vl-utils", "openpyxl", "et-xmlfile", "pytz", "av")
PLATFORMS = [f"--platform={p}" for p in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64",
                                         "manylinux_2_24_x86_64", "manylinux_2_34_x86_64", "manylinux_2_5_x86_64",
                                         "manylinux1_x86_64", "any")]


def _pins(lock: Path) -> dict[str, str]:
    out = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, version = line.split()[0].split("==")
            out[name.lower().replace("_", "-")] = version
    return out


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600)


def _eval_deps_wheels(dest: Path) -> None:
    """The eval-deps pins as cp313 wheels: binary ones from the index, the pure-Python sdists built here."""
    infer = _pins(LOCKS / "infer-gpu.lock.txt")
    wanted = {**{k: v for k, v in _pins(LOCKS / "eval-deps-gpu.lock.txt").items() if k not in NOT_BUILT},
              **{name: infer[name] for name in FROM_INFER}}
    for name, version in sorted(wanted.items()):
        got = _pip("download", "--no-deps", "--only-binary=:all:", "--python-version", "3.13", *PLATFORMS,
                   "-d", str(dest), f"{name}=={version}")
        if got.returncode:  # sdist only: pure Python ones build to a py3 wheel anywhere
            built = _pip("wheel", "--no-deps", "-w", str(dest), f"{name}=={version}")
            if built.returncode:
                pytest.skip(f"{name}=={version}: no wheel from the index: {built.stderr[-400:]}")
    native = [w.name for w in dest.glob("*.whl") if "-none-" not in w.name and "-cp313-" not in w.name
              and "-abi3-" not in w.name]
    assert not native, f"wheels built for this interpreter, not the image's CPython 3.13: {native}"


@pytest.fixture(scope="module")
def evaluator_deps_image(infer_image, tmp_path_factory) -> str:  # noqa: F811 - the shared fixture
    """The test layer with the evaluator's dependencies in the checkout's .work/eval_deps, as the gpu build
    installs them (--no-deps --target)."""
    ctx = tmp_path_factory.mktemp("infer-eval-deps")
    _eval_deps_wheels(ctx / "wheels")
    (ctx / "Dockerfile").write_text(
        f"FROM {infer_image}\nUSER 0:0\nCOPY wheels /wheels\n"
        "RUN /opt/trace-tui/bin/pip install --no-cache-dir --no-index --no-deps "
        "--target /opt/trace/rlvr/evaluation/.work/eval_deps /wheels/*.whl && rm -rf /wheels && "
        "find /opt/trace -name __pycache__ -prune -exec rm -rf {} +\nUSER 65534:65534\n")
    tag = "trace-tui-test/infer-evaluator-deps:cpu"
    images.docker_client().images.build(path=str(ctx), tag=tag, rm=True, network_mode="none")
    return tag


def _environment(model: dict) -> dict[str, str]:
    """What our worker gives the launcher (launch_environment, cpu) for one endpoint, with pool sizes for
    two cores, and the harness's own variables."""
    env = launch_environment({}, Path("/opt/trace"), work_root(Path("/campaign")), RUN_TAG, {"GPU_GROUPS": "0"},
                             cpu=True)
    return {**env, "HOME": "/tmp", "EVALUATION_ROOT": "/opt/trace/rlvr/evaluation", "CHECKOUT_ROOT": "/opt/trace",
            "PYTHON_BIN": "python3", "GEN_MAX_MODEL_LEN": "4096", "GEN_MAX_NUM_SEQS": "16",
            "GEN_MAX_NUM_BATCHED_TOKENS": "8192", "GEN_PARALLELISM_PER_ENDPOINT": "16",
            "GEN_PREPARATION_WORKERS": "4", "GEN_PERSISTENCE_WORKERS": "2", "GEN_FINALIZATION_WORKERS": "2",
            "GEN_QUEUE_CAPACITY": "64", "READY_TIMEOUT_SEC": "600",
            # start_pool fixes CPU_THREADS_PER_PROCESS=8; the pool script takes these over it
            **{f"VLLM_{v}_NUM_THREADS": "2" for v in ("OMP", "MKL", "OPENBLAS", "NUMEXPR")},
            "SLUG": SLUG, "MODEL": "/model", "REVISION": model["revision"],
            "SOURCE": f"{model['repo_id']}@{model['revision']}", "SEED": str(SEED), "RUN_TAG": RUN_TAG,
            "ONLY": " ".join(BENCHMARKS), "MAX_TOKENS": str(MAX_TOKENS)}


def test_the_release_generates_through_its_vllm_pool_and_scores_three_benchmarks(
        tmp_path, evaluator_deps_image, tiny_qwen25vl_dir):
    campaign = tmp_path / "campaign"
    work = campaign / "evaluator"
    synthetic.write_all(work / "LMUData", "/campaign/evaluator/LMUData")
    uid, gid = DockerRuntime(images={}).user
    ensure_writable(campaign, uid, gid)
    for p in (tmp_path, Path(tiny_qwen25vl_dir), *Path(tiny_qwen25vl_dir).iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    model = next(m for m in release_lock().models if m.id == SLUG)
    container = images.docker_client().containers.run(
        evaluator_deps_image, ["bash", "/harness/pipeline.sh"], detach=True, user=f"{uid}:{gid}",
        volumes={str(campaign): {"bind": "/campaign", "mode": "rw"},
                 str(tiny_qwen25vl_dir): {"bind": "/model", "mode": "ro"},
                 str(HARNESS): {"bind": "/harness", "mode": "ro"}},
        network_mode="none", read_only=True, tmpfs={"/tmp": "rw,nosuid,nodev,mode=1777"}, cap_drop=["ALL"],
        security_opt=["no-new-privileges"], working_dir="/opt/trace",
        environment=_environment({"revision": model.revision, "repo_id": model.repo_id}))
    try:
        code = container.wait(timeout=2400)["StatusCode"]
        out = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in (work / "full-test" / "scoring" / "logs").rglob("*.log")) \
        if (work / "full-test" / "scoring" / "logs").is_dir() else ""
    assert code == 0 and "[pipeline:done]" in out, out[-4000:] + logs

    # the pool the launcher's start_pool started answered, and the client stamped the launcher's provenance
    assert "[ready] port=18000" in out and "[stop] pid=" in out
    manifest = json.loads((work / "LMUData" / "trace_eval_v1_dataset_manifest.json").read_text())
    snapshot = manifest["view_snapshot_sha256"]["trace_eval_v1"]
    root = work / RUN_TAG
    for key in BENCHMARKS:
        receipt = manifest["datasets"][key]
        assert receipt["status"] == "ready" and not receipt.get("stand_in") and receipt["rows"] == synthetic.ROWS[key]
        (run,) = (root / f"seed_{SEED}" / "runs" / key / SLUG).iterdir()
        rows = sorted((run / "api_row_results").glob("*.json"))
        assert len(rows) == synthetic.ROWS[key], key
        row = json.loads(rows[0].read_text())
        assert row["benchmark_key"] == key and row["api_endpoint"] == "http://127.0.0.1:18000/v1"
        assert row["finish_reason"] in ("stop", "length") and isinstance(row["prediction"], str)
        assert row["dataset_snapshot_sha256"] == snapshot and row["model_revision"] == model.revision
        summary = json.loads((run / "generation_summary.json").read_text())
        assert summary["rows"] == summary["expected_rows"] == synthetic.ROWS[key]
        assert summary["generation"]["max_tokens"] == MAX_TOKENS

    # the score campaign's own validation of what its phases wrote
    validated = json.loads(out.split("[score:validated] ", 1)[1].splitlines()[0])
    by_key = {s["benchmark_key"]: s for s in validated}
    assert sorted(by_key) == sorted(BENCHMARKS)
    for key in BENCHMARKS:
        scores = root / by_key[key]["scores_path"].removeprefix(f"/campaign/evaluator/{RUN_TAG}/")
        data = json.loads(scores.read_text())
        assert data["rows"] == synthetic.ROWS[key] and 0 <= data["score"] <= 100, data
    assert (root / "scoring" / "logs" / "official" / SLUG / "treebench.log").is_file()
    assert (root / "scoring" / "logs" / "direct" / SLUG / "evochart.log").is_file()

    # our progress grid's reader on what the release wrote: every row counted, the same score files
    grid = scan_campaign(root, slugs=[SLUG], seeds=[SEED], rows={k: synthetic.ROWS[k] for k in BENCHMARKS})
    for s in grid:
        assert (s.rows_done, s.generation_complete, s.phase) == (synthetic.ROWS[s.benchmark], True, "scored")
        assert s.scores_sha256 == by_key[s.benchmark]["scores_sha256"]
        assert s.score == pytest.approx(by_key[s.benchmark]["score"])

    # `verify --campaign`'s re-read of each slice (recompute_score): our scores.json as the worker writes it
    # (release_eval.run, phase score) -> the evaluator's score file -> its per-seed completion receipt
    assert receipt_problems(root, grid, [SEED]) == []
    ours = campaign / "steps" / "score" / "scores.json"
    ours.parent.mkdir(parents=True)
    ours.write_text(json.dumps({"schema": SCORES_SCHEMA, "suite": "trace_eval_v1", "run_tag": RUN_TAG,
                                "campaign_root": f"evaluator/{RUN_TAG}", "seeds": [SEED], "models": [],
                                "slices": [dict(s.model_dump(), model=SLUG) for s in grid]}))
    for s in grid:
        content = {"step": "score", "model": SLUG, "seed": SEED, "benchmark": s.benchmark,
                   "outputs": {"steps/score/scores.json": {"sha256": sha256_file(ours)}}}
        assert recompute_score(campaign, content) == pytest.approx(s.score)

"""`full` end to end through the real engine, then `trace-tui report --campaign` and
`trace-tui verify --campaign` as real subprocesses.

The real Runner runs the recipe's three steps (release_eval generate, release_eval
score, the summary) with the local runtime; the only stand-in is the release
launcher itself (tests/fake_evaluator: GPUs, vLLM, the benchmark data and the
Qwen3-32B judge do not exist here), which speaks only its documented interface
and writes the documented campaign layout with the scores of the real
results.json — or, in the shifted campaign, one benchmark 5 points higher.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_external_prepare import fill_store, install_fake_evaluator

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.recipes import LocalModel, SliceKey, resolve_recipe
from trace_tui.release import release_lock
from trace_tui.runtime.local import LocalRuntime

LOCK = release_lock()
TWO = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
SHIFTED = ("trace-qwen2.5-vl-3b", 43, "mathvista")
TRACE_TUI = [sys.executable, "-m", "trace_tui"]

pytestmark = pytest.mark.slow


def published(release_dir: Path) -> dict[tuple[str, int, str], float]:
    data = json.loads((release_dir / LOCK.trace_eval.results_path).read_text())
    return {(r["model_id"], r["seed"], r["benchmark_id"]): r["score"] for r in data["scores"]["benchmark_scores"]}


def run_full(tmp: Path, release_dir: Path, name: str, shift: float = 0.0, local: Any = None) -> Path:
    """`full` for TWO through the real Runner; ``local``: (LocalModel, its folder) evaluated beside them."""
    evaluator = install_fake_evaluator(tmp / f"trace-{name}", release_dir)
    # what eval-setup fetches (models, judge, 24 benchmark files, the release files the summary reads)
    store = fill_store(tmp / f"store-{name}", release_dir, TWO, release=True)
    slug = {m.id: m.evaluator_slug for m in LOCK.models}
    scores = {f"{slug[m]}/{s}/{b}": v for (m, s, b), v in published(release_dir).items() if m in TWO}
    scores[f"{slug[SHIFTED[0]]}/{SHIFTED[1]}/{SHIFTED[2]}"] += shift
    resolved = resolve_recipe("full", models=TWO)
    if local is not None:
        model, folder = local
        store.import_local(model.store_entry, folder)
        scores.update({f"{model.id}/{s}/{b.key}": 33.0 for s in LOCK.trace_eval.seeds for b in LOCK.trace_eval.benchmarks})
        resolved = resolved.model_copy(update={
            "models": [*resolved.models, model],
            "slices": [*resolved.slices, *(SliceKey(model=model.id, seed=s, benchmark=b.key)
                                          for s in resolved.seeds for b in resolved.benchmarks)]})
    spec = tmp / f"fake-{name}.json"
    spec.write_text(json.dumps({"rows": {b.key: 2 for b in LOCK.trace_eval.benchmarks}, "scores": scores}))
    saved = dict(os.environ)
    os.environ.update(TRACE_TUI_EVALUATOR=str(evaluator), FAKE_EVAL_SPEC=str(spec))
    try:
        events: list = []
        with Campaign(tmp / name) as c:
            result = Runner(resolved, c, LocalRuntime(), store=store.root).run(events.append)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert result.exit_code == 0, result.message
    return tmp / name


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory, trace_release_dir):
    tmp = tmp_path_factory.mktemp("full")
    return {"equal": run_full(tmp, trace_release_dir, "equal"),
            "shifted": run_full(tmp, trace_release_dir, "shifted", shift=5.0)}


def cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_TUI_")}
    if home is not None:
        env["TRACE_TUI_HOME"] = str(home)
    return subprocess.run([*TRACE_TUI, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_the_summary_step_keeps_the_comparison_in_the_campaign(campaigns):
    out = campaigns["equal"] / "outputs" / "summary" / "_step"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"].startswith("all 144 reproduced scores are within the canonical spread")
    assert summary["outside"] == [] and len(summary["slices"]) == 144
    md = (out / "summary.md").read_text()
    assert "| Model | Benchmark | Seed |" in md and "3B TRACE (Δ)" in md
    # the summary step's receipt covers what it wrote
    receipt = json.loads((campaigns["equal"] / "receipts" / "summary" / "_step.json").read_text())
    assert {"outputs/summary/_step/summary.md", "outputs/summary/_step/summary.json"} <= set(receipt["content"]["outputs"])


def test_report_campaign_equal_to_the_release(campaigns, trace_release_dir):
    done = cli("report", "--campaign", str(campaigns["equal"]), "--release-dir", str(trace_release_dir))
    assert done.returncode == 0, done.stderr
    assert "**Verdict:** all 144 reproduced scores are within the canonical spread" in done.stdout
    assert "| trace-qwen2.5-vl-3b | mathvista | 43 |" in done.stdout
    # overall: the reproduced mean over seeds equals the published one
    data = json.loads(cli("report", "--campaign", str(campaigns["equal"]), "--release-dir", str(trace_release_dir),
                          "--format", "json").stdout)
    assert {o["model"]: (o["verdict"], round(o["difference"], 9)) for o in data["overall"]} == \
        {m: ("within", 0.0) for m in TWO}
    assert data["tables"]["overall"] and data["problems"] == []


def test_report_campaign_names_the_shifted_benchmark(campaigns, trace_release_dir):
    data = json.loads(cli("report", "--campaign", str(campaigns["shifted"]), "--release-dir", str(trace_release_dir),
                          "--format", "json").stdout)
    assert data["outside"] == ["trace-qwen2.5-vl-3b/43/mathvista"]
    assert "trace-qwen2.5-vl-3b/43/mathvista (+5.00)" in data["verdict"]
    row = next(c for c in data["slices"] if (c["model"], c["seed"], c["benchmark"]) == SHIFTED)
    assert row["verdict"] == "outside" and abs(row["difference"] - 5.0) < 1e-9
    # 5 points on one of 24 benchmarks of one seed moves the 3-seed overall by 5/72 point: within
    assert {o["model"]: o["verdict"] for o in data["overall"]} == {m: "within" for m in TWO}


def test_report_campaign_without_published_values_says_so(campaigns, tmp_path):
    done = cli("report", "--campaign", str(campaigns["equal"]), home=tmp_path / "empty-home")
    assert done.returncode == 0, done.stderr
    assert "No published values to compare with" in done.stdout and "3B TRACE (Δ)" in done.stdout


def test_verify_campaign_recomputes_every_score(campaigns, trace_release_dir):
    done = cli("verify", "--campaign", str(campaigns["equal"]), "--release-dir", str(trace_release_dir), "--json")
    assert done.returncode == 0, done.stdout[-2000:]
    camp = json.loads(done.stdout)["campaign"]
    scores = [c for c in camp["checks"] if c["id"] == "score"]
    assert len(scores) == 144 and {c["status"] for c in scores} == {"passed"}
    assert len(camp["comparisons"]) == 144 and {c["verdict"] for c in camp["comparisons"]} == {"within"}


def test_verify_campaign_shows_the_shifted_benchmark_as_information(campaigns, trace_release_dir):
    done = cli("verify", "--campaign", str(campaigns["shifted"]), "--release-dir", str(trace_release_dir))
    assert done.returncode == 0, done.stdout[-2000:]  # a verdict is information, not a failure
    assert "trace-qwen2.5-vl-3b/43/mathvista:" in done.stdout and "outside)" in done.stdout
    assert done.stdout.count("outside)") == 1 and done.stdout.rstrip().endswith("VERIFIED")


def test_a_changed_evaluator_score_file_fails_verify_and_report(campaigns, trace_release_dir, tmp_path):
    copy = tmp_path / "c"
    shutil.copytree(campaigns["equal"], copy)
    resolved = json.loads((copy / "recipe.json").read_text())
    path = next((copy / "evaluator" / resolved["run_tag"] / "scoring" / "seed_44").rglob("scores.json"))
    path.write_text(json.dumps({"score": 99.0}))
    rel = path.relative_to(copy).as_posix()
    done = cli("verify", "--campaign", str(copy))
    assert done.returncode == 1 and "FAILED" in done.stdout
    assert any(rel in line and "sha256" in line for line in done.stdout.splitlines() if line.startswith("FAILED"))
    rep = cli("report", "--campaign", str(copy), "--release-dir", str(trace_release_dir))
    assert rep.returncode == 1 and rel in rep.stderr and "Traceback" not in rep.stderr


def test_report_campaign_on_a_directory_that_is_not_a_campaign(tmp_path):
    done = cli("report", "--campaign", str(tmp_path))
    assert done.returncode == 2 and "not a campaign directory" in done.stderr


def test_a_users_own_checkpoint_runs_through_full_and_verifies(tmp_path, trace_release_dir):
    """The resolver offers no local model for `full` yet (LocalModel is the demo's); given one in the resolved
    recipe, the engine's campaign (recipe.json) carries its store entry to the evaluator steps."""
    folder = tmp_path / "my-ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    model = LocalModel(id="my-ckpt", label="My checkpoint", store_entry="local:model/my-ckpt")
    camp = run_full(tmp_path, trace_release_dir, "own", local=(model, folder))
    resolved = json.loads((camp / "recipe.json").read_text())
    printed = (camp / "outputs/generate/_step/print-config.txt").read_text()
    line = next(x for x in printed.splitlines() if x.startswith("model=my-ckpt "))
    assert "revision=sha256set:" in line and "source=local/my-ckpt@sha256set:" in line
    assert f"path={tmp_path}/trace-own/rlvr/evaluation/.work/models/my-ckpt " in line
    data = json.loads(cli("report", "--campaign", str(camp), "--release-dir", str(trace_release_dir),
                          "--format", "json").stdout)
    assert len(data["unpublished"]) == 72 and all(u.startswith("my-ckpt/") for u in data["unpublished"])
    assert {o["model"]: o["verdict"] for o in data["overall"]}["my-ckpt"] == "unpublished"
    done = cli("verify", "--campaign", str(camp), "--json")
    assert done.returncode == 0, done.stdout[-1500:]
    scores = [c for c in json.loads(done.stdout)["checks"] if c["id"] == "score"]
    assert len(scores) == 3 * 72 and {c["status"] for c in scores} == {"passed"}
    assert resolved["models"][-1]["store_entry"] == "local:model/my-ckpt"

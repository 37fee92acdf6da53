"""`full` end to end through the real engine, then `trace-tui report --campaign` and
`trace-tui verify --campaign` as real subprocesses.

The real Runner runs the recipe's three steps (release_eval generate, release_eval
score, the summary) with the local runtime, in the release's own evaluator checkout
(tests/fixtures_evaluator.py). The only stand-in is the launcher's GPU run
(tests/fake_evaluator: vLLM generation, the Qwen3-32B judge), which writes the
evaluator's layout with the evaluator's own functions and the scores of the real
results.json — or, in the shifted campaign, one benchmark 5 points higher; the
release's verify_trace_eval.py (both phases) must accept it. The dataset manifest is
the one the manifest script would leave (the benchmark data is not here).
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
from fixtures_evaluator import copy_checkout, install_stand_in, stand_in_env
from test_engine_support import rederived
from test_external_prepare import fill_store, prepared_dataset_view

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.recipe.schema import LocalModel, SliceKey
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


def run_full(tmp: Path, release_dir: Path, checkout: Path, name: str, shift: float = 0.0, local: Any = None,
             rows: dict[str, int] | None = None, expect: int = 0) -> Path:
    """`full` for TWO through the real Runner; ``local``: (LocalModel, its folder) evaluated beside them;
    ``rows``: the stand-in stops each slice there (a run cut short)."""
    evaluator = tmp / f"trace-{name}"
    if not evaluator.exists():  # a rerun of the same campaign runs in the same evaluator (the same image)
        install_stand_in(copy_checkout(checkout, evaluator))
        prepared_dataset_view(evaluator, tmp / name)
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
        resolved = rederived(resolved.model_copy(update={
            "models": [*resolved.models, model],
            "slices": [*resolved.slices, *(SliceKey(model=model.id, seed=s, benchmark=b.key)
                                          for s in resolved.seeds for b in resolved.benchmarks)]}))
    spec = tmp / f"fake-{name}.json"
    # finished slices without their per-row files (their summaries carry the rows): far fewer files
    spec.write_text(json.dumps({"rows": rows or {}, "scores": scores, "row_files": False}))
    saved = dict(os.environ)
    os.environ.update(TRACE_TUI_EVALUATOR=str(evaluator), **stand_in_env(spec))
    try:
        events: list = []
        with Campaign(tmp / name) as c:
            result = Runner(resolved, c, LocalRuntime(), store=store.root).run(events.append)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert result.exit_code == expect, result.message
    run_full.last_result = result
    return tmp / name


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory, trace_release_dir, release_evaluator):
    tmp = tmp_path_factory.mktemp("full")
    return {"equal": run_full(tmp, trace_release_dir, release_evaluator, "equal"),
            "shifted": run_full(tmp, trace_release_dir, release_evaluator, "shifted", shift=5.0)}


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


def test_a_full_run_cut_short_fails_naming_the_short_slices_and_a_rerun_resumes(tmp_path, trace_release_dir,
                                                                               release_evaluator):
    """Issue 14 defect 4 through the engine: the stand-in writes 3 of 1,948 rows a slice and exits 0; the step
    fails naming the short slices (it used to report "completed"), and the next run finishes the campaign."""
    short = {b.key: 3 for b in LOCK.trace_eval.benchmarks}
    camp = run_full(tmp_path, trace_release_dir, release_evaluator, "short", rows=short, expect=1)
    message = run_full.last_result.message
    assert "step generate failed" in message and "144 of 144 slices short of their rows" in message
    assert "qwen2.5-vl-3b-base/42/chartqapro (3/1948)" in message
    with Campaign(camp) as c:
        assert {r.state for r in c.sub_slices().values()} <= {"failed", "pending", "running"}
    run_full(tmp_path, trace_release_dir, release_evaluator, "short")
    data = json.loads(cli("report", "--campaign", str(camp), "--release-dir", str(trace_release_dir),
                          "--format", "json").stdout)
    assert len(data["slices"]) == 144 and not data["problems"]


def test_a_users_own_checkpoint_runs_through_full_and_verifies(tmp_path, trace_release_dir, release_evaluator):
    """The resolver offers no local model for `full` yet (LocalModel is the demo's); given one in the resolved
    recipe, the engine's campaign (recipe.json) carries its store entry to the evaluator steps."""
    folder = tmp_path / "my-ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    (folder / "model.safetensors").write_bytes(b"my weights")
    model = LocalModel(id="my-ckpt", label="My checkpoint", store_entry="local:model/my-ckpt")
    camp = run_full(tmp_path, trace_release_dir, release_evaluator, "own", local=(model, folder))
    resolved = json.loads((camp / "recipe.json").read_text())
    printed = (camp / "outputs/generate/_step/print-config.txt").read_text()
    line = next(x for x in printed.splitlines() if x.startswith("model=my-ckpt "))
    assert "revision=sha256set:" in line and "source=local/my-ckpt@" in line and "label=My checkpoint" in line
    # its model view is in the campaign (the launcher's TMP_ROOT), by its real path
    assert f"path={(tmp_path / 'own').resolve()}/evaluator/models/my-ckpt " in line
    data = json.loads(cli("report", "--campaign", str(camp), "--release-dir", str(trace_release_dir),
                          "--format", "json").stdout)
    assert len(data["unpublished"]) == 72 and all(u.startswith("my-ckpt/") for u in data["unpublished"])
    assert {o["model"]: o["verdict"] for o in data["overall"]}["my-ckpt"] == "unpublished"
    done = cli("verify", "--campaign", str(camp), "--json")
    assert done.returncode == 0, done.stdout[-1500:]
    scores = [c for c in json.loads(done.stdout)["checks"] if c["id"] == "score"]
    assert len(scores) == 3 * 72 and {c["status"] for c in scores} == {"passed"}
    assert resolved["models"][-1]["store_entry"] == "local:model/my-ckpt"


def test_our_tables_equal_the_evaluators_summary(campaigns, tmp_path):
    """summarize_trace_eval.py (the launcher's summary phase) over the campaign's score files: every benchmark's
    mean and std per model, the overall average and the paired change equal what our report computes."""
    import pandas as pd
    from fixtures_evaluator import run_script

    from trace_tui.external.compare import records_from_slices
    from trace_tui.external.summary import recorded_scores
    from trace_tui.verify import aggregate as agg

    camp = campaigns["equal"]
    _, data, _ = recorded_scores(camp)
    root = camp / data["campaign_root"]
    models = {m["slug"]: m for m in data["models"]}
    args = ["--score-root-base", str(root / "scoring"), "--suite", "trace_eval_v1", "--seeds", "42", "43", "44",
            "--excel", str(tmp_path / "r.xlsx"), "--markdown", str(tmp_path / "r.md")]
    for slug, m in models.items():
        args += ["--model-entry", f"{slug}={m['label']}"]
    trace, base = (next(m for m in data["models"] if m["model_id"] == i) for i in TWO[::-1])
    args += ["--delta", f"change={trace['slug']}={base['slug']}"]
    done = run_script(camp.parent / "trace-equal", "summarize_trace_eval.py", *args)
    assert done.returncode == 0, done.stderr[-800:]
    theirs = pd.read_excel(tmp_path / "r.xlsx", sheet_name="mean_std")
    from trace_tui.evaluator.layout import EvalSlice

    slices = [EvalSlice(**{k: v for k, v in s.items() if k in EvalSlice.model_fields}) for s in data["slices"]]
    records = records_from_slices(slices, {slug: m["model_id"] for slug, m in models.items()})
    per_bench = agg.benchmark_summaries(records)
    overall = agg.overall_summaries(records)
    seed_values = pd.read_excel(tmp_path / "r.xlsx", sheet_name="seed_values")
    display = dict(zip(seed_values["benchmark_key"], seed_values["benchmark"]))  # the evaluator's display names
    assert len(theirs) == 25 and len(seed_values) == 2 * 3 * 24
    for _, row in theirs.iterrows():
        for m in models.values():
            if row["Benchmark"] == "Average":
                mine = overall[m["model_id"]]
            else:
                key = next(k for k, d in display.items() if d == row["Benchmark"])
                mine = per_bench[(m["model_id"], key)]
            assert abs(row[f"{m['label']} mean"] - mine.mean) < 1e-9, (row["Benchmark"], m["label"])
            assert abs(row[f"{m['label']} std"] - mine.stddev) < 1e-9, (row["Benchmark"], m["label"])
    average = theirs[theirs["Benchmark"] == "Average"].iloc[0]
    assert abs(average["change"] - agg.overall_delta(records, trace["model_id"], base["model_id"]).mean) < 1e-9


def test_build_release_results_check_needs_the_published_run_metadata(release_evaluator, tmp_path):
    """build_release_results.py --check rebuilds results.json from the release's run metadata on the Hub
    (rev-4178/, rev-4ca25/), which is not here: it refuses naming the first file it needs."""
    from fixtures_evaluator import run_script

    done = run_script(release_evaluator, "build_release_results.py", "--inputs-root", str(tmp_path), "--check",
                      "--output", str(release_evaluator / "rlvr/evaluation/trace_eval/results.json"))
    assert done.returncode != 0
    assert "rev-4178/runs/qwen2.5-vl-3b-comparison-temp06-seeds42-44-v1/metadata/manifest.json" in done.stderr

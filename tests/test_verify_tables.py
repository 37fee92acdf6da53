"""The release page's tables, recomputed from the real results.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_tui.verify.tables import release_tables
from trace_tui.release import release_lock
from trace_tui.verify.tables import build_tables, fmt_pm


@pytest.fixture(scope="module")
def tables(trace_release_dir: Path):
    return release_tables(trace_release_dir)


def test_overall_table_matches_the_release_page(tables) -> None:
    rows = {r.model_id: r.cells for r in tables.overall}
    assert rows["trace-qwen2.5-vl-3b"] == ["3B", "TRACE Qwen2.5-VL 3B", "TRACE (synthetic)", "42.85 ± 0.39", "+3.51 ± 0.25"]
    assert rows["qwen2.5-vl-3b-base"][2] == "—" and rows["qwen2.5-vl-3b-base"][4] == "—"
    assert [r.model_id for r in tables.overall] == [m.id for m in release_lock().models]
    assert {r.post_training_data for r in tables.overall if r.change is not None} == {
        "TRACE (synthetic)", "VERO (real-image)", "Game-RL (synthetic)", "Sphinx (synthetic)", "PCGRPO (synthetic)"}


def test_per_benchmark_table_grouped_by_category(tables) -> None:
    assert [c.header for c in tables.columns] == ["3B Base", "3B TRACE (Δ)", "7B Base", "7B TRACE (Δ)"]
    assert [g.category for g in tables.categories] == list(release_lock().trace_eval.categories)
    assert all(len(g.rows) == 4 for g in tables.categories)
    chartqapro = tables.categories[0].rows[0]
    assert chartqapro.display == "ChartQAPro"
    assert chartqapro.cells[1].text == "31.43 ± 1.33 (-0.14)"
    assert chartqapro.cells[0].text == "31.57 ± 0.66"  # base cells carry no Δ


def test_improvement_sentence_counts_benchmarks(tables) -> None:
    counts = {i.scale: (i.improved, i.total) for i in tables.improvements}
    assert counts == {"3B": (21, 24), "7B": (24, 24)}
    assert "21 of 24 benchmarks at 3B" in tables.improvement_sentence
    assert "24 of 24 benchmarks at 7B" in tables.improvement_sentence


def test_validation_table(tables) -> None:
    rows = {r.model_id: r.cells for r in tables.validation}
    assert rows["trace-qwen2.5-vl-3b"] == ["TRACE Qwen2.5-VL-3B", "41.05", "+16.60"]
    assert rows["trace-qwen2.5-vl-7b"][2] == "+17.30"
    assert rows["qwen2.5-vl-7b-base"][2] == "—"
    assert rows["sphinx-qwen2.5-vl-7b"][2] == "-0.75"


def test_markdown_layout(tables) -> None:
    md = tables.to_markdown()
    assert "| Scale | Model | Post-training data | Overall | Paired change |" in md
    assert "| Benchmark | 3B Base | 3B TRACE (Δ) | 7B Base | 7B TRACE (Δ) |" in md
    assert "| **Charts & Tables** |" in md
    assert "| 3B | TRACE Qwen2.5-VL 3B | TRACE (synthetic) | 42.85 ± 0.39 | +3.51 ± 0.25 |" in md
    assert "| Model | Accuracy | Change from base |" in md


def test_every_figure_is_computed(trace_release_dir: Path) -> None:
    """Change one score: the figures that depend on it change, so nothing is typed in."""
    data = json.loads((trace_release_dir / "rlvr/evaluation/trace_eval/results.json").read_text())
    recs = data["scores"]["benchmark_scores"]
    before = build_tables(recs, release_lock())
    for r in recs:
        if r["model_id"] == "trace-qwen2.5-vl-3b" and r["benchmark_id"] == "chartqapro":
            r["score"] += 30.0
    after = build_tables(recs, release_lock())
    assert before.categories[0].rows[0].cells[1].text != after.categories[0].rows[0].cells[1].text
    assert before.overall[1].cells[3] != after.overall[1].cells[3]
    assert after.improvements[0].improved == before.improvements[0].improved + 1


def test_partial_scores_give_partial_tables() -> None:
    """A reproduction of one model pair on two benchmarks still tabulates (the full evaluation reuses this)."""
    recs = [{"model_id": m, "seed": s, "benchmark_id": b, "score": v + (2.0 if m.startswith("trace") else 0.0)}
            for m in ("qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b") for s in (42, 43) for b, v in
            (("chartqapro", 30.0 + s - 42), ("wemath", 20.0))]
    t = build_tables(recs, release_lock())
    assert [c.header for c in t.columns] == ["3B Base", "3B TRACE (Δ)"]
    assert t.improvements[0].improved == 2 and t.improvements[0].total == 2
    assert t.overall[1].cells[4] == "+2.00 ± 0.00"
    assert fmt_pm(1.0, None) == "1.00"


def test_verification_offers_the_tables_to_the_tui(trace_release_dir: Path) -> None:
    from trace_tui.tui.views import verify_view
    from trace_tui.verify.release import verify_release

    view = verify_view(verify_release(trace_release_dir), target="release")
    assert view.ok
    titles = [t.title for t in view.tables]
    # first the stored aggregates against their recomputation (differences highlighted), then the page's tables
    assert titles[0].startswith("Stored aggregates") and titles[-1] == "TRACE validation"
    overall = next(t for t in view.tables if t.title.startswith("Overall"))
    assert overall.columns[3] == "Overall"
    assert ("3B", "TRACE Qwen2.5-VL 3B", "TRACE (synthetic)", "42.85 ± 0.39", "+3.51 ± 0.25") in overall.rows

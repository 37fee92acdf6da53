"""How `trace-tui verify --campaign` re-reads a slice's score the release evaluator worker recorded: the chain
from the receipt to the evaluator's own score file and its per-seed completion receipt, every link checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_tui.common.digest import sha256_file
from trace_tui.evaluator.layout import completion_receipts, score_of


def recompute_score(campaign_dir: Path, content: dict[str, Any]) -> float:
    """One slice's score, re-read from the evaluator's own score file (`verify --campaign`).

    The chain checked: the receipt's sha256 of our scores.json -> the slice's entry in it ->
    the evaluator's scores.json (its sha256) -> the evaluator's per-seed completion receipt
    (same sha256, same score). The evaluator computed the score from its per-row
    predictions; re-running its scorers needs the judge and GPUs, so the offline check is
    that every recorded number is the one in the evaluator's files, unchanged.
    """
    campaign_dir = Path(campaign_dir)
    ours = [rel for rel in (content.get("outputs") or {}) if rel.endswith("/scores.json")]
    if len(ours) != 1:
        raise ValueError(f"receipt {content.get('step')}: expected one scores.json among its outputs, found {len(ours)}")
    rel = ours[0]
    path = campaign_dir / rel
    if sha256_file(path) != content["outputs"][rel]["sha256"]:
        raise ValueError(f"{rel}: sha256 differs from the receipt")
    data = json.loads(path.read_text(encoding="utf-8"))
    want = (content.get("model"), int(content["seed"]), content.get("benchmark"))
    entry = next((e for e in data.get("slices") or [] if (e.get("model"), e.get("seed"), e.get("benchmark")) == want),
                 None)
    if entry is None or not entry.get("scores_path"):
        raise ValueError(f"{rel}: no score file recorded for {want[0]}/{want[1]}/{want[2]}")
    root = campaign_dir / data["campaign_root"]
    score_path = root / entry["scores_path"]
    resolved_campaign = campaign_dir.resolve()
    if resolved_campaign not in score_path.resolve().parents:
        raise ValueError(f"{rel}: names a score file outside the campaign; it was not read")
    where = f"{data['campaign_root']}/{entry['scores_path']}"
    if not score_path.is_file():
        raise ValueError(f"{where}: missing")
    digest = sha256_file(score_path)
    if digest != entry.get("scores_sha256"):
        raise ValueError(f"{where}: sha256 {digest[:12]}… differs from {rel}'s {str(entry.get('scores_sha256'))[:12]}…")
    receipt = completion_receipts(root, [want[1]])[want[1]]
    if receipt is None:
        raise ValueError(f"{data['campaign_root']}/scoring/score_campaign_completion_seed_{want[1]}.json: missing")
    listed = next((e for e in receipt.get("slices") or []
                   if (e.get("benchmark_key"), e.get("model_slug")) == (want[2], entry.get("slug"))), None)
    if listed is None:
        raise ValueError(f"{where}: not in the seed {want[1]} completion receipt")
    if listed.get("scores_sha256") != digest:
        raise ValueError(f"{where}: sha256 differs from the seed {want[1]} completion receipt")
    score = score_of(json.loads(score_path.read_text(encoding="utf-8")), want[2])
    if score is None:
        raise ValueError(f"{where}: no 'score' (or 'accuracy') number")
    if isinstance(listed.get("score"), (int, float)) and abs(float(listed["score"]) - score) > 1e-9:
        raise ValueError(f"{where}: score {score} differs from the completion receipt's {listed['score']}")
    return score

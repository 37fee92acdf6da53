"""Scoring throughput: §1 extraction + §2 match, and the §3 reward, on one core.

The corpus is built from the real TRACE sample's answers (TRACE_SAMPLE_DIR) in
every form the contracts know: trailing JSON, fenced JSON, Python literals,
answer tags, structured sections, final-answer and answer lines, boxed,
terminal options, and missing, ambiguous, duplicate-key and malformed
responses. Each response carries a reasoning preamble cut from the row's own
prompt, so lengths are realistic.

Goals: >= 20,000 rows/s for extraction + match, and >= 2x the release's own
extractor (see ``upstream_extractor``) measured in the same run over the same
responses. A bare `json.loads` attempt per row is printed as the floor.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

TARGET_ROWS_PER_S = 20_000
REPO = Path(__file__).resolve().parents[1]


def _sample_rows() -> list[dict]:
    sample = Path(os.environ.get("TRACE_SAMPLE_DIR", REPO.parent / "shared" / "trace-sample"))
    path = sample / "trace-sample.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: set TRACE_SAMPLE_DIR to the TRACE sample folder")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def corpus() -> list[tuple[str, dict]]:
    rows = []
    for row in _sample_rows():
        gt = row["answer_gt"]
        v = gt["value"]
        j = json.dumps(v, ensure_ascii=False)
        t = str(v)
        prose = row["prompt"].replace("<image>", "")[:480]
        reasoning = f"Looking at the image. {prose}\nSo the result follows."
        forms = [
            f'{reasoning}\n{{"answer": {j}}}',
            f'{reasoning}\n```json\n{{"answer": {j}}}\n```',
            f"{reasoning}\n{{'answer': {j}}}",
            f"{reasoning}\n<answer>{j}</answer>",
            f"{reasoning}\nFinal JSON: {j}",
            f"{reasoning}\nFinal answer: {t}",
            f"{reasoning}\nAnswer: {t}\nHope this helps.",
            f"{reasoning} Therefore \\boxed{{{t}}}.",
            f"{reasoning}\nAnswer: {t}\nFinal answer: {t}x",
            f'{reasoning}\n{{"answer": {j}, "answer": {j}}}',
            f'{reasoning}\n{{"answer": {j}',
            reasoning,
        ]
        if gt["type"] == "option_letter":
            forms.append(f"{reasoning}\n({t})")
        rows.extend((r, gt) for r in forms)
    return rows


def upstream_extractor():
    """(response, gt) -> verdict with the release's own deterministic extractor.

    ``extract_final_answer`` of rlvr/evaluation/scripts/trace_benchmark_answer_parsing.py at the
    release commit (unpacked from the pinned evaluator archive by bench/upstream.py, run unchanged):
    the extractor the release's score queue applies to benchmark responses. It is the only answer
    extractor of the release this project may run: the TRACE contract's own extractor and matcher
    live in the release's trace_tasks package, which the project neither reads nor runs. That
    script has no matcher, so its answer is compared by trimmed, lower-cased string equality (the
    cheapest match, which only flatters the baseline); a response it returns unchanged ("raw",
    no wrapper found) is no answer. Its contract differs from CONTRACTS.md §1 (no ambiguity or
    duplicate-key rule, no Python literals or "final json:" sections, first wrapper kind wins), so
    verdicts agree on the rows both read alike, not on all.
    """
    import importlib.util

    from bench.upstream import EXTRACTOR, script

    spec = importlib.util.spec_from_file_location("trace_benchmark_answer_parsing", script(EXTRACTOR))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    extract_final_answer = module.extract_final_answer

    def verdict(response: str, gt: dict) -> bool:
        text, method = extract_final_answer(response)
        return method != "raw" and text.strip().lower() == str(gt["value"]).strip().lower()

    return verdict


def _time(fn, items, min_seconds: float = 1.0) -> float:
    """Rows per CPU second (process time: robust on a shared machine) of fn over items."""
    done = 0
    start = time.process_time()
    while True:
        for item in items:
            fn(item)
        done += len(items)
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return done / elapsed


def run() -> list[str]:
    from trace_tui.scoring import answers_match, extract_answer, trace_reward

    items = corpus()

    def baseline(item):
        try:
            return json.loads(item[0])
        except ValueError:
            return None

    def extract_and_match(item):
        response, gt = item
        ex = extract_answer(response, gt["type"])
        return ex.status == "found" and answers_match(ex.value, gt)

    def reward(item):
        return trace_reward(item[0], item[1])

    upstream = upstream_extractor()
    base = _time(baseline, items)
    up = _time(lambda item: upstream(*item), items)
    ext = _time(extract_and_match, items)
    agree = sum(extract_and_match(it) == upstream(*it) for it in items) / len(items)
    rew = _time(reward, items)
    found = sum(extract_answer(r, g["type"]).status == "found" for r, g in items)
    return [
        f"corpus: {len(items)} responses from {len(items) and len(_sample_rows())} real TRACE rows, "
        f"mean {sum(len(r) for r, _ in items) / len(items):.0f} chars, {found} found",
        f"baseline json.loads: {base:,.0f} rows/s",
        f"extract_answer + answers_match: {ext:,.0f} rows/s = {ext / TARGET_ROWS_PER_S:.2f}x target "
        f"({TARGET_ROWS_PER_S:,} rows/s), {ext / base:.3f}x baseline",
        f"trace_reward: {rew:,.0f} rows/s = {rew / TARGET_ROWS_PER_S:.2f}x target, {rew / base:.3f}x baseline",
        f"upstream extractor (the release's trace_benchmark_answer_parsing.extract_final_answer, unchanged; "
        f"string match): {up:,.0f} rows/s; verdicts agree on {agree:.1%} of rows (its contract is not "
        f"CONTRACTS.md §1: no ambiguity or duplicate-key rule, no Python literals)",
        f"RATIO extract_answer + answers_match / upstream extractor: {ext / up:.2f}x "
        f"(goal >= 2x: {'ok' if ext / up >= 2 else 'MISSED'})",
    ]


if __name__ == "__main__":
    for line in run():
        print(line)

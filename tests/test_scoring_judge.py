"""CONTRACTS §4: judge prompt building, output validation and the retry driver.

The judge model itself (Qwen3-32B) cannot run here; `generate` is scripted at
the narrowest edge (a function from messages and a token budget to text), so
everything the appliance decides about judge outputs runs for real.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from fixtures_scoring import Samples, scoring_samples  # noqa: F401 - fixture import

from trace_tui.scoring import (
    OWN_JUDGE_PROMPT,
    JudgePrompt,
    check_judge_output,
    judge_messages,
    judge_with_retries,
    parse_judge_output,
)

# The library takes the system prompt from its caller (the worker reads the release's own: test_judge_prompt.py).
PROMPT = JudgePrompt("Extract the final answer the response states.", "test")
RESPONSE = "The first bar is 3 and the second 45; I think the answer is 42, or maybe 43."


def out(status: str, answer: object, evidence: str) -> str:
    return json.dumps({"status": status, "answer": answer, "evidence": evidence}, ensure_ascii=False)


def test_messages_are_system_then_canonical_user_json() -> None:
    msgs = judge_messages("Résumé: 42", " Integer ", PROMPT)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == PROMPT.text
    assert msgs[1]["content"] == '{"answer_type":"integer","model_response":"Résumé: 42"}'
    assert PROMPT.sha256 == hashlib.sha256(PROMPT.text.encode()).hexdigest()
    # trace-tui's own prompt (a non-release judge without the release's sources) states the same contract
    for rule in ("exactly one JSON object", "untrusted", '"evidence"', "null", "A-Z"):
        assert rule in OWN_JUDGE_PROMPT.text
    assert OWN_JUDGE_PROMPT.source == "trace-tui"
    with pytest.raises(ValueError, match="answer_type"):
        judge_messages("x", "float", PROMPT)


def test_valid_outputs(scoring_samples: Samples) -> None:
    i, n, o, p = scoring_samples.integer, scoring_samples.number, scoring_samples.option, scoring_samples.pi
    cases = [
        (f"so it is {i['value']} bars", "integer", i["value"]),
        (f"about {n['value']} units", "number", n["value"]),
        (f"I pick ({o['value'].lower()})", "option_letter", o["value"]),
        (f"circumference {p['value']} cm", "string", p["value"]),
    ]
    for response, kind, answer in cases:
        evidence = response.split(" ", 1)[1]
        v = parse_judge_output(out("ok", answer, evidence), response, kind)
        assert v is not None and v.status == "ok" and v.answer == answer and v.evidence == evidence, (response, kind)
    assert parse_judge_output(out("missing", None, ""), RESPONSE, "integer").status == "missing"
    assert parse_judge_output(out("ambiguous", None, ""), RESPONSE, "integer").status == "ambiguous"
    fenced = "```json\n" + out("ok", 42, "the answer is 42") + "\n```"
    assert parse_judge_output(fenced, RESPONSE, "integer").answer == 42
    assert parse_judge_output(" \n" + out("ok", 42.0, "42") + "\n", RESPONSE, "number").answer == 42.0


INVALID = [
    ("extra-key", '{"status": "ok", "answer": 42, "evidence": "is 42", "note": 1}', "integer", "keys"),
    ("missing-key", '{"status": "ok", "answer": 42}', "integer", "keys"),
    ("duplicate-key", '{"status": "ok", "answer": 43, "answer": 42, "evidence": "is 42"}', "integer", "duplicate"),
    ("not-an-object", "[42]", "integer", "not a JSON object"),
    ("prose", "The answer is 42.", "integer", "not exactly one JSON object"),
    ("two-objects", out("ok", 42, "is 42") + out("ok", 42, "is 42"), "integer", "not exactly one"),
    ("two-fences", "```json\n{}\n```\n```json\n{}\n```", "integer", "not exactly one"),
    ("bad-status", out("found", 42, "is 42"), "integer", "status"),
    ("integer-as-float", out("ok", 42.0, "is 42"), "integer", "not a valid integer"),
    ("integer-as-string", out("ok", "42", "is 42"), "integer", "not a valid integer"),
    ("boolean", out("ok", True, "is 42"), "integer", "not a valid integer"),
    ("nan-number", '{"status": "ok", "answer": NaN, "evidence": "is 42"}', "number", "non-finite"),
    ("lowercase-letter", out("ok", "b", "(b)"), "option_letter", "option_letter"),
    ("two-letters", out("ok", "AB", "AB"), "option_letter", "option_letter"),
    ("string-as-number", out("ok", 42, "is 42"), "string", "not a valid string"),
    ("evidence-not-verbatim", out("ok", 42, "answer: 42"), "integer", "verbatim"),
    ("evidence-without-answer", out("ok", 42, "first bar is 3"), "integer", "does not contain"),
    ("evidence-near-miss-number", out("ok", 4, "is 42"), "integer", "does not contain"),
    ("empty-evidence-ok", out("ok", 42, ""), "integer", "evidence is empty"),
    ("evidence-not-string", out("ok", 42, 42), "integer", "evidence is not a string"),
    ("missing-with-answer", out("missing", 42, ""), "integer", "null"),
    ("ambiguous-with-evidence", out("ambiguous", None, "42, or maybe 43"), "integer", "null"),
]


@pytest.mark.parametrize(("case", "text", "kind", "reason"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_outputs(case: str, text: str, kind: str, reason: str) -> None:
    verdict, why = check_judge_output(text, RESPONSE, kind)
    assert verdict is None and reason in why, why
    assert parse_judge_output(text, RESPONSE, kind) is None


def test_number_evidence_matches_by_value() -> None:
    assert parse_judge_output(out("ok", 0.5, "ratio .50"), "the ratio .50 it is", "number").answer == 0.5
    assert parse_judge_output(out("ok", -1.5, "is -1.5"), "x is -1.5", "number") is not None
    assert parse_judge_output(out("ok", 1.5, "is -1.5"), "x is -1.5", "number") is None


class Script:
    """A scripted judge: one output per call, recording the budgets it was given."""

    def __init__(self, *outputs: str) -> None:
        self.outputs = list(outputs)
        self.calls: list[tuple[list[dict[str, str]], int]] = []

    def __call__(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        self.calls.append((messages, max_tokens))
        return self.outputs.pop(0)


def test_first_valid_output_resolves() -> None:
    gen = Script(out("ok", 42, "the answer is 42"))
    res = judge_with_retries(gen, RESPONSE, "integer", prompt=PROMPT)
    assert (res.status, res.value, res.judge_status) == ("resolved", 42, "ok")
    assert [b for _, b in gen.calls] == [128]
    assert gen.calls[0][0] == judge_messages(RESPONSE, "integer", PROMPT)


def test_retry_succeeds_at_256() -> None:
    gen = Script('{"status": "ok", "answer": 42, "evid', out("ambiguous", None, ""))
    res = judge_with_retries(gen, RESPONSE, "integer", prompt=PROMPT)
    assert (res.status, res.value, res.judge_status) == ("resolved", None, "ambiguous")
    assert [(a.max_tokens, a.valid) for a in res.attempts] == [(128, False), (256, True)]
    assert res.attempts[0].reason == "not exactly one JSON object"


def test_still_invalid_after_512_is_unresolved() -> None:
    gen = Script(out("ok", 42, "not in response"), out("ok", 7, "is 42"), "{}")
    res = judge_with_retries(gen, RESPONSE, "integer", prompt=PROMPT)
    assert res.status == "unresolved" and res.value is None and res.verdict is None
    assert [a.max_tokens for a in res.attempts] == [128, 256, 512]
    record = res.to_dict()
    json.dumps(record)
    assert record["prompt_sha256"] == PROMPT.sha256 and len(record["attempts"]) == 3


def test_custom_budgets() -> None:
    gen = Script("x", out("ok", "B", "B"))
    res = judge_with_retries(gen, "B", "option_letter", budgets=(64, 1024), prompt=PROMPT)
    assert res.value == "B" and [b for _, b in gen.calls] == [64, 1024]


def test_validation_row_uses_judge_only_when_needed(scoring_samples: Samples) -> None:
    from trace_tui.scoring import score_validation_row

    gt = scoring_samples.integer
    v = gt["value"]
    never = Script()  # calling it would fail: found rows never reach the judge
    row = score_validation_row(f'{{"answer": {v}}}', gt, never, prompt=PROMPT)
    assert (row.source, row.value, row.correct, row.judge) == ("extraction", v, True, None) and not never.calls

    ambiguous = f"Answer: {v}\nFinal answer: {v + 1}\nI settle on {v}."
    row = score_validation_row(ambiguous, gt, Script(out("ok", v, f"I settle on {v}")), prompt=PROMPT)
    assert (row.extraction.status, row.source, row.value, row.correct) == ("ambiguous", "judge", v, True)

    row = score_validation_row(ambiguous, gt, Script("no", "no", "no"), prompt=PROMPT)
    assert (row.source, row.value, row.correct, row.judge.status) == (None, None, False, "unresolved")

    row = score_validation_row("I cannot tell.", gt)  # no judge configured: unresolved, scores 0
    assert (row.extraction.status, row.correct, row.judge) == ("missing", False, None)
    json.dumps(row.to_dict())

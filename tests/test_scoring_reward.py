"""CONTRACTS §3: the training reward, 0.95 x accuracy + 0.05 x format, on real TRACE answers."""

from __future__ import annotations

import json

import pytest
from fixtures_scoring import Samples, scoring_samples, text_of  # noqa: F401 - fixture import

from trace_tui.scoring import reward_answer, reward_components, trace_reward
from trace_tui.scoring.reward import final_block, scan_objects


def test_release_prompt_format_on_every_row(scoring_samples: Samples) -> None:
    """The release system prompt asks for a trailing {"answer": ...}: every row scores 1.0 that way."""
    for row in scoring_samples.rows:
        gt = row["answer_gt"]
        j = json.dumps(gt["value"], ensure_ascii=False)
        assert trace_reward('Looking at the image.\n{"answer": %s}' % j, gt) == 1.0, gt
        assert trace_reward('```json\n{"answer": %s}\n```\n' % j, gt) == 1.0, gt
        assert trace_reward('{"answer": %s, "annotation": []}' % j, gt) == 0.95, gt
        assert trace_reward('{"answer": "wrong answer"}', gt) == 0.05, gt


# (id, sample key, template, reward). <J> is the JSON form of the real answer, <V> its prose form.
CASES = [
    ("json-object", "integer", '{"answer": <J>}', 1.0),
    ("object-then-whitespace", "integer", '{"answer": <J>}\n\n  ', 1.0),
    ("literal-object", "option", "{'answer': <J>}", 1.0),
    ("fenced-json", "number", '```json\n{"answer": <J>}\n```', 1.0),
    ("fenced-JSON-no-newline", "number", '```JSON{"answer": <J>}```', 1.0),
    ("fenced-plain", "string", '```\n{"answer": <J>}\n```', 1.0),
    ("string-number-answer", "integer", '{"answer": "<V>"}', 1.0),  # parsed JSON-like for non-string targets
    ("duplicate-key-last-wins", "integer", '{"answer": 0, "answer": <J>}', 1.0),
    ("extra-key-no-format", "integer", '{"answer": <J>, "why": "bars"}', 0.95),
    ("annotation-no-format", "integer", '{"annotation": {}, "answer": <J>}', 0.95),
    ("object-not-at-end", "integer", '{"answer": <J>} is it', 0.95),
    ("wrong-answer-format-only", "integer", '{"answer": 0}', 0.05),
    ("bare-value-whole-response", "integer", "<V>", 0.95),
    ("bare-prose-whole-response", "integer", "It is <V>", 0.0),
    ("answer-tag-body-no-key", "integer", "<answer><V></answer>", 0.0),
    ("answer-tag-object", "integer", '<answer>{"answer": <J>}</answer>', 0.95),
    ("last-object-wins", "integer", '{"answer": 0}\n{"answer": <J>}', 1.0),
    ("final-block-payload-over-earlier", "integer", '{"answer": <J>}\n{"answer": 0}', 0.05),
    ("final-without-keys-uses-list", "integer", '{"answer": <J>} then {"note": 1}', 0.95),
    ("final-null-answer-falls-to-whole-text", "integer", '{"answer": null}', 0.05),
    ("annotation-only-whole-text", "integer", '{"annotation": [1, 2]}', 0.0),
    ("string-target-compared-as-is", "string", '{"answer": "  <V> "}', 1.0),
    ("string-target-case", "pi", '{"answer": "<V>"}', 1.0),
    ("option-lowercase", "option", '{"answer": "<V>"}', 1.0),
    ("option-parenthesised-wrong", "option", '{"answer": "(<V>)"}', 0.05),
    ("nan-allowed", "number", '{"answer": NaN}', 0.05),
    ("object-in-string-not-counted", "integer", 'say "{\\"answer\\": <J>}"', 0.0),
    ("quote-opens-string-outside-objects", "integer", 'He said "hi {"answer": <J>}', 0.0),
    ("single-quotes-mean-nothing", "integer", "it's {'answer': <J>}", 1.0),
    # The final fenced block spans both fences; its payload is its first mapping, scanning forward.
    ("fence-spanning-several", "integer", '```json\n{"answer": 0}\n```\nthen\n```json\n{"answer": <J>}\n```', 0.0),
    ("fence-spanning-several-first-right", "integer", '```json\n{"answer": <J>}\n```\nthen\n```json\n{"answer": 0}\n```', 0.95),
]


@pytest.mark.parametrize(("case", "key", "template", "reward"), CASES, ids=[c[0] for c in CASES])
def test_reward(scoring_samples: Samples, case: str, key: str, template: str, reward: float) -> None:
    gt = scoring_samples.gt(key)
    response = template.replace("<J>", json.dumps(gt["value"], ensure_ascii=False)).replace(
        "<V>", text_of(gt["value"])
    )
    assert trace_reward(response, gt) == reward, (response, reward_components(response, gt))


def test_reward_values_are_exact() -> None:
    gt = {"type": "integer", "value": 7}
    assert {trace_reward(r, gt) for r in ('{"answer": 7}', '{"answer": 7, "x": 1}', '{"answer": 8}', "no")} == {
        1.0, 0.95, 0.05, 0.0,
    }


def test_final_block_rules() -> None:
    assert final_block('text ```json {"answer": 1} ```  \n') == '{"answer": 1}'
    # The block starts at the first backticks from which a match reaches the end.
    assert final_block("```a``` b ```c```") == "a``` b ```c"
    assert final_block("``` ```") is None  # empty content: no fenced block, no object
    assert final_block('{"a": 1} x') is None
    assert final_block('x {"a": {"b": 2}}') == '{"a": {"b": 2}}'
    assert final_block("{unclosed {") is None


def test_scanner_differs_from_extraction_scanner() -> None:
    # Double quotes count everywhere, single quotes nowhere.
    assert scan_objects('"{" {"a": "}"}') == [(4, 14)]
    assert scan_objects("'{' {}") == []  # the single quotes do not protect the first brace
    assert scan_objects("it's {}") == [(5, 7)]
    assert scan_objects('} {"a": "\\"}"} {}') == [(2, 14), (15, 17)]


def test_reward_answer_whole_response_when_nothing_found() -> None:
    assert reward_answer("just 7") == "just 7"
    assert reward_answer('{"annotation": 1}') == '{"annotation": 1}'
    assert reward_answer('{"annotation": 1, "answer": 3}') == 3


def test_string_target_keeps_text(scoring_samples: Samples) -> None:
    gt = next(g for g in scoring_samples.by_type["string"] if g["value"].isdigit())  # "2017"
    assert trace_reward('{"answer": "%s"}' % gt["value"], gt) == 1.0
    assert trace_reward('{"answer": %s}' % gt["value"], gt) == 0.05  # a number never equals a string
    integer_gt = {"type": "integer", "value": int(gt["value"])}
    assert trace_reward('{"answer": "%s"}' % gt["value"], integer_gt) == 1.0


def test_bad_inputs() -> None:
    assert trace_reward(None, {"type": "integer", "value": 7}) == 0.0
    with pytest.raises(ValueError, match="answer_gt"):
        trace_reward('{"answer": 7}', {"type": "integer"})
    with pytest.raises(TypeError):
        trace_reward(7, {"type": "integer", "value": 7})  # type: ignore[arg-type]

"""CONTRACTS §1, rule by rule, on responses built around real TRACE answers.

Each case is a response template over a real `answer_gt` from TRACE_SAMPLE_DIR:
`<V>` is the answer as prose writes it, `<J>` its JSON form. A found case must
give a value that matches the reference under §2.
"""

from __future__ import annotations

import json

import pytest
from fixtures_scoring import Samples, scoring_samples, text_of  # noqa: F401 - fixture import

from trace_tui.scoring import answers_match, extract_answer

TYPES = {"I": "integer", "N": "number", "NEG": "negative", "O": "option", "S": "string", "P": "pi"}


def render(template: str, gt: dict) -> str:
    return template.replace("<V>", text_of(gt["value"])).replace("<J>", json.dumps(gt["value"], ensure_ascii=False))


# (id, sample key, template, status, route of the reported candidate)
CASES = [
    # --- 1. answer tag
    ("tag-terminal", "I", "Reasoning.\n<answer><V></answer>", "found", "answer_tag"),
    ("tag-final_answer", "I", "<final_answer><V></final_answer>", "found", "answer_tag"),
    ("tag-final-answer", "N", "<final-answer><V></final-answer>", "found", "answer_tag"),
    ("tag-finalanswer-case", "O", "<FinalAnswer><V></FINALANSWER>", "found", "answer_tag"),
    ("tag-across-lines", "S", "<answer>\n  <V>\n</answer>", "found", "answer_tag"),
    ("tag-json-object-body", "I", '<answer>{"answer": <J>}</answer>', "found", "answer_tag"),
    ("tag-json-string-body", "P", "<answer><J></answer>", "found", "answer_tag"),
    ("tag-trailing-whitespace-terminal", "O", "<answer><V></answer>\n\n \t", "found", "answer_tag"),
    ("tag-mismatched-close", "I", "<answer><V></final_answer>", "missing", None),
    ("tag-attribute", "I", '<answer id="1"><V></answer>', "missing", None),
    ("tag-space-inside", "I", "< answer ><V></ answer >", "missing", None),
    ("tag-empty-body-shadows", "I", "Answer: <V>\n<answer></answer>", "missing", None),
    ("tag-list-body-nothing", "I", "<answer>[<J>]</answer>", "missing", None),
    ("tag-malformed-object-not-text", "S", '<answer>{"answer": <J></answer>', "missing", None),
    ("tag-quote-start-not-text", "S", "<answer>'<V></answer>", "missing", None),
    ("tag-bracket-start-not-text", "O", "<answer>[<V></answer>", "missing", None),
    ("tag-mapping-without-answer", "I", '<answer>{"value": <J>}</answer>', "missing", None),
    ("tag-shortest-body-last-terminal", "I", "<answer>3</answer> then <answer><V></answer>", "found", "answer_tag"),
    ("tag-not-terminal-agrees", "I", "<answer><V></answer> is what I get.\nAnswer: <V>", "found", "answer_tag"),
    # --- 2. code fence
    ("fence-json-terminal", "I", 'Work.\n```json\n{"answer": <J>}\n```', "found", "code_fence"),
    ("fence-python-literal", "S", "```python\n{'answer': <J>}\n```", "found", "code_fence"),
    ("fence-py-crlf", "N", '```py\r\n{"answer": <J>}\r\n```', "found", "code_fence"),
    ("fence-no-language-scalar-at-end", "I", "```\n<V>\n```", "found", "code_fence"),
    ("fence-spaces-around-language", "O", "``` \tJSON \t\n<J>\n```", "found", "code_fence"),
    ("fence-text-fallback-at-end", "O", "```\n<V>\n```", "found", "code_fence"),
    ("fence-other-language-not-fence", "I", "```text\n<V>\n```", "missing", None),
    ("fence-scalar-not-at-end-ignored", "I", "```\n7\n```\nAnswer: <V>", "found", "answer_line"),
    ("fence-object-not-at-end", "I", '```json\n{"answer": <J>}\n```\nThat is all.', "found", "balanced_object"),
    ("fence-unclosed", "I", "```json\n<V>", "missing", None),
    # --- 3. structured section
    ("section-final-json", "I", 'Final JSON: {"answer": <J>}', "found", "balanced_object"),
    ("section-final-answer-json-underscores", "N", 'final_answer_json: {"answer": <J>}', "found", "balanced_object"),
    ("section-answer-json-dashes", "O", 'answer--json  : {"answer": <J>}', "found", "balanced_object"),
    ("section-zero-separators", "S", 'FINALJSON:{"answer": <J>}', "found", "balanced_object"),
    ("section-indented-tab", "I", '\t  final json: {"answer": <J>}', "found", "balanced_object"),
    ("section-body-next-line", "I", 'final json:\n{"answer": <J>}', "found", "balanced_object"),
    ("section-scalar", "I", "Final JSON: <J>", "found", "structured_section"),
    ("section-string-scalar", "P", "answer json:\n  <J>\n", "found", "structured_section"),
    ("section-literal-scalar", "O", "Final Answer JSON: '<V>'", "found", "structured_section"),
    ("section-null-shadows", "I", "Answer: <V>\nfinal json: null", "missing", None),
    ("section-unparsed-no-text-fallback", "I", "Answer: <V>\nfinal json: <V> (I think)", "found", "answer_line"),
    ("section-fullwidth-colon-not-section", "I", 'final json： {"answer": <J>}', "found", "balanced_object"),
    ("section-prefixed-not-section", "I", "**final json**: <J>", "missing", None),
    # --- 4. balanced object
    ("object-terminal", "I", 'The bars give <V>.\n{"answer": <J>}', "found", "balanced_object"),
    ("object-apostrophe-outside-ignored", "S", 'It\'s clear. {"answer": <J>}', "found", "balanced_object"),
    ("object-brace-in-string", "S", '{"note": "a } here", "answer": <J>}', "found", "balanced_object"),
    ("object-escaped-quote", "S", '{"note": "say \\"}\\"", "answer": <J>}', "found", "balanced_object"),
    ("object-single-quoted-literal", "O", "{'answer': <J>}", "found", "balanced_object"),
    ("object-nested-only-outermost", "I", '{"detail": {"answer": 1}, "answer": <J>}', "found", "balanced_object"),
    ("object-key-case-and-spaces", "N", '{" Answer ": <J>}', "found", "balanced_object"),
    ("object-unclosed-swallows-rest", "I", 'Set {x, y.\n{"answer": <J>}', "missing", None),
    ("object-without-answer-key", "I", '{"result": <J>}', "missing", None),
    ("object-two-keys-ambiguous", "I", '{"answer": <J>, "Answer": 0}', "ambiguous", None),
    ("object-quoted-brace-outside-still-opens", "I", 'He said "{" then {"answer": <J>}', "missing", None),
    ("object-stray-close-ignored", "I", 'a } b {"answer": <J>}', "found", "balanced_object"),
    ("object-mixed-quotes-literal", "I", "{'note': \"it's\", 'answer': <J>}", "found", "balanced_object"),
    ("object-not-terminal", "I", '{"answer": <J>} is my answer.', "found", "balanced_object"),
    # --- 5. final answer line
    ("final-answer-colon", "I", "So.\nFinal answer: <V>", "found", "final_answer"),
    ("final-answer-the-is", "N", "The final answer is <V>", "found", "final_answer"),
    ("final-answer-equals", "NEG", "FINAL ANSWER = <V>", "found", "final_answer"),
    ("final-answer-fullwidth", "P", "Final answer：<V>", "found", "final_answer"),
    ("final-answer-tabs", "O", "\tThe\tfinal \tanswer\t:\t<V>\t ", "found", "final_answer"),
    ("final-answer-bold-not-route", "I", "**Final answer:** <V>", "missing", None),
    ("final-answer-one-separator", "I", "Final answer is: <V>", "missing", None),
    ("final-answer-inline-not-route", "I", "Thus the final answer is <V>", "missing", None),
    ("final-answer-empty", "I", "Final answer:   \nnothing", "missing", None),
    # --- 6. answer line
    ("answer-line-colon", "S", "Answer: <V>", "found", "answer_line"),
    ("answer-line-is", "I", "answer is <V>", "found", "answer_line"),
    ("answer-line-the-not-route", "I", "The answer: <V>", "missing", None),
    ("answer-line-quoted-json-string", "I", 'Answer: "<V>"', "found", "answer_line"),
    # --- 7. boxed
    ("boxed", "I", "Hence \\boxed{<V>}.", "found", "boxed"),
    ("boxed-space-case", "N", "\\BOXED \n{<V>}", "found", "boxed"),
    ("boxed-nested", "I", "\\boxed{\\boxed{<V>}}", "found", "boxed"),
    ("boxed-text-option", "O", "\\boxed{\\text{<V>}}", "found", "boxed"),
    ("boxed-mathrm-string", "S", "\\boxed{\\mathrm{<V>}}", "found", "boxed"),
    ("boxed-unclosed-skipped", "I", "\\boxed{<V>", "missing", None),
    ("boxed-pi", "P", "The circumference is \\boxed{<V>}", "found", "boxed"),
    # --- 8. terminal option
    ("option-bare-letter", "O", "The tallest bar is blue.\n<V>", "found", "terminal_option"),
    ("option-parenthesised", "O", "Looking at it...\n  (<V>)  \n\n", "found", "terminal_option"),
    ("option-prefix-dot", "O", "Done.\nOption <V>.", "found", "terminal_option"),
    ("option-lowercase-bracket", "O", "[b]", "found", "terminal_option"),
    ("option-double-space-not-option", "O", "Option  <V>", "missing", None),
    ("option-sentence-not-option", "O", "<V> is correct", "missing", None),
    ("option-integer-type-no-route", "I", "Summing up\nB", "missing", None),
    # --- decision
    ("explicit-agree", "I", "Answer: <V>\nFinal answer: <V>.\n\\boxed{<V>} done", "found", "final_answer"),
    ("explicit-disagree", "I", "Answer: <V>\nFinal answer: 3", "ambiguous", None),
    ("terminal-wins-over-explicit", "I", 'Answer: 3\n{"answer": <J>}', "found", "balanced_object"),
    ("rejected-terminal-shadows", "I", 'Answer: <V>\n{"answer": "many"}', "missing", None),
    ("structured-non-terminal-joins-vote", "I", '{"answer": <J>} hmm\nAnswer: 3', "ambiguous", None),
    # --- parsing refusals
    ("json-duplicate-key", "I", '{"answer": <J>, "answer": <J>}', "missing", None),
    ("json-duplicate-nested", "I", '{"answer": <J>, "x": {"k": 1, "k": 2}}', "missing", None),
    ("json-nan-then-literal-fails", "I", '{"answer": <J>, "x": NaN}', "missing", None),
    ("json-infinity", "N", '{"answer": <J>, "x": -Infinity}', "missing", None),
    ("literal-trailing-comma", "I", "{'answer': <J>,}", "found", "balanced_object"),
    ("literal-duplicate-1-true", "I", "{1: 'a', True: 'b', 'answer': <J>}", "missing", None),
    ("literal-duplicate-1-float", "I", "{1: 'a', 1.0: 'b', 'answer': <J>}", "missing", None),
    ("literal-dict-unpacking", "I", "{**{'a': 1}, 'answer': <J>}", "missing", None),
    ("literal-tuple-rejected", "I", "{'answer': (<J>,)}", "missing", None),
]


@pytest.mark.parametrize(("case", "key", "template", "status", "route"), CASES, ids=[c[0] for c in CASES])
def test_rule(scoring_samples: Samples, case: str, key: str, template: str, status: str, route: str | None) -> None:
    gt = scoring_samples.gt(TYPES[key])
    response = render(template, gt)
    ex = extract_answer(response, gt["type"])
    assert (ex.status, ex.route) == (status, route), (response, [c.to_dict() for c in ex.candidates])
    if status == "found":
        assert answers_match(ex.value, gt), (response, ex.value, gt)
    else:
        assert ex.value is None


def test_every_sample_row_in_every_form(scoring_samples: Samples) -> None:
    forms = {
        "json_tail": ('I counted carefully.\n{"answer": <J>}', "balanced_object"),
        "fence": ('```json\n{"answer": <J>}\n```', "code_fence"),
        "tag": ("<answer><J></answer>", "answer_tag"),
        "section": ("final json: <J>", "structured_section"),
        "final": ("Reasoning.\nFinal answer: <V>\nThanks for asking.", "final_answer"),
        "line": ("Answer: <V>", "answer_line"),
        "boxed": ("so \\boxed{<V>} it is", "boxed"),
    }
    checked = 0
    for row in scoring_samples.rows:
        gt = row["answer_gt"]
        for name, (template, route) in forms.items():
            ex = extract_answer(render(template, gt), gt["type"])
            assert ex.status == "found" and ex.route == route, (name, gt, ex)
            assert answers_match(ex.value, gt), (name, gt, ex.value)
            checked += 1
    assert checked == 262 * len(forms)


def test_numeric_looking_string_answers(scoring_samples: Samples) -> None:
    """A string task whose real answer is "2017": a JSON number is rejected, text and JSON strings are not."""
    gt = next(g for g in scoring_samples.by_type["string"] if g["value"].isdigit())
    v = gt["value"]
    assert extract_answer(f"<answer>{v}</answer>", "string").status == "missing"
    assert extract_answer('{"answer": %s}' % v, "string").status == "missing"
    for response in (f"Answer: {v}", f'<answer>"{v}"</answer>', '{"answer": "%s"}' % v, f"\\boxed{{{v}}}"):
        ex = extract_answer(response, "string")
        assert ex.status == "found" and answers_match(ex.value, gt), response


def test_option_rows_end_with_the_letter(scoring_samples: Samples) -> None:
    for gt in scoring_samples.by_type["option_letter"]:
        ex = extract_answer(f"Comparing the panels...\n({gt['value'].lower()})", "option_letter")
        assert (ex.status, ex.value, ex.route) == ("found", gt["value"], "terminal_option")


# --- rules checked on their exact outputs


def test_typed_values(scoring_samples: Samples) -> None:
    i, n, s, p = scoring_samples.integer, scoring_samples.number, scoring_samples.string, scoring_samples.pi
    assert extract_answer(f"Answer: {i['value']}.0", "integer").value == i["value"]
    assert type(extract_answer(f"Answer: {i['value']}.0", "integer").value) is int
    assert extract_answer(f"Answer: {n['value']}", "number").value == n["value"]
    assert extract_answer(f"Answer:  {s['value']}  ", "string").value == s["value"]
    assert extract_answer(f"<answer> {p['value']} </answer>", "string").value == p["value"]


def test_string_case_kept_so_case_variants_disagree(scoring_samples: Samples) -> None:
    v = scoring_samples.string["value"]
    ex = extract_answer(f"Answer: {v}\nFinal answer: {v.upper()}", "string")
    assert ex.status == "ambiguous"


def test_terminal_span_is_rstrip_length(scoring_samples: Samples) -> None:
    j = json.dumps(scoring_samples.integer["value"])
    ex = extract_answer('{"answer": %s}\n \t\r\n' % j, "integer")
    (c,) = ex.candidates
    assert c.terminal and c.span == (0, len('{"answer": %s}' % j))
    ex = extract_answer('{"answer": %s}.' % j, "integer")
    assert not ex.candidates[0].terminal and ex.candidates[0].priority == "structured"


def test_tag_span_is_whole_element() -> None:
    ex = extract_answer("x <answer>7</answer>", "integer")
    assert ex.candidate.span == (2, 20) and ex.candidate.terminal


def test_section_with_object_is_reported_as_the_object() -> None:
    # Both are terminal; route order puts the balanced object first.
    ex = extract_answer('Final JSON: {"answer": 7}', "integer")
    assert [c.route for c in ex.candidates] == ["structured_section", "balanced_object"]
    assert all(c.terminal for c in ex.candidates) and ex.route == "balanced_object"


def test_section_span_and_every_line_gives_candidates() -> None:
    text = 'final json: {"answer": 1}\nfinal json: {"answer": 1}'
    ex = extract_answer(text, "integer")
    # The first body runs to the end and does not parse; the second does.
    assert [c.span for c in ex.candidates if c.route == "structured_section"] == [(26, len(text))]
    assert ex.status == "found" and ex.value == 1


def test_dedup_identical_candidates() -> None:
    ex = extract_answer('{"answer": 7, " answer ": 7}', "integer")
    assert len(ex.candidates) == 1 and ex.status == "found"
    ex = extract_answer('{"answer": 7, "ANSWER": 7.0}', "integer")
    assert len(ex.candidates) == 2 and ex.status == "found" and ex.value == 7


def test_true_and_1_are_distinct_candidates() -> None:
    ex = extract_answer('{"answer": true, "Answer": 1}', "integer")
    assert [(c.raw, c.accepted) for c in ex.candidates] == [(True, False), (1, True)]
    assert ex.status == "found" and ex.value == 1


def test_reported_candidate_is_latest_ending_in_route() -> None:
    ex = extract_answer("Answer: 7\nAnswer: 7.0", "integer")
    assert ex.status == "found" and ex.raw == "7.0"


def test_reported_candidate_route_order() -> None:
    ex = extract_answer("\\boxed{7}\nAnswer: 7\nFinal answer: 7\nok", "integer")
    assert ex.route == "final_answer"
    ex = extract_answer('<answer>{"answer": 7}</answer>', "integer")
    assert ex.route == "answer_tag"  # the inner object is not terminal


def test_nested_boxes_each_a_candidate() -> None:
    ex = extract_answer("\\boxed{\\boxed{7}}", "integer")
    assert [c.raw for c in ex.candidates] == ["\\boxed{7}", "7"]
    assert ex.status == "found"


def test_explicit_raw_values() -> None:
    ex = extract_answer("Final answer is: 7", "integer")
    assert [c.raw for c in ex.candidates] == [": 7"] and ex.candidates[0].rejection
    ex = extract_answer("Final answer: 7   \nmore", "integer")
    assert ex.raw == "7" and ex.candidate.span == (0, 15)


def test_code_fence_non_terminal_scalar_gives_nothing() -> None:
    ex = extract_answer("```\n7\n```\nmore", "integer")
    assert ex.candidates == () and ex.status == "missing"


def test_candidate_parsers() -> None:
    assert extract_answer('{"answer": 7}', "integer").candidate.parser == "json"
    assert extract_answer("{'answer': 7}", "integer").candidate.parser == "python-literal"
    assert extract_answer("Answer: 7", "integer").candidate.parser == "text"
    assert extract_answer("<answer>B</answer>", "option_letter").candidate.parser == "text"


def test_literal_hex_and_underscore(scoring_samples: Samples) -> None:
    v = scoring_samples.integer["value"]
    assert extract_answer("{'answer': %s}" % hex(v), "integer").value == v
    assert extract_answer("{'answer': 1_0}", "integer").value == 10


def test_json_duplicate_never_retried_as_literal() -> None:
    # "a\/b" and "a/b" are one key in JSON but two in Python: the JSON refusal is final.
    ex = extract_answer('{"a\\/b": 1, "a/b": 2, "answer": 7}', "integer")
    assert ex.status == "missing" and ex.candidates == ()


def test_empty_and_none_responses() -> None:
    for response in (None, "", "   \n\t "):
        ex = extract_answer(response, "integer")
        assert (ex.status, ex.value, ex.candidates) == ("missing", None, ())


def test_answer_type_normalised_and_validated() -> None:
    assert extract_answer("Answer: B", "  Option_Letter ").value == "B"
    for bad in ("float", "", "options", None, 3):
        with pytest.raises(ValueError, match="answer_type"):
            extract_answer("Answer: 7", bad)  # type: ignore[arg-type]


def test_to_dict_is_json_serialisable() -> None:
    ex = extract_answer('{"answer": [1, 2]}\nAnswer: 7\n{"answer": NaN}', "number")
    json.dumps(ex.to_dict())
    assert ex.to_dict()["contract"] == "trace-validation-answer-extraction-v1"


@pytest.mark.parametrize("response", [
    "Answer:\n{'answer': 1if 1 else 2}",  # "invalid decimal literal"
    "<answer>[1and 2]</answer>",
    "<answer>{'answer': '\\d'}</answer>",  # an invalid escape
    "<answer>1if 1 else 2</answer>",
    "```\n[1and 2]\n```",
])
def test_parsing_a_response_never_prints_a_python_warning(response):
    """A response is data: Python's parser warns about some texts on stderr (once per process, in
    the middle of a run's output), and the extraction keeps those warnings to itself."""
    import warnings

    from trace_tui.scoring import trace_reward

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        extract_answer(response, "integer")
        trace_reward(response, {"type": "integer", "value": 1})  # §3 has a parser of its own
    assert [str(w.message) for w in caught] == []

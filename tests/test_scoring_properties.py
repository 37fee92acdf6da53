"""Properties that the contracts (CONTRACTS §1-4) make true of every response."""

from __future__ import annotations

import json
import string
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_tui.scoring import (
    ANSWER_TYPES,
    answers_match,
    extract_answer,
    parse_judge_output,
    reward_components,
    trace_reward,
)

# Fragments every route reacts to, so generated texts hit the interesting paths.
FRAGMENTS = [
    "answer", "Answer: ", "Final answer: ", "the final answer is ", "final json:", "answer_json: ",
    "<answer>", "</answer>", "<final_answer>", "</final_answer>", "```json\n", "```\n", "```", "{", "}",
    '"answer": ', "'answer': ", '"', "'", "\\boxed{", "\\text{", "B", "(c)", "Option D", "42", "-1.5", "7.", "1e-400",
    "20π", "NaN", "true", "null", "[", "]", ",", ":", "\n", "\r\n", " ", "\t", "\\", "：", "is ",
]
texts = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join),
    st.text(max_size=60),
)
whitespace = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2028\u3000", min_size=1, max_size=5)
kinds = st.sampled_from(ANSWER_TYPES)
# Prefixes that cannot open an object, a string, a fence or a tag around the tail.
prefixes = st.text(alphabet=string.ascii_letters + string.digits + " .,:;!?()-\n", max_size=80)
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(ex):
    return ex.status, ex.value, ex.route, ex.candidates


@PROPS
@given(texts, whitespace, kinds)
def test_trailing_whitespace_never_changes_the_result(text: str, ws: str, kind: str) -> None:
    assert outcome(extract_answer(text + ws, kind)) == outcome(extract_answer(text, kind))


@PROPS
@given(texts, kinds)
def test_decision_is_consistent_with_candidates(text: str, kind: str) -> None:
    ex = extract_answer(text, kind)
    keys = [c.key() for c in ex.candidates]
    assert len(keys) == len(set(keys))  # identical candidates count once
    terminal = [c for c in ex.candidates if c.terminal]
    pool = [c for c in (terminal or ex.candidates) if c.accepted]
    if ex.status == "found":
        assert ex.candidate in pool and len({c.canonical for c in pool}) == 1
        assert ex.value == ex.candidate.value and ex.route == ex.candidate.route
    elif ex.status == "ambiguous":
        assert len({c.canonical for c in pool}) > 1 and ex.value is None
    else:
        assert not pool and ex.value is None


def valid_value(kind: str):
    if kind == "integer":
        return st.integers(min_value=-(10**30), max_value=10**30)
    if kind == "number":
        return st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False))
    if kind == "option_letter":
        return st.builds(lambda l, f: f.format(l), st.sampled_from(string.ascii_letters),
                         st.sampled_from(["{}", "({})", "[{}]", "{})", "option {}", "{}."]))
    return st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != "")


@st.composite
def tail_cases(draw):
    kind = draw(kinds)
    return kind, draw(valid_value(kind)), draw(prefixes)


@PROPS
@given(tail_cases())
def test_response_ending_in_answer_object_is_found(case) -> None:
    kind, v, prefix = case
    ex = extract_answer(prefix + "\n" + json.dumps({"answer": v}), kind)
    assert ex.status == "found", ex
    if kind in ("integer", "number"):
        assert ex.candidate.canonical == Decimal(repr(v) if isinstance(v, float) else v)
    elif kind == "option_letter":
        assert ex.value == v.strip("()[].").replace("option ", "").upper()
    else:
        assert ex.value == v.strip()


@PROPS
@given(texts, st.sampled_from([("integer", 42), ("number", -1.5), ("option_letter", "B"), ("string", "20π")]))
def test_reward_takes_only_four_values(text: str, gt) -> None:
    assert trace_reward(text, {"type": gt[0], "value": gt[1]}) in (0.0, 0.05, 0.95, 1.0)


@PROPS
@given(tail_cases())
def test_reward_of_trailing_answer_object(case) -> None:
    kind, v, prefix = case
    response = prefix + "\n" + json.dumps({"answer": v})
    assert reward_components(response, {"type": kind, "value": v}) == (1, 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@PROPS
@given(json_values)
def test_match_is_reflexive_and_survives_json(value) -> None:
    assert answers_match(value, {"value": value})
    assert answers_match(json.loads(json.dumps(value)), {"value": value})


@PROPS
@given(prefixes, st.integers(0, 10**9), prefixes)
def test_judge_accepts_verbatim_evidence_with_the_answer(before: str, n: int, after: str) -> None:
    response = f"{before} total {n}{after[:1] and ' '}{after}"
    evidence = f"total {n}"
    verdict = parse_judge_output(
        json.dumps({"status": "ok", "answer": n, "evidence": evidence}), response, "integer"
    )
    assert verdict is not None and verdict.answer == n
    forged = json.dumps({"status": "ok", "answer": n, "evidence": evidence + " forged"})
    assert parse_judge_output(forged, response, "integer") is None or (evidence + " forged") in response


# --- the fast paths agree with the plain definitions

from trace_tui.scoring.routes import (  # noqa: E402
    ANSWER_LINE, ANSWER_LINES, ANSWER_LINES_AT, ANSWER_LINES_HITS, FINAL_ANSWER, SECTION, SECTION_AT, SECTION_HITS,
    line_matches, objects,
)
from trace_tui.scoring.reward import scan_objects  # noqa: E402

scanner_texts = st.text(alphabet='{}"\'\\ ab\n', max_size=40)
line_texts = st.lists(
    st.sampled_from(["answer", "ANSWER", "anſwer", "final", " ", "\t", "\n", "json", "_", "-", ":", "is", "the ",
                     "İ", "ı", "IS", "=", "JSON", "x", "7", "："]),
    max_size=16,
).map("".join)


def reference_balanced(text: str) -> list[tuple[int, int]]:
    """§1 route 4 written as a plain character loop."""
    spans, depth, start, quote, i = [], 0, 0, None, 0
    while i < len(text):
        ch = text[i]
        if depth == 0:
            if ch == "{":
                depth, start = 1, i
        elif quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
        i += 1
    return spans


def reference_scan(text: str) -> list[tuple[int, int]]:
    """§3's scanner written as a plain character loop."""
    spans, depth, start, in_string, i = [], 0, 0, False, 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
        i += 1
    return spans


@PROPS
@given(scanner_texts)
def test_scanners_match_their_plain_definitions(text: str) -> None:
    assert [(start, stop) for start, stop, _ in objects(text)] == reference_balanced(text)
    assert scan_objects(text) == reference_scan(text)


object_texts = st.lists(
    st.sampled_from(['{', '}', '"', "'", "\\", " ", "\n", ":", ",", '"a"', '"answer"', "'answer'", "1", "[", "]", "NaN",
                     '{"answer": 7}', '{"a": 1, "a": 2}', '"a\'"', "'b'", "x"]),
    max_size=14,
).map("".join)


@PROPS
@given(object_texts)
def test_objects_read_in_place_equal_the_scanner_and_the_parse(text: str) -> None:
    from trace_tui.scoring.parsing import parse_trimmed

    found = objects(text)
    assert [(start, stop) for start, stop, _ in found] == reference_balanced(text)
    for start, stop, parsed in found:
        if parsed is NOTHING:
            assert parse_trimmed(text[start:stop]) is NOTHING
        elif parsed is not None:
            assert parsed == parse_trimmed(text[start:stop]) and parsed[1] == "json"


@PROPS
@given(line_texts)
def test_keyword_anchored_line_routes_equal_multiline_search(text: str) -> None:
    lowered = text.lower()
    usable = lowered if len(lowered) == len(text) and "ſ" not in text else None
    for hits, anchored, multiline in (
        (SECTION_HITS, SECTION_AT, SECTION), (ANSWER_LINES_HITS, ANSWER_LINES_AT, ANSWER_LINES),
    ):
        fast = [m.span() for m in line_matches(text, usable, hits, anchored, multiline)]
        assert fast == [m.span() for m in multiline.finditer(text)]


@PROPS
@given(line_texts)
def test_one_pass_answer_lines_equal_the_two_route_patterns(text: str) -> None:
    def found(pattern, group):
        return [(m.span(), m.span(group)) for m in pattern.finditer(text)]

    combined = list(ANSWER_LINES.finditer(text))
    final = [(m.span(), m.span(2)) for m in combined if m.start(1) >= 0]
    plain = [(m.span(), m.span(2)) for m in combined if m.start(1) < 0]
    assert final == found(FINAL_ANSWER, 1)
    assert plain == found(ANSWER_LINE, 1)


box_texts = st.lists(st.sampled_from(["\\boxed", "\\BOXED", "\\boxeD", "\\", "box", " ", "\n", "{", "}", "7", "ſ", "İ"]),
                     max_size=12).map("".join)


@PROPS
@given(box_texts)
def test_boxes_found_from_the_keyword_equal_the_search(text: str) -> None:
    from trace_tui.scoring.routes import BOXED, boxes

    lowered = text.lower()
    usable = lowered if len(lowered) == len(text) and "ſ" not in text else None
    assert [m.span() for m in boxes(text, usable)] == [m.span() for m in BOXED.finditer(text)]


fence_texts = st.lists(st.sampled_from(["```", "`", "json", "JSON", " ", "\n", "x", "{}", "\t"]), max_size=12).map("".join)


@PROPS
@given(fence_texts)
def test_final_fence_equals_leftmost_search(text: str) -> None:
    from trace_tui.scoring.reward import _FINAL_FENCE, final_fence

    text = text.rstrip()
    fast, slow = final_fence(text), _FINAL_FENCE.search(text)
    assert (fast and (fast.span(), fast.group(1))) == (slow and (slow.span(), slow.group(1)))


# --- the JSON-shaped literal path gives what literal_eval gives

from trace_tui.scoring.parsing import NOTHING, _UNSURE, _literal, _quoted_literal  # noqa: E402

ODD_CHARS = ["\ud800", "\udfff", "\x00", "\x1f", "\x7f", "\x85", "\u2028", "\ufeff", "\uffff", "\r", "\x0c", "\\", "'", '"']
literal_strings = st.builds(
    lambda quote, body: quote + body + quote,
    st.sampled_from(["'", '"']),
    st.text(alphabet=st.one_of(st.characters(), st.sampled_from(ODD_CHARS)), max_size=4),
)
literal_numbers = st.sampled_from(["0", "-0", "42", "-7", "1.5", "-0.0", "1e5", "1E+2", "1e-400", "1e400", "3.", ".5",
                                   "007", "1_0", "0x1F", "+1", "--1", "12345678901234567890123456789"])
literal_gaps = st.sampled_from(["", "", " ", "\t", "\n", "\r", "\x0c", " # c\n"])


def _join(open_, close, parts, gap, trailing):
    return open_ + gap + ",".join(parts) + trailing + close


literal_texts = st.recursive(
    literal_strings | literal_numbers,
    lambda inner: st.builds(
        _join, st.just("{"), st.just("}"),
        st.lists(st.builds(lambda k, g, v: f"{k}{g}:{g}{v}", literal_strings | literal_numbers, literal_gaps, inner),
                 max_size=3),
        literal_gaps, st.sampled_from(["", ",", " "]),
    ) | st.builds(_join, st.just("["), st.just("]"), st.lists(inner, max_size=3), literal_gaps, st.sampled_from(["", ","])),
    max_leaves=6,
)


@PROPS
@given(literal_texts)
def test_quoted_literal_path_equals_literal_eval(text: str) -> None:
    text = text.strip()
    fast = _quoted_literal(text) if text else _UNSURE
    if fast is not _UNSURE:
        slow = _literal(text)
        assert (type(fast), repr(fast)) == (type(slow), repr(slow))


def test_quoted_literal_path_decides_the_usual_answers() -> None:
    assert _quoted_literal("{'answer': 42}") == {"answer": 42} == _literal("{'answer': 42}")
    assert _quoted_literal("{'answer': \"B\", 'x': [1, -2.5]}") == {"answer": "B", "x": [1, -2.5]}
    assert _quoted_literal("{'answer': 1, 'answer': 1}") is NOTHING is _literal("{'answer': 1, 'answer': 1}")
    assert _quoted_literal("{'answer': 1,}") is _UNSURE  # JSON has no trailing comma: literal_eval decides


bracket_texts = st.lists(
    st.sampled_from(["(", "[", "{", " ", "\t", "\n", "B", "x", "_", "True", "None", "set()", "b'x'", "Rb'x'", "ｓet()",
                     "𝐓𝐫𝐮𝐞", "not 1", ")", "]", "}", ",", "1", ":", "'a'", "-", "**"]),
    max_size=8,
).map("".join)


@PROPS
@given(bracket_texts)
def test_bracketed_name_is_never_a_literal(text: str) -> None:
    import ast
    import warnings

    from trace_tui.scoring.parsing import cannot_be_literal

    # Behind brackets only: at the very start any letter counts as a name (so "ｓet()", which NFKC
    # makes set(), is skipped there; that is the extraction's behaviour, kept as it is).
    if text.lstrip(" \t")[:1] in ("(", "[", "{") and cannot_be_literal(text):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception):  # noqa: B017 - any failure: SyntaxError, ValueError, TypeError
                ast.literal_eval(text)


@PROPS
@given(st.text(alphabet="{}ab\\", max_size=20))
def test_matching_brace_equals_counting(text: str) -> None:
    from trace_tui.scoring.coercion import matching_brace

    for start in (i for i, ch in enumerate(text) if ch == "{"):
        depth, expected = 0, -1
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                expected = i
                break
        assert matching_brace(text, start) == expected

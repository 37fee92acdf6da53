"""CONTRACTS §1 coercion and structured parsing, checked on exact outputs.

Explicit-route responses ("Answer: …") carry text-parser strings, so they
exercise unwrapping and the structural re-parse; `{"answer": …}` responses
carry JSON values, which are never unwrapped.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from fixtures_scoring import Samples, scoring_samples  # noqa: F401 - fixture import

from trace_tui.scoring import extract_answer, parse_structured
from trace_tui.scoring.coercion import NOTHING, coerce

# (raw text after "Answer: ", answer type, expected typed value or None when rejected)
TEXT_CASES = [
    ("42", "integer", 42),
    ("+42", "integer", 42),
    ("-0", "integer", 0),
    ("42.0", "integer", 42),
    ("42.", "integer", 42),
    ("4.2e1", "integer", 42),
    ("4.5", "integer", None),
    ("007", "integer", 7),  # not JSON, not a literal: read as the decimal it writes
    ("0x2A", "integer", 42),  # a Python literal
    ("1_000", "integer", 1000),
    ("1,000", "integer", None),
    ("٤٢", "integer", None),  # ASCII digits only
    ("42 apples", "integer", None),
    ("2.5.", "number", 2.5),
    ("3..", "number", 3),
    (".5", "number", 0.5),
    ("-1.5", "number", -1.5),
    ("1E+2", "number", 100),
    ("24.70", "number", 24.7),
    ("NaN", "number", None),
    ("Infinity", "number", None),
    ("1e400", "number", None),  # JSON reads it as inf: non-finite
    ("true", "integer", None),
    ("True", "number", None),
    ('"42"', "integer", 42),  # a JSON string replaces the text, then coerces
    ("'42'", "integer", 42),
    ("`42`", "integer", 42),
    ("\\boxed{42}", "integer", 42),
    ("\\text{42}", "integer", 42),
    ("\\boxed{\\text{B}}", "option_letter", "B"),
    ("\\mathbf{B}", "option_letter", "B"),
    ("\\mathrm{(c)}", "option_letter", "C"),
    ("``42``", "integer", None),  # unwrapped once only
    ("B", "option_letter", "B"),
    ("b", "option_letter", "B"),
    ("(B)", "option_letter", "B"),
    ("[b]", "option_letter", "B"),
    ("B)", "option_letter", "B"),
    ("Option B", "option_letter", "B"),
    ("option (d)!", "option_letter", "D"),
    ("B?", "option_letter", "B"),
    ("Option: B", "option_letter", None),
    ("BB", "option_letter", None),
    ("B..", "option_letter", None),
    ("Comet", "string", "Comet"),
    ("42", "string", "42"),  # the parsed number does not replace text for a string task
    ("true", "string", "true"),
    ('"Comet"', "string", "Comet"),
    ("\\text{10π}", "string", "10π"),
]


@pytest.mark.parametrize(("raw", "kind", "expected"), TEXT_CASES, ids=[f"{c[1]}:{c[0]}" for c in TEXT_CASES])
def test_text_coercion(raw: str, kind: str, expected: object) -> None:
    ex = extract_answer(f"Answer: {raw}", kind)
    if expected is None:
        assert ex.status == "missing", ex
        assert ex.candidates and not ex.candidates[0].accepted
    else:
        assert ex.status == "found" and ex.value == expected and type(ex.value) is type(expected), ex


# (JSON value text inside {"answer": …}, answer type, expected typed value or None)
JSON_CASES = [
    ("42", "integer", 42),
    ("42.0", "integer", 42),
    ("4.2", "integer", None),
    ('"42"', "integer", 42),  # a JSON string is atomic-checked, never re-parsed
    ('"42."', "integer", 42),
    ('"\\\\boxed{42}"', "integer", None),  # never unwrapped
    ('"0x2A"', "integer", None),
    ("true", "integer", None),
    ("null", "integer", None),
    ("[42]", "integer", None),
    ('{"v": 42}', "integer", None),
    ("1e400", "number", None),
    ('"1e-400"', "number", None),  # non-zero, underflows to 0
    ('"1e400"', "number", 10**400),  # integral: an int
    ("-0.0", "number", 0),
    ("1e-320", "number", 1e-320),  # subnormal but non-zero: accepted
    ('"B"', "option_letter", "B"),
    ("66", "option_letter", None),
    ('"Comet"', "string", "Comet"),
    ('"  Comet "', "string", "Comet"),
    ('"   "', "string", None),
    ("42", "string", None),
    ("false", "string", None),
]


@pytest.mark.parametrize(("raw", "kind", "expected"), JSON_CASES, ids=[f"{c[1]}:{c[0]}" for c in JSON_CASES])
def test_json_value_coercion(raw: str, kind: str, expected: object) -> None:
    ex = extract_answer('{"answer": %s}' % raw, kind)
    if expected is None:
        assert ex.status == "missing", ex
    else:
        assert ex.status == "found" and ex.value == expected and type(ex.value) is type(expected), ex


def test_numeric_agreement_by_decimal_value() -> None:
    ex = extract_answer("Answer: 7\nAnswer: 7.0\nAnswer: 7.\nAnswer: 0.7e1\n\\boxed{+7}", "integer")
    assert ex.status == "found" and ex.value == 7
    assert {c.canonical for c in ex.candidates} == {Decimal(7)}
    ex = extract_answer("Answer: 0\nAnswer: -0.0\nAnswer: 0e5", "number")
    assert ex.status == "found" and ex.value == 0


def test_canonical_is_exact_beyond_28_digits() -> None:
    a, b = "1." + "0" * 30 + "1", "1." + "0" * 30 + "2"
    assert extract_answer(f'{{"answer": "{a}", "Answer": "{b}"}}', "number").status == "ambiguous"


def test_float_read_through_shortest_repr() -> None:
    c = coerce(0.1, "json", "number")
    assert c.accepted and c.canonical == Decimal("0.1") and c.value == 0.1


def test_coerce_rejections_name_the_reason() -> None:
    assert coerce(True, "json", "integer").rejection == "boolean"
    assert coerce(None, "json", "string").rejection.startswith("not a string")
    assert coerce(4.5, "json", "integer").rejection == "not an integer"
    assert coerce("1e-999", "json", "number").rejection == "underflows to 0"
    assert coerce(float("nan"), "python-literal", "number").rejection == "non-finite number"
    assert coerce("1e999999999999", "json", "integer").rejection == "number out of range"


def test_real_number_answers(scoring_samples: Samples) -> None:
    for gt in scoring_samples.by_type["number"]:
        v = gt["value"]
        for response in (f"Answer: {v!r}", f'{{"answer": "{v!r}"}}', f"\\boxed{{{v!r}}}", f'{{"answer": {v!r}}}'):
            ex = extract_answer(response, "number")
            assert ex.status == "found" and ex.value == v, (response, ex)


# --- structured parsing of a text


def test_parse_structured() -> None:
    assert parse_structured('  {"a": 1} ') == ({"a": 1}, "json")
    assert parse_structured("{'a': (1, 2)}") == ({"a": (1, 2)}, "python-literal")
    assert parse_structured("") is NOTHING
    assert parse_structured("   ") is NOTHING
    assert parse_structured('{"a": 1, "a": 1}') is NOTHING
    assert parse_structured("{'a': 1, 'a': 1}") is NOTHING
    assert parse_structured("{0: 1, 0j: 2}") is NOTHING  # 0 == 0j in Python
    assert parse_structured("NaN") is NOTHING
    assert parse_structured("[1, NaN]") is NOTHING
    assert parse_structured("{1, 1}") == ({1}, "python-literal")  # sets may repeat elements
    assert parse_structured("{**{}}") is NOTHING
    assert parse_structured("x + 1") is NOTHING
    assert parse_structured("[" * 5000) is NOTHING
    assert parse_structured("1e400") == (float("inf"), "json")
    assert parse_structured("'\\d'") == ("\\d", "python-literal")  # invalid escape: warns silently, parses

"""CONTRACTS §2 semantic match against real `answer_gt` values."""

from __future__ import annotations

import pytest
from fixtures_scoring import Samples, scoring_samples  # noqa: F401 - fixture import

from trace_tui.scoring import answers_match, canonical


def test_every_real_answer_matches_itself_and_its_extraction(scoring_samples: Samples) -> None:
    for gt in (row["answer_gt"] for row in scoring_samples.rows):
        assert answers_match(gt["value"], gt)
        assert gt["type"] in ("integer", "number", "option_letter", "string")


def test_numbers(scoring_samples: Samples) -> None:
    n = scoring_samples.by_type["number"][0]  # 17.0 in the sample: an integral float
    assert answers_match(int(n["value"]), n) if n["value"] == int(n["value"]) else True
    assert answers_match(42, {"type": "number", "value": 42.0})
    assert not answers_match(24.700001, scoring_samples.number)  # no tolerance
    assert not answers_match("42", scoring_samples.integer)  # strings stay strings
    assert answers_match(True, {"type": "integer", "value": 1})  # True == 1, as in Python
    assert not answers_match(float("nan"), {"type": "number", "value": 1.0})
    assert answers_match(float("inf"), {"type": "number", "value": None})  # non-finite becomes None


def test_strings(scoring_samples: Samples) -> None:
    s, p, o = scoring_samples.string, scoring_samples.pi, scoring_samples.option
    assert answers_match(f"  {s['value'].upper()} ", s)
    assert answers_match(p["value"].upper(), p)
    assert not answers_match(p["value"].replace("π", " π"), p)
    assert answers_match(o["value"].lower(), o)
    assert not answers_match(f"({o['value']})", o)


def test_type_plays_no_part(scoring_samples: Samples) -> None:
    gt = dict(scoring_samples.integer, type="string")
    assert answers_match(scoring_samples.integer["value"], gt)


def test_containers() -> None:
    assert answers_match({"B": 1, " a ": 2.0}, {"value": {"a": 2, "b": 1}})
    assert answers_match({1.0: "x"}, {"value": {"1": "X"}})
    assert answers_match({1, 2, 3}, {"value": {3, 1, 2}})
    assert answers_match((1, 2), {"value": [1.0, 2]})
    assert not answers_match([2, 1], {"value": [1, 2]})
    assert answers_match([[1, 2.0]], {"value": ((1, 2),)})
    assert canonical({"k": {"Z": [1.0]}}) == {"k": {"z": [1]}}
    assert canonical({(1, 2): "v"}) == {"[1,2]": "v"}
    assert list(canonical({"b": 1, "a": 2})) == ["a", "b"]


def test_bad_reference_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="answer_gt must be a mapping with a 'value' key"):
        answers_match(7, 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'value'"):
        answers_match(7, {"type": "integer"})

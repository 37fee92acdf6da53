"""Our extraction (CONTRACTS §1) reads responses as the release's own implementation of the contract does.

The release ships the original of trace-validation-answer-extraction-v1,
rlvr/evaluation/trace_validation/answer_extraction.py. It is taken out of the pinned evaluator
archive (its sha256 checked against the pin, bench/upstream.py) and run unchanged, as a black box:
its source is not read here, only its answers are compared. Two readings agree when the status is
the same and, for a found answer, the route and the typed value (its type included) are too. The
candidate lists are not compared: their order and wording (parser names, rejection reasons) are
this project's own audit trail.
"""

from __future__ import annotations

import warnings

import pytest
from fixtures_scoring import Samples, scoring_samples  # noqa: F401 - fixture import
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scoring_extraction import CASES, TYPES, render
from test_scoring_properties import FRAGMENTS

from trace_tui.scoring import ANSWER_TYPES, extract_answer

# Where CONTRACTS.md §1 says otherwise than the original does. An option letter is "an optional
# `option ` prefix, an optional ( or [, one letter, ...": the original also takes a run of spaces
# after `option`, spaces around the letter, and the non-ASCII letters Python's case-insensitive
# matching folds onto A-Z (ı, ſ, İ and the Kelvin sign). The contract as written wins here.
OPTION_DIVERGENCES = ["Option  B", "option\tB", "( B )", "[ b ]", "ı", "ſ", "\u212a"]
CASE_DIVERGENCES = {"option-double-space-not-option"}


@pytest.fixture(scope="module")
def original():
    from bench.upstream import CONTRACT_EXTRACTOR, load

    extract = load(CONTRACT_EXTRACTOR, "trace_release_answer_extraction").extract_answer

    def read(response: str, answer_type: str) -> tuple:
        with warnings.catch_warnings():  # its parser warns about odd literals in the text
            warnings.simplefilter("ignore")
            result = extract(response, answer_type)
        if result.status != "found":
            return (result.status, None, None)
        return (result.status, result.route, result.typed_candidate)

    return read


def ours(response: str, answer_type: str) -> tuple:
    ex = extract_answer(response, answer_type)
    return (ex.status, ex.route, ex.value)


def same(a: tuple, b: tuple) -> bool:
    return a == b and type(a[2]) is type(b[2])


@pytest.mark.parametrize(("case", "key", "template"), [c[:3] for c in CASES], ids=[c[0] for c in CASES])
def test_every_rule_case_reads_alike(original, scoring_samples: Samples, case: str, key: str, template: str) -> None:
    gt = scoring_samples.gt(TYPES[key])
    response = render(template, gt)
    theirs, mine = original(response, gt["type"]), ours(response, gt["type"])
    if case in CASE_DIVERGENCES:
        assert not same(theirs, mine), f"{case}: now read alike; drop it from CASE_DIVERGENCES"
    else:
        assert same(theirs, mine), (response, theirs, mine)


def test_the_benchmark_corpus_reads_alike(original) -> None:
    """Every real TRACE row in each of the thirteen forms `make bench` times (3,212 responses)."""
    from bench.bench_scoring import corpus

    items = corpus()
    differ = [(r[-80:], g["type"], original(r, g["type"]), ours(r, g["type"])) for r, g in items
              if not same(original(r, g["type"]), ours(r, g["type"]))]
    assert len(items) == 3212
    assert differ == []


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join), st.sampled_from(ANSWER_TYPES))
def test_texts_made_of_every_routes_fragments_read_alike(original, text: str, kind: str) -> None:
    assert same(original(text, kind), ours(text, kind)), (text, kind)


@pytest.mark.parametrize("line", OPTION_DIVERGENCES)
def test_the_option_letters_the_contract_refuses_and_the_original_takes(original, line: str) -> None:
    response = f"Comparing the panels.\n{line}"
    assert original(response, "option_letter")[0] == "found"
    assert ours(response, "option_letter") == ("missing", None, None)

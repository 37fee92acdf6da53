"""Deterministic answer extraction, `trace-validation-answer-extraction-v1` (CONTRACTS §1).

The extractor sees only the response and the declared answer type, never the
reference. Every candidate it considers is kept for the audit trail.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

from .coercion import coerce_text, coerce_value, is_option, matching_brace, normalize_answer_type
from .parsing import NOTHING, PARSER_TEXT, parse_structured, parse_trimmed
from .routes import (
    ANSWER_LINES,
    ANSWER_LINES_AT,
    ANSWER_LINES_HITS,
    FENCE,
    SECTION,
    SECTION_AT,
    SECTION_HITS,
    TAG,
    boxes,
    line_matches,
    objects,
    terminal_line_start,
)

CONTRACT_ID = "trace-validation-answer-extraction-v1"

FOUND = "found"
MISSING = "missing"
AMBIGUOUS = "ambiguous"

TERMINAL_STRUCTURED = "terminal-structured"
STRUCTURED = "structured"
EXPLICIT = "explicit"

ROUTE_ANSWER_TAG = "answer_tag"
ROUTE_CODE_FENCE = "code_fence"
ROUTE_STRUCTURED_SECTION = "structured_section"
ROUTE_BALANCED_OBJECT = "balanced_object"
ROUTE_FINAL_ANSWER = "final_answer"
ROUTE_ANSWER_LINE = "answer_line"
ROUTE_BOXED = "boxed"
ROUTE_TERMINAL_OPTION = "terminal_option"

# The order that picks the reported candidate among agreeing ones (§1 Decision).
ROUTE_ORDER = {
    ROUTE_BALANCED_OBJECT: 0,
    ROUTE_CODE_FENCE: 1,
    ROUTE_ANSWER_TAG: 2,
    ROUTE_STRUCTURED_SECTION: 3,
    ROUTE_FINAL_ANSWER: 4,
    ROUTE_ANSWER_LINE: 5,
    ROUTE_BOXED: 6,
    ROUTE_TERMINAL_OPTION: 7,
}


# Candidate and Extraction are named tuples, not frozen dataclasses: as immutable, and built about
# five times faster (a frozen dataclass sets each field through object.__setattr__), which matters
# with a few candidates per response.
class Candidate(NamedTuple):
    """One candidate answer: where it came from and what coercion made of it."""

    route: str
    priority: str
    raw: Any
    span: tuple[int, int]
    parser: str
    accepted: bool
    value: Any
    canonical: Any
    rejection: str | None

    @property
    def terminal(self) -> bool:
        return self.priority == TERMINAL_STRUCTURED

    def key(self) -> tuple[Any, ...]:
        # Identity for de-duplication: repr keeps True and 1 apart.
        return (self.route, self.priority, repr(self.raw), self.span, self.canonical, self.rejection)

    def to_dict(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "priority": self.priority,
            "raw": _jsonable(self.raw),
            "span": list(self.span),
            "parser": self.parser,
            "accepted": self.accepted,
            "value": self.value,
            "canonical": None if self.canonical is None else str(self.canonical),
            "rejection": self.rejection,
        }


def _jsonable(value: object) -> str | bool | int | float | None:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    return repr(value)


class Extraction(NamedTuple):
    """The extraction outcome: status, the typed value (found only), the winning route, all candidates."""

    status: str
    value: Any
    route: str | None
    candidate: Candidate | None
    candidates: tuple[Candidate, ...]
    answer_type: str

    @property
    def raw(self) -> object:
        return None if self.candidate is None else self.candidate.raw

    @property
    def found(self) -> bool:
        return self.status == FOUND

    def to_dict(self) -> dict[str, Any]:
        return {
            "contract": CONTRACT_ID,
            "status": self.status,
            "answer_type": self.answer_type,
            "value": self.value,
            "route": self.route,
            "raw": _jsonable(self.raw),
            "candidates": [c.to_dict() for c in self.candidates],
        }


# Both are built straight from one tuple (tuple.__new__), skipping the Python-level __new__ that
# NamedTuple adds: a few of them per response.
_candidate = partial(tuple.__new__, Candidate)
_extraction = partial(tuple.__new__, Extraction)


_OPENERS = ("{", "[", '"', "'")
# The declared types as callers usually spell them, looked up before the general normalization.
_EXACT_TYPES = {"integer": "integer", "number": "number", "option_letter": "option_letter", "string": "string"}


def _add_text(out: list[Candidate], kind: str, route: str, raw: str, span: tuple[int, int]) -> None:
    """An explicit route's candidate (text parser)."""
    out.append(_candidate((route, EXPLICIT, raw, span, PARSER_TEXT) + coerce_text(raw, kind)))


def _structured(out: list[Candidate], kind: str, route: str, priority: str, body: str, span: tuple[int, int],
                scalars: bool, fallback: bool) -> bool:
    """Add the candidates of one structured element; True when a mapping gave more than one.

    Every other element has a span of its own, so only such a mapping can give identical
    candidates: the caller de-duplicates only when one did.
    """
    parsed = parse_structured(body)
    if parsed is NOTHING:
        if fallback:
            text = body.strip()
            if not text or text[0] not in _OPENERS:  # malformed structure is never read as text
                out.append(_candidate((route, priority, text, span, PARSER_TEXT) + coerce_text(text, kind)))
        return False
    value, parser = parsed
    if isinstance(value, dict):
        return _answers(out, kind, route, priority, value, span, parser)
    if scalars and not isinstance(value, (list, tuple, set, frozenset)):
        out.append(_candidate((route, priority, value, span, parser) + coerce_value(value, kind)))
    return False


def _object(out: list[Candidate], kind: str, priority: str, body: str, span: tuple[int, int]) -> bool:
    """_structured for a balanced object (already trimmed; only a mapping gives candidates)."""
    parsed = parse_trimmed(body)
    if parsed is NOTHING or not isinstance(parsed[0], dict):
        return False
    return _answers(out, kind, ROUTE_BALANCED_OBJECT, priority, parsed[0], span, parsed[1])


def _answers(out: list[Candidate], kind: str, route: str, priority: str, mapping: dict[Any, Any],
             span: tuple[int, int], parser: str) -> bool:
    """One candidate per answer key of a parsed mapping; True when there is more than one."""
    given = 0
    for key, item in mapping.items():
        if isinstance(key, str) and (key == "answer" or key.strip().casefold() == "answer"):
            out.append(_candidate((route, priority, item, span, parser) + coerce_value(item, kind)))
            given += 1
    return given > 1


def _collect(text: str, kind: str, end: int) -> tuple[list[Candidate], bool]:
    """Every candidate in route order, and whether identical ones may be among them."""
    out: list[Candidate] = []
    repeats = False
    lowered: str | None = text.lower()
    # Keyword positions stand for text positions only when lower() keeps every
    # character's length; re.IGNORECASE also folds the long s (ſ) to s.
    if len(lowered) != len(text) or "ſ" in text:
        lowered = None

    # 1. answer tags (a closing tag is needed)
    if "</" in text:
        for m in TAG.finditer(text):
            stop = m.end()
            priority = TERMINAL_STRUCTURED if stop == end else STRUCTURED
            repeats |= _structured(out, kind, ROUTE_ANSWER_TAG, priority, m.group(2), m.span(), True, True)
    # 2. code fences: scalars and plain text only for the fence that closes the response
    if "```" in text:
        for m in FENCE.finditer(text):
            at_end = m.end() == end
            priority = TERMINAL_STRUCTURED if at_end else STRUCTURED
            repeats |= _structured(out, kind, ROUTE_CODE_FENCE, priority, m.group(1), m.span(), at_end, at_end)
    # 3. structured sections: the body runs to the end, so a parsed one is always terminal
    for m in line_matches(text, lowered, SECTION_HITS, SECTION_AT, SECTION):
        body = text[m.end() : end]
        span = (m.start(), end)
        repeats |= _structured(out, kind, ROUTE_STRUCTURED_SECTION, TERMINAL_STRUCTURED, body, span, True, False)
    # 4. balanced objects: only a mapping with a string key gives candidates here, and an object
    # without a colon or a quote cannot be one, so its parse (mostly a failing literal) is skipped.
    if "{" in text:
        for start, stop, parsed in objects(text):
            priority = TERMINAL_STRUCTURED if stop == end else STRUCTURED
            if parsed is NOTHING:
                continue
            if parsed is not None:
                repeats |= _answers(out, kind, ROUTE_BALANCED_OBJECT, priority, parsed[0], (start, stop), parsed[1])
                continue
            body = text[start:stop]
            if ":" in body and ('"' in body or "'" in body):
                repeats |= _object(out, kind, priority, body, (start, stop))
    # 5./6. final answer and answer lines, found in one pass; every final answer comes first
    answer_lines = []
    for m in line_matches(text, lowered, ANSWER_LINES_HITS, ANSWER_LINES_AT, ANSWER_LINES):
        raw = m.group(2).rstrip()
        if raw:
            span = (m.start(), m.start(2) + len(raw))
            if m.start(1) >= 0:
                _add_text(out, kind, ROUTE_FINAL_ANSWER, raw, span)
            else:
                answer_lines.append((raw, span))
    for raw, span in answer_lines:
        _add_text(out, kind, ROUTE_ANSWER_LINE, raw, span)
    # 7. boxed, nested boxes included
    for m in boxes(text, lowered) if "\\" in text else ():
        close = matching_brace(text, m.end() - 1)
        if close >= 0:
            _add_text(out, kind, ROUTE_BOXED, text[m.end() : close], (m.start(), close + 1))
    # 8. terminal option letter
    if kind == "option_letter":
        head = text[:end]
        line_start = terminal_line_start(head)
        line = head[line_start:]
        stripped = line.strip()
        if is_option(stripped):
            offset = line_start + (len(line) - len(line.lstrip()))
            _add_text(out, kind, ROUTE_TERMINAL_OPTION, stripped, (offset, end))
    return out, repeats


def _dedupe(candidates: list[Candidate]) -> tuple[Candidate, ...]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for c in candidates:
        k = c.key()
        if k not in seen:
            seen.add(k)
            out.append(c)
    return tuple(out)


def extract_answer(response: str | None, answer_type: str) -> Extraction:
    """Extract the final answer of `response` for `answer_type` (CONTRACTS §1).

    answer_type is one of integer, number, option_letter, string (trimmed,
    case-insensitive); anything else raises ValueError.
    """
    kind = _EXACT_TYPES.get(answer_type) if type(answer_type) is str else None
    if kind is None:
        kind = normalize_answer_type(answer_type)
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise TypeError(f"response must be a string or None, got {type(response).__name__}")
    end = len(response.rstrip())
    if end == 0:
        return _extraction((MISSING, None, None, None, (), kind))
    collected, repeats = _collect(response, kind, end)
    candidates = _dedupe(collected) if repeats else tuple(collected)
    # The accepted candidates, in order; a terminal structured one, even rejected, shadows every
    # candidate that is not terminal structured.
    pool = []
    shadowed = False
    for c in candidates:
        if c.priority == TERMINAL_STRUCTURED:
            if not shadowed:
                shadowed = True
                pool = []
            if c.accepted:
                pool.append(c)
        elif c.accepted and not shadowed:
            pool.append(c)
    if not pool:
        return _extraction((MISSING, None, None, None, candidates, kind))
    if len(pool) == 1:
        best = pool[0]
        return _extraction((FOUND, best.value, best.route, best, candidates, kind))
    if len({c.canonical for c in pool}) > 1:
        return _extraction((AMBIGUOUS, None, None, None, candidates, kind))
    best = min(pool, key=lambda c: (not c.terminal, ROUTE_ORDER[c.route], -c.span[1]))
    return _extraction((FOUND, best.value, best.route, best, candidates, kind))

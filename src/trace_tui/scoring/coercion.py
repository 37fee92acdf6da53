"""Coercion of candidates for the deterministic extraction (CONTRACTS §1).

Standard library only: this module runs inside the score images and inside
other people's trainers as a reward.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

from .parsing import NOTHING, PARSER_TEXT, is_plain_word, parse_structured

ANSWER_TYPES = ("integer", "number", "option_letter", "string")

# A typed integer with more digits than this is refused: converting it would
# cost unbounded memory and no TRACE answer comes anywhere near it.
MAX_INTEGER_EXPONENT = 100_000


def normalize_answer_type(answer_type: object) -> str:
    """The declared answer type, trimmed and case-folded; anything else is a usage error."""
    if not isinstance(answer_type, str):
        raise ValueError(
            f"answer_type must be a string, one of {', '.join(ANSWER_TYPES)}; got {type(answer_type).__name__}"
        )
    norm = answer_type.strip().lower()
    if norm not in ANSWER_TYPES:
        raise ValueError(f"unknown answer_type {answer_type!r}: use one of {', '.join(ANSWER_TYPES)}")
    return norm


# ---------------------------------------------------------------------------
# Coercion of a raw candidate to the answer type.

_ATOMIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_OPTION = re.compile(r"(?:option )?[(\[]?([A-Za-z])[)\]]?[.!?]?", re.IGNORECASE | re.ASCII)
_BOXED_OPEN = re.compile(r"\\boxed\s*\{", re.IGNORECASE)
_WRAP_OPEN = re.compile(r"\\(?:text|mathrm|mathbf)\{")


def matching_brace(text: str, open_index: int) -> int:
    """Index of the `}` closing the `{` at open_index, counting braces only; -1 if unclosed."""
    # Usually nothing opens before the first `}`: then that one closes it.
    close = text.find("}", open_index + 1)
    if close < 0:
        return -1
    if text.find("{", open_index + 1, close) < 0:
        return close
    depth = 0
    pos = open_index
    find_open = text.find
    while True:
        o = find_open("{", pos)
        c = find_open("}", pos)
        if c < 0:
            return -1
        if 0 <= o < c:
            depth += 1
            pos = o + 1
        else:
            depth -= 1
            if depth == 0:
                return c
            pos = c + 1


def _whole_wrapped(text: str, opener: re.Pattern[str]) -> str | None:
    m = opener.match(text)
    if m is None:
        return None
    close = matching_brace(text, m.end() - 1)
    if close != len(text) - 1:
        return None
    return text[m.end() : close]


def unwrap_text(text: str, answer_type: str) -> str | int | float:
    """The value a text-parser string stands for, before type coercion (CONTRACTS §1 Coercion)."""
    s = text.strip()
    wrapped = None
    if s[:1] == "\\":  # every wrapper but the backticks opens with a backslash
        inner = _whole_wrapped(s, _BOXED_OPEN)
        if inner is not None:
            s = inner.strip()
        wrapped = _whole_wrapped(s, _WRAP_OPEN)
    if wrapped is not None:
        s = wrapped
    elif len(s) >= 2 and s[0] == "`" and s[-1] == "`":
        s = s[1:-1]
    elif answer_type != "string" and s.isdigit() and s.isascii() and len(s) < 19 and (s[0] != "0" or len(s) == 1):
        return int(s)  # what JSON reads in a plain unsigned integer (no leading zero, no digit limit near)
    elif is_plain_word(s):
        return s  # what parse_structured would conclude, at once
    parsed = parse_structured(s)
    if parsed is not NOTHING:
        value = parsed[0]
        if isinstance(value, str) or (
            answer_type != "string" and isinstance(value, (int, float))  # bool is an int
        ):
            return value
    return s


@dataclass(frozen=True, slots=True)
class Coerced:
    """Outcome of coercing one raw value: accepted with a typed and a canonical value, or rejected."""

    accepted: bool
    value: Any = None
    canonical: Any = None
    rejection: str | None = None


# The extraction builds one candidate per raw value and needs only Coerced's four fields: the
# functions below give them as a plain tuple (accepted, value, canonical, rejection), and the
# public coerce* functions wrap that tuple.
def _rejected(reason: str) -> tuple[bool, Any, Any, str]:
    return (False, None, None, reason)


_ZERO = Decimal(0)


_CONTEXT_28 = Context(prec=28, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _exact_normalize(d: Decimal) -> Decimal:
    # Default-context normalize() rounds to 28 digits; equality must stay exact.
    digits = len(d.as_tuple().digits)
    ctx = _CONTEXT_28 if digits <= 28 else Context(prec=digits, Emax=MAX_EMAX, Emin=MIN_EMIN)
    return d.normalize(ctx)


def _decimal_of(raw: object) -> Decimal | str:
    """The decimal a numeric candidate writes, or a rejection reason."""
    if isinstance(raw, bool):
        return "boolean"
    if isinstance(raw, int):
        return Decimal(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            return "non-finite number"
        return Decimal(repr(raw))
    if isinstance(raw, str):
        s = raw.strip()
        if _ATOMIC.fullmatch(s) is None:
            if s.endswith(".") and _ATOMIC.fullmatch(s[:-1]) is not None:
                s = s[:-1]
            else:
                return "not a number"
        try:
            return Decimal(s)
        except (InvalidOperation, ArithmeticError):  # exponent beyond any decimal context
            return "number out of range"
    if raw is None:
        return "null"
    return f"not a number ({type(raw).__name__})"


# Ints below this have at most 28 digits, so the 28-digit context normalizes them exactly.
_FAST_INT_LIMIT = 10**28


def _numeric(raw: object, integer: bool) -> tuple[bool, Any, Any, str | None]:
    # Plain ints and floats, the values JSON gives, skip the general path's digit counting
    # (as_tuple) and give the same Decimal: a float's repr has at most 17 digits.
    kind = type(raw)
    if kind is int and -_FAST_INT_LIMIT < raw < _FAST_INT_LIMIT:
        if raw % 10:  # no trailing zero: already in normal form
            return (True, raw, Decimal(raw), None)
        if raw == 0:
            return (True, 0, _ZERO, None)
        return (True, raw, Decimal(raw).normalize(_CONTEXT_28), None)
    if kind is float and math.isfinite(raw):
        if raw == 0.0:
            return (True, 0, _ZERO, None)
        canon = Decimal(repr(raw)).normalize(_CONTEXT_28)
        # A float's shortest repr is integral exactly when the float is (its value is that repr's).
        if raw.is_integer():
            return (True, int(canon), canon, None)
        if integer:
            return _rejected("not an integer")
        return (True, raw, canon, None)
    d = _decimal_of(raw)
    if isinstance(d, str):
        return _rejected(d)
    if d.is_zero():
        return (True, 0, _ZERO, None)
    canon = _exact_normalize(d)
    if canon.as_tuple().exponent >= 0:  # type: ignore[operator]  # integral
        if canon.adjusted() > MAX_INTEGER_EXPONENT:
            return _rejected("number out of range")
        return (True, int(canon), canon, None)
    if integer:
        return _rejected("not an integer")
    f = float(canon)
    if f == 0.0:
        return _rejected("underflows to 0")
    if not math.isfinite(f):
        return _rejected("non-finite number")
    return (True, f, canon, None)


def _not_a_string(raw: object) -> tuple[bool, Any, Any, str]:
    return _rejected("boolean" if isinstance(raw, bool) else f"not a string ({type(raw).__name__})")


def _option(raw: object) -> tuple[bool, Any, Any, str | None]:
    if not isinstance(raw, str):
        return _not_a_string(raw)
    m = _OPTION.fullmatch(raw.strip())
    if m is None:
        return _rejected("not an option letter")
    letter = m.group(1).upper()
    return (True, letter, letter, None)


def _string(raw: object) -> tuple[bool, Any, Any, str | None]:
    if not isinstance(raw, str):
        return _not_a_string(raw)
    s = raw.strip()
    if not s:
        return _rejected("empty string")
    return (True, s, s, None)


def is_option(text: str) -> bool:
    return _OPTION.fullmatch(text.strip()) is not None


def coerce_value(raw: object, answer_type: str) -> tuple[bool, Any, Any, str | None]:
    """coerce_parts for a value as JSON or a literal gave it (never unwrapped).

    Booleans need no check of their own: each type rejects them as "boolean".
    """
    if answer_type == "integer":
        return _numeric(raw, True)
    if answer_type == "number":
        return _numeric(raw, False)
    if answer_type == "option_letter":
        return _option(raw)
    return _string(raw)


def coerce_text(text: str, answer_type: str) -> tuple[bool, Any, Any, str | None]:
    """coerce_parts for a text-parser string: unwrapped first."""
    return coerce_value(unwrap_text(text, answer_type), answer_type)


def coerce_parts(raw: object, parser: str, answer_type: str) -> tuple[bool, Any, Any, str | None]:
    """coerce() as the tuple (accepted, value, canonical, rejection)."""
    if parser == PARSER_TEXT and isinstance(raw, str):
        return coerce_text(raw, answer_type)
    return coerce_value(raw, answer_type)


def coerce(raw: object, parser: str, answer_type: str) -> Coerced:
    """Coerce a raw candidate (from `parser`) to `answer_type` (already normalized)."""
    return Coerced(*coerce_parts(raw, parser, answer_type))

"""Structured parsing and coercion for the deterministic extraction (CONTRACTS §1).

Standard library only: this module runs inside the score images and inside
other people's trainers as a reward.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

ANSWER_TYPES = ("integer", "number", "option_letter", "string")

# Parser labels recorded on every candidate (audit trail).
PARSER_JSON = "json"
PARSER_LITERAL = "python-literal"
PARSER_TEXT = "text"

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
# Structured parsing of a text: JSON, then a Python literal.


class _Refused(Exception):
    """JSON found conflicting evidence (a duplicated key): the text gives nothing."""


class _NonFinite(Exception):
    """JSON met NaN/Infinity/-Infinity: refused, the text is tried as a literal."""


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(key)
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


_JSON_DECODER = json.JSONDecoder(object_pairs_hook=_pairs_no_duplicates, parse_constant=_refuse_constant)
# The decoder's scanner called directly: on a stripped text, decode() is exactly one scan from index 0
# that must end at the text's end (no JSON whitespace can be left on either side), minus two Python calls.
_JSON_SCAN = _JSON_DECODER.scan_once
# The characters a JSON value can start with; on any other the scanner fails at once.
_JSON_STARTS = frozenset('"{[-0123456789ntfNI')

# Returned by parse_structured when the text gives nothing.
NOTHING: Any = object()


# A literal may start with a name only for these; any other leading name makes
# the text an expression literal_eval refuses, so parsing it can be skipped.
_LITERAL_NAMES = re.compile(r"(?:True|False|None|set)(?![A-Za-z0-9_])|[rRbBuUfF]{1,2}['\"]")
_BRACKETS = frozenset("([{")
_ASCII_NAME_STARTS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def cannot_be_literal(text: str) -> bool:
    """True when `text` (as literal_eval sees it) starts with a name no literal starts with.

    Also behind opening brackets (`(B)`, `[x]`), for an ASCII name: NFKC, which the parser
    applies to names, leaves it as it is, so it is not a literal's name in disguise.
    """
    s = text.lstrip(" \t")
    c = s[:1]
    if c.isalpha() or c == "_":
        return _LITERAL_NAMES.match(s) is None
    if c in _BRACKETS:
        s = s.lstrip(" \t([{")
        c = s[:1]
        return c in _ASCII_NAME_STARTS and _LITERAL_NAMES.match(s) is None
    return False


def _literal(text: str) -> Any:
    if cannot_be_literal(text):
        return NOTHING
    try:
        if "\\" in text:
            with warnings.catch_warnings():
                # Invalid escapes in string literals warn at parse time; the text is data, not code.
                warnings.simplefilter("ignore")
                tree = ast.parse(text, mode="eval")
        else:
            tree = ast.parse(text, mode="eval")
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError, MemoryError
        return NOTHING
    dicts = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)]
    for node in dicts:
        if any(key is None for key in node.keys):  # {**x}: dict unpacking is refused
            return NOTHING
    try:
        value = ast.literal_eval(tree)
    except Exception:  # noqa: BLE001 - ValueError, TypeError (unhashable key), RecursionError
        return NOTHING
    for node in dicts:
        # Keys compared as Python compares them: 1, 1.0 and True are one key.
        keys = [ast.literal_eval(key) for key in node.keys]
        if len(set(keys)) != len(keys):
            return NOTHING
    return value


# A Python literal in JSON's shape but for single quotes: brackets, braces, commas, colons, spaces,
# tabs, newlines and number characters outside strings, and strings in either quote holding no
# quote, backslash, control character or lone surrogate (ast.parse cannot encode those). Such a
# string means the same in both languages, so with its quotes made double the text is the JSON
# of the same value: where that JSON parses, json gives what literal_eval would, in a fraction of
# the time, and refuses duplicated keys as the literal check does (keys are all strings here).
# Where it does not parse, the literal takes the general path.
_PLAIN_STRING = r"""[^'"\\\x00-\x1f\x7f-\x9f\ud800-\udfff]*+"""
_QUOTED_LITERAL = re.compile(rf"""(?:[\[\]{{}},: \t\n0-9.eE+\-]++|'{_PLAIN_STRING}'|"{_PLAIN_STRING}")*+""")
_UNSURE: Any = object()


def _quoted_literal(text: str) -> Any:
    """The literal a single-quoted JSON-shaped text writes, NOTHING when refused, _UNSURE otherwise."""
    if _QUOTED_LITERAL.fullmatch(text) is None:
        return _UNSURE
    try:
        value, stop = _JSON_SCAN(text.replace("'", '"'), 0)
    except _Refused:
        return NOTHING
    except (StopIteration, ValueError, RecursionError):
        return _UNSURE
    return value if stop == len(text) else _UNSURE


def json_value_at(text: str, start: int) -> tuple[Any, int] | None:
    """(value, end) when JSON reads a value at text[start:end]; (NOTHING, -1) when it refuses a
    duplicated key on the way; None when it reads nothing there (NaN and the like included)."""
    try:
        return _JSON_SCAN(text, start)
    except _Refused:
        return (NOTHING, -1)
    except (_NonFinite, StopIteration, ValueError, RecursionError):
        return None


def parse_structured(text: str) -> tuple[Any, str] | Any:
    """(value, parser) for a text that parses as JSON or a Python literal, else NOTHING."""
    text = text.strip()
    if not text:
        return NOTHING
    return parse_trimmed(text)


def parse_trimmed(text: str) -> tuple[Any, str] | Any:
    """parse_structured of a non-empty text that has no whitespace to strip."""
    if "'" in text:
        # A text in the quoted literal's shape has a quote outside every JSON string, so JSON
        # fails on it (after refusing, at worst, the same duplicated key the literal refuses).
        value = _quoted_literal(text)
        if value is not _UNSURE:
            return NOTHING if value is NOTHING else (value, PARSER_LITERAL)
    if text[0] in _JSON_STARTS:
        try:
            value, stop = _JSON_SCAN(text, 0)  # json.loads with the two refusals
            if stop == len(text):
                return value, PARSER_JSON
        except _Refused:
            return NOTHING
        except (_NonFinite, StopIteration, ValueError, RecursionError):
            pass
    value = _literal(text)
    if value is NOTHING:
        return NOTHING
    return value, PARSER_LITERAL


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


def unwrap_text(text: str, answer_type: str) -> Any:
    """The value a text-parser string stands for, before type coercion (CONTRACTS §1 Coercion)."""
    s = text.strip()
    if s[:1] == "\\":  # every wrapper but the backticks opens with a backslash
        inner = _whole_wrapped(s, _BOXED_OPEN)
        if inner is not None:
            s = inner.strip()
        inner = _whole_wrapped(s, _WRAP_OPEN)
        if inner is not None:
            s = inner
        elif len(s) >= 2 and s[0] == "`" and s[-1] == "`":
            s = s[1:-1]
    elif len(s) >= 2 and s[0] == "`" and s[-1] == "`":
        s = s[1:-1]
    elif answer_type != "string" and s.isdigit() and s.isascii() and len(s) < 19 and (s[0] != "0" or len(s) == 1):
        return int(s)  # what JSON reads in a plain unsigned integer (no leading zero, no digit limit near)
    elif s[:1].isalpha() and s[0] not in _JSON_STARTS and _LITERAL_NAMES.match(s) is None:
        return s  # a word no JSON value or literal starts with (cannot_be_literal): plain text
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


def _decimal_of(raw: Any) -> Decimal | str:
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


def _numeric(raw: Any, integer: bool) -> tuple[bool, Any, Any, str | None]:
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


def _not_a_string(raw: Any) -> tuple[bool, Any, Any, str]:
    return _rejected("boolean" if isinstance(raw, bool) else f"not a string ({type(raw).__name__})")


def _option(raw: Any) -> tuple[bool, Any, Any, str | None]:
    if not isinstance(raw, str):
        return _not_a_string(raw)
    m = _OPTION.fullmatch(raw.strip())
    if m is None:
        return _rejected("not an option letter")
    letter = m.group(1).upper()
    return (True, letter, letter, None)


def _string(raw: Any) -> tuple[bool, Any, Any, str | None]:
    if not isinstance(raw, str):
        return _not_a_string(raw)
    s = raw.strip()
    if not s:
        return _rejected("empty string")
    return (True, s, s, None)


def coerce_numeric(raw: Any, *, integer: bool) -> Coerced:
    return Coerced(*_numeric(raw, integer))


def coerce_option(raw: Any) -> Coerced:
    return Coerced(*_option(raw))


def coerce_string(raw: Any) -> Coerced:
    return Coerced(*_string(raw))


def is_option(text: str) -> bool:
    return _OPTION.fullmatch(text.strip()) is not None


def coerce_value(raw: Any, answer_type: str) -> tuple[bool, Any, Any, str | None]:
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


def coerce_parts(raw: Any, parser: str, answer_type: str) -> tuple[bool, Any, Any, str | None]:
    """coerce() as the tuple (accepted, value, canonical, rejection)."""
    if parser == PARSER_TEXT and isinstance(raw, str):
        return coerce_text(raw, answer_type)
    return coerce_value(raw, answer_type)


def coerce(raw: Any, parser: str, answer_type: str) -> Coerced:
    """Coerce a raw candidate (from `parser`) to `answer_type` (already normalized)."""
    return Coerced(*coerce_parts(raw, parser, answer_type))

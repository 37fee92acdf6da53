"""Structured parsing of a text for the deterministic extraction (CONTRACTS §1): JSON, then a Python literal.

Standard library only: it runs inside the score images and inside other people's trainers (the
reward parses with cannot_be_literal).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any, NoReturn

# Parser labels recorded on every candidate (audit trail).
PARSER_JSON = "json"
PARSER_LITERAL = "python-literal"
PARSER_TEXT = "text"


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


def _refuse_constant(name: str) -> NoReturn:
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


def parse_expression(text: str) -> ast.Expression:
    """ast.parse of a response's text in eval mode, the parser's warnings kept inside.

    The parser warns about the text (invalid escapes, `1if`: "invalid decimal literal"), once per
    process on stderr, in the middle of a run's output; the text is data, not code.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, mode="eval")


def _literal(text: str) -> object:
    if cannot_be_literal(text):
        return NOTHING
    try:
        tree = parse_expression(text)
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


def _quoted_literal(text: str) -> object:
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


def is_plain_word(text: str) -> bool:
    """True when a trimmed text opens with a word that starts no JSON value and no literal.

    parse_structured gives such a text nothing (cannot_be_literal, and no JSON start).
    """
    c = text[:1]
    return c.isalpha() and c not in _JSON_STARTS and _LITERAL_NAMES.match(text) is None

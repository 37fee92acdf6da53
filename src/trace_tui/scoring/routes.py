"""Where each route's elements lie in a response (CONTRACTS §1, routes 1-8): patterns and scanners.

The extraction builds candidates from what these find; everything here works on positions only
(and reads an object's JSON where it stands, once).
"""

from __future__ import annotations

import re
from typing import Any

from .parsing import NOTHING, PARSER_JSON, json_value_at

TAG = re.compile(r"<(answer|final_answer|final-answer|finalanswer)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)
FENCE = re.compile(r"```[ \t]*(?:json|python|py)?[ \t]*\r?\n(.*?)```", re.IGNORECASE | re.DOTALL)
SECTION = re.compile(
    r"^[ \t]*(?:final[ _-]*json|final[ _-]*answer[ _-]*json|answer[ _-]*json)[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
_SEPARATOR = r"[ \t]*(?:is|=|:|：)[ \t]*([^\n]*)"
FINAL_ANSWER = re.compile(r"^[ \t]*(?:the[ \t]+)?final[ \t]+answer" + _SEPARATOR, re.IGNORECASE | re.MULTILINE)
ANSWER_LINE = re.compile(r"^[ \t]*answer" + _SEPARATOR, re.IGNORECASE | re.MULTILINE)
# Routes 5 and 6 in one pattern, one match per line: a line opens either with `the`/`final` or with
# `answer`, never both, so group 1 (the `final` prefix) says which route matched; group 2 is the answer.
ANSWER_LINES = re.compile(
    r"^[ \t]*((?:the[ \t]+)?final[ \t]+)?answer" + _SEPARATOR, re.IGNORECASE | re.MULTILINE
)
# The same patterns without `^`, tried only at the starts of lines where the lower-cased text
# holds the keyword with what must follow it in a match (speed: one plain search finds those).
SECTION_AT = re.compile(SECTION.pattern[1:], re.IGNORECASE)
SECTION_HITS = re.compile(r"json[ \t]*:")
ANSWER_LINES_AT = re.compile(ANSWER_LINES.pattern[1:], re.IGNORECASE)
# Lower-casing keeps the dotless ı (which re.IGNORECASE lets stand for i), so `is` can be `ıs` here.
ANSWER_LINES_HITS = re.compile(r"answer[ \t]*(?:[iı]s|=|:|：)")
BOXED = re.compile(r"\\boxed\s*\{", re.IGNORECASE)
# Line boundaries as str.splitlines() knows them (all are whitespace to str.strip()).
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_OBJECT_TOKENS = re.compile(r"""[{}"'\\]""")
# An object that nests no brace and whose strings hold no backslash, matched in one step: the
# token walk over it ends at the same `}`. Possessive throughout, so a failed match is linear.
_FLAT_OBJECT = re.compile(r"""\{(?:[^{}"']++|"[^"\\]*+"|'[^'\\]*+')*+\}""")


def _object_end(text: str, start: int) -> int:
    """Index after the `}` closing the object opened at start; -1 when it is never closed."""
    depth = 0
    quote: str | None = None
    skip = -1  # index of the character a backslash escaped
    for m in _OBJECT_TOKENS.finditer(text, start):
        i = m.start()
        if i == skip:
            continue
        ch = m.group()
        if quote is not None:
            if ch == "\\":
                skip = i + 1
            elif ch == quote:
                quote = None
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch != "\\":  # a quote opens a string; a backslash outside strings means nothing
            quote = ch
    return -1


# What can follow the `{` of a JSON object: a key's quote, the closing brace or JSON whitespace.
_JSON_OBJECT_SECOND = frozenset('"} \t\n\r')


def objects(text: str) -> list[tuple[int, int, tuple[Any, str] | None]]:
    """(start, stop, parsed) for every outermost `{…}` (§1 route 4).

    Quotes count only inside an object; an opening brace never closed swallows
    the rest of the text, so no later object is outermost.

    Where JSON reads an object whole in place, its span is the balanced one (JSON's strings are
    the scanner's strings) and parsed is what parse_trimmed gives its text, read once; where JSON
    refuses a duplicated key on the way, parsed is NOTHING, as parse_trimmed would find (the text
    up to there, a `'` included, reads alike); otherwise parsed is None and the object's text is
    parsed on its own. JSON is not tried where it must fail (raising its error costs more than a
    parse): where no `}` follows, or where the `{` is followed by what no JSON object holds there.
    """
    found: list[tuple[int, int, tuple[Any, str] | None]] = []
    pos = text.find("{")
    while pos >= 0:
        if text.find("}", pos) < 0:
            break  # nothing closes: this object swallows the rest
        read = json_value_at(text, pos) if text[pos + 1 : pos + 2] in _JSON_OBJECT_SECOND else None
        if read is not None and read[1] > 0:
            stop = read[1]
            found.append((pos, stop, (read[0], PARSER_JSON)))
        else:
            m = _FLAT_OBJECT.match(text, pos)
            stop = m.end() if m is not None else _object_end(text, pos)
            if stop < 0:
                break
            found.append((pos, stop, None if read is None else NOTHING))
        pos = text.find("{", stop)
    return found


def line_matches(
    text: str, lowered: str | None, hits: re.Pattern[str], anchored: re.Pattern[str], multiline: re.Pattern[str]
) -> list[re.Match[str]]:
    """Matches of a line-anchored pattern, in order: the same as multiline.finditer(text).

    Only lines where hits finds something in lowered (text.lower(), or None when its positions
    are not text's) are tried, once each: the patterns never cross a line break, and a line that
    matches holds what hits looks for.
    """
    if lowered is None:
        return list(multiline.finditer(text))
    found = []
    hit = hits.search(lowered)
    while hit is not None:
        i = hit.start()
        m = anchored.match(text, text.rfind("\n", 0, i) + 1)
        if m is not None:
            found.append(m)
        line_end = text.find("\n", i)
        if line_end < 0:
            break
        hit = hits.search(lowered, line_end)
    return found


def boxes(text: str, lowered: str | None) -> list[re.Match[str]]:
    """The matches of BOXED.finditer(text), found from `\\boxed` in lowered when it can stand for text."""
    if lowered is None:
        return list(BOXED.finditer(text))
    # A match starts at a `\boxed` and holds no other backslash: those places are the only tries.
    boxes = []
    i = lowered.find("\\boxed")
    while i >= 0:
        m = BOXED.match(text, i)
        if m is not None:
            boxes.append(m)
        i = lowered.find("\\boxed", i + 6)
    return boxes


def terminal_line_start(head: str) -> int:
    """Where the last line of head starts (after the last line break str.splitlines() knows)."""
    start = head.rfind("\n") + 1
    # Every other line break is unprintable: a printable last line holds none of them.
    if head[start:].isprintable():
        return start
    return max(head.rfind(ch) for ch in _LINE_BREAKS) + 1

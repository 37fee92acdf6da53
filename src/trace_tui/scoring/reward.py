"""Training reward in answer mode: 0.95 x accuracy + 0.05 x format (CONTRACTS §3).

§3 parses plainly (json.loads: last duplicate wins, NaN allowed; else
ast.literal_eval) and has its own brace scanner and fence rule, separate
from the extraction's (§1) on purpose.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from .parsing import cannot_be_literal, parse_expression
from .match import answers_match

_NOTHING: Any = object()

# The only values the reward takes: accuracy and format are each 0 or 1.
_REWARDS = {(0, 0): 0.0, (0, 1): 0.05, (1, 0): 0.95, (1, 1): 1.0}

_FINAL_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```\s*\Z", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.IGNORECASE | re.DOTALL)
_SCAN_TOKENS = re.compile(r'[{}"\\]')


def plain_parse(text: str) -> object:
    """json.loads, else ast.literal_eval, else _NOTHING (no refusals)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if cannot_be_literal(text):  # prose: skip a parse that can only fail
        return _NOTHING
    try:
        # what ast.literal_eval(text) does, its parse through the shared quiet one
        return ast.literal_eval(parse_expression(text.lstrip(" \t")))
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, TypeError, RecursionError, MemoryError
        return _NOTHING


def scan_objects(text: str) -> list[tuple[int, int]]:
    """Spans of every outermost balanced `{…}` in one pass (§3's scanner).

    A `"` anywhere opens a string closed by the next unescaped `"`; single
    quotes mean nothing; braces inside strings do not count.
    """
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    in_string = False
    skip = -1
    for m in _SCAN_TOKENS.finditer(text):
        i = m.start()
        if i == skip:
            continue
        ch = m.group()
        if in_string:
            if ch == "\\":
                skip = i + 1
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans


def final_fence(text: str) -> re.Match[str] | None:
    """_FINAL_FENCE.search(text) for a right-trimmed text, without trying every backtick run.

    The closing backticks must be the text's last three characters, and from
    the first opening backticks that leave room for them a match always exists,
    so the leftmost match starts there.
    """
    if not text.endswith("```"):
        return None
    first = text.find("```")
    if first + 6 > len(text):
        return None
    return _FINAL_FENCE.match(text, first)


def final_block(response: str) -> str | None:
    """The final block of the right-trimmed response, or None."""
    text = response.rstrip()
    m = final_fence(text)
    if m is not None and m.group(1).strip():
        return m.group(1)
    spans = scan_objects(text)
    if spans and spans[-1][1] == len(text):
        start, stop = spans[-1]
        return text[start:stop]
    return None


def _entries(text: str) -> list[str]:
    """Tag bodies, fence bodies, outermost objects, then the whole text: trimmed, non-empty, first kept."""
    raw = [m.group(1) for m in _TAG.finditer(text)]
    raw += [m.group(1) for m in _FENCE.finditer(text)]
    raw += [text[a:b] for a, b in scan_objects(text)]
    raw.append(text)
    seen: set[str] = set()
    out = []
    for entry in raw:
        entry = entry.strip()
        if entry and entry not in seen:
            seen.add(entry)
            out.append(entry)
    return out


def _has_answer_keys(value: object) -> bool:
    return isinstance(value, Mapping) and ("answer" in value or "annotation" in value)


def _payload(block: str | None, parsed_block: object) -> Mapping[Any, Any] | None:
    if block is None:
        return None
    if isinstance(parsed_block, Mapping):
        return parsed_block
    for entry in _entries(block):
        parsed = plain_parse(entry)
        if isinstance(parsed, Mapping):
            return parsed
    return None


def _answer(response: str, payload: Mapping[Any, Any] | None) -> object:
    answer: Any = None
    if _has_answer_keys(payload):
        answer = payload.get("answer")
    else:
        # Scanned from the end, so the whole response is tried first.
        for entry in reversed(_entries(response)):
            parsed = plain_parse(entry)
            if _has_answer_keys(parsed):
                answer = parsed.get("answer")
                break
    return response if answer is None else answer


def _check_gt(answer_gt: object) -> None:
    if not isinstance(answer_gt, Mapping) or "value" not in answer_gt:
        raise ValueError(
            f"answer_gt must be a mapping with a 'value' key, like {{'type': 'integer', 'value': 7}}; got {answer_gt!r}"
        )


def reward_answer(response: str) -> object:
    """The answer §3 scores: from the final block's payload, else the candidate list, else the whole text."""
    block = final_block(response)
    parsed_block = _NOTHING if block is None else plain_parse(block)
    return _answer(response, _payload(block, parsed_block))


def reward_components(response: str | None, answer_gt: Mapping[str, Any]) -> tuple[int, int]:
    """(accuracy, format), each 0 or 1."""
    _check_gt(answer_gt)
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise TypeError(f"response must be a string or None, got {type(response).__name__}")
    block = final_block(response)
    parsed_block = _NOTHING if block is None else plain_parse(block)
    fmt = int(isinstance(parsed_block, Mapping) and set(parsed_block.keys()) == {"answer"})
    answer = _answer(response, _payload(block, parsed_block))
    if isinstance(answer, str) and answer_gt.get("type") != "string":
        parsed = plain_parse(answer)
        if parsed is not _NOTHING:
            answer = parsed
    return int(answers_match(answer, answer_gt)), fmt


def trace_reward(response: str | None, answer_gt: Mapping[str, Any]) -> float:
    """0.95 x accuracy + 0.05 x format, always one of 0.0, 0.05, 0.95, 1.0."""
    return _REWARDS[reward_components(response, answer_gt)]

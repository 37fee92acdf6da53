"""Semantic match, `trace-answer-exact-match-v0` (CONTRACTS §2).

Both sides go to a canonical form and are compared with Python's `==`; no
numeric tolerance, and the reference's `type` plays no part.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

CONTRACT_ID = "trace-answer-exact-match-v0"


def _canonical_json(value: object) -> str:
    # Plain json.dumps with sorted keys and compact separators (ASCII escapes, as json.dumps writes by default).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def _canonical_number(value: float | int | Decimal | Fraction) -> int | float | None:
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        f = value
    else:
        if isinstance(value, Decimal) and not value.is_finite():
            return None
        if value == int(value):
            return int(value)
        f = float(value)
    if not math.isfinite(f):
        return None
    if f.is_integer():
        return int(f)
    return f


def canonical(value: object) -> object:
    """The canonical form §2 compares (bools stay bools; integral numbers become int)."""
    kind = type(value)  # the usual answers first, by exact type (a subclass takes the general path)
    if kind is str:
        return value.strip().lower()
    if kind is int or kind is bool:  # bool has no subclasses: every bool ends here
        return value
    if isinstance(value, (int, float, Decimal, Fraction)):
        return _canonical_number(value)
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if isinstance(key, bool):
                ckey = _canonical_json(key)
            elif isinstance(key, (int, float, Decimal, Fraction)):
                ckey = str(_canonical_number(key))
            elif isinstance(key, str):
                ckey = key.strip().lower()
            else:
                ckey = _canonical_json(canonical(key))
            items.append((ckey, canonical(item)))
        items.sort(key=lambda kv: kv[0])
        return dict(items)
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=_canonical_json)
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def answers_match(value: object, answer_gt: Mapping[str, Any]) -> bool:
    """Whether `value` equals the reference `answer_gt["value"]` under §2.

    answer_gt is the dataset's typed target, e.g. {"type": "integer", "value": 7}.
    """
    if (type(answer_gt) is not dict and not isinstance(answer_gt, Mapping)) or "value" not in answer_gt:
        raise ValueError(
            f"answer_gt must be a mapping with a 'value' key, like {{'type': 'integer', 'value': 7}}; got {answer_gt!r}"
        )
    return bool(canonical(value) == canonical(answer_gt["value"]))

"""Real TRACE answers for the scoring tests, read from TRACE_SAMPLE_DIR (never copied here).

`scoring_samples` gives every row's `answer_gt` plus one representative value
per answer type (an integer above 9, a fractional and a negative number, an
option letter, a plain string and a π string such as "20π"), so each test
builds its responses around answers the real dataset asks for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Samples:
    rows: list[dict[str, Any]]
    by_type: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    integer: dict[str, Any] = field(default_factory=dict)
    number: dict[str, Any] = field(default_factory=dict)
    negative: dict[str, Any] = field(default_factory=dict)
    option: dict[str, Any] = field(default_factory=dict)
    string: dict[str, Any] = field(default_factory=dict)
    pi: dict[str, Any] = field(default_factory=dict)

    def gt(self, key: str) -> dict[str, Any]:
        return getattr(self, key)


def text_of(value: Any) -> str:
    """How a response would write the answer value in prose."""
    if isinstance(value, float):
        return format(Decimal(repr(value)).normalize(), "f") if value != int(value) else str(int(value))
    return str(value)


def load_samples(sample_dir: Path) -> Samples:
    rows = [json.loads(line) for line in (sample_dir / "trace-sample.jsonl").read_text().splitlines() if line.strip()]
    s = Samples(rows=rows)
    for row in rows:
        s.by_type.setdefault(row["answer_gt"]["type"], []).append(row["answer_gt"])
    s.integer = next(g for g in s.by_type["integer"] if g["value"] > 9)
    s.number = next(g for g in s.by_type["number"] if g["value"] != int(g["value"]) and g["value"] > 0)
    s.negative = next(g for g in s.by_type["number"] if g["value"] < 0)
    s.option = next(g for g in s.by_type["option_letter"] if g["value"] != "A")
    s.string = next(g for g in s.by_type["string"] if g["value"].isalpha() and len(g["value"]) > 3)
    s.pi = next(g for g in s.by_type["string"] if "π" in g["value"])
    return s


@pytest.fixture(scope="session")
def scoring_samples(trace_sample_dir: Path) -> Samples:
    return load_samples(trace_sample_dir)

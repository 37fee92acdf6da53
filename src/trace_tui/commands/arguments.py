"""What several commands' parsers share: the argument types that turn a bad value into one usage line, the
recipe selection flags, and the exit without teardown a short command may ask for. The command line (`cli`)
imports the commands; the commands import this, never `cli`."""

from __future__ import annotations

import argparse
from typing import Any

MAX_ID = 200  # characters of a model id or benchmark key; release ids are under 40


def short(value: Any, limit: int = 80) -> str:
    """VALUE as an error line may echo it: its repr, cut to ``limit`` characters with "…"."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def selection_id(text: str) -> str:
    """An argparse type: a model id or benchmark key (an error line echoes only the start of a long one)."""
    if len(text) > MAX_ID:
        raise argparse.ArgumentTypeError(f"{short(text)} ({len(text)} characters) is too long to be an id")
    return text


def non_empty(text: str) -> str:
    """An argparse type: a value that is not empty (an empty --campaign would silently mean the current directory,
    an empty --home the default home)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("give a value, not an empty string")
    return text


# A seed is what a recipe file's seeds may be (trace_tui.recipe.catalog.SEED_RANGE): an unsigned 32-bit number, as the
# generation backends take it. A larger one overflowed half-way through making the campaign.
SEED_MAX = 2**32 - 1
# At most this many array tasks at once: Slurm's default MaxArraySize (1001) allows no larger array, and a
# campaign has far fewer shards (full: 24).
MAX_PARALLEL = 1000


def _whole_number(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:  # not a number, or more digits than Python converts
        raise argparse.ArgumentTypeError(f"{short(text)}: give a whole number from {low} to {high} ({what})") \
            from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{short(text)} is out of range: give a whole number from {low} to {high} "
                                         f"({what})")
    return value


def seed_value(text: str) -> int:
    """An argparse type: a seed, 0 to 4294967295 (as in a recipe file)."""
    return _whole_number(text, 0, SEED_MAX, "a seed is an unsigned 32-bit number, as in a recipe file")




class _Distinct(argparse.Action):
    """A list option whose values may not repeat (`--seeds 42 42` would run nothing twice: it is a mistake)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        seen: set[Any] = set()
        for value in values:
            if value in seen:
                parser.error(f"argument {option_string}: {short(value)} is given twice")
            seen.add(value)
        setattr(namespace, self.dest, list(values))


def add_recipe_selection(p: argparse.ArgumentParser) -> None:
    """--models/--seeds/--benchmarks: every command that takes --recipe narrows with these."""
    p.add_argument("--models", nargs="+", type=selection_id, action=_Distinct, metavar="MODEL",
                   help="only these models (release model ids)")
    p.add_argument("--seeds", nargs="+", type=seed_value, action=_Distinct, metavar="SEED",
                   help="only these seeds (0 to 4294967295)")
    p.add_argument("--benchmarks", nargs="+", type=selection_id, action=_Distinct, metavar="KEY",
                   help="only these benchmarks (suite keys)")


# Set by a command that leaves nothing to clean up at exit (see skip_teardown).
_teardown_skippable = False


def skip_teardown() -> None:
    """Say that this process, once the command returns, has nothing left to do but exit.

    For a short command that built a large heap (verify's parsed documents): freeing every object
    and module at interpreter exit takes longer than some of the checks. Measured: `trace-tui verify
    --release-dir` on the release, median of 15 runs, 124.6 ms with it and 130.6 ms without (5 %). Only the process entry
    (``entry``) acts on it: in-process callers of ``main`` (the tests, the TUI) are unaffected. A
    command may call it only when it holds no open file, log handler, child or temporary folder.
    """
    global _teardown_skippable
    _teardown_skippable = True


def teardown_skippable() -> bool:
    """Whether the command that ran said so (:func:`skip_teardown`)."""
    return _teardown_skippable

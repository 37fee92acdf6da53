"""The command line face of a stage worker's process: its options, declared by each worker as a dataclass, read
from argv (or from a step's ``args``) here and nowhere else (standard library only).

A field becomes an option ``--name-with-dashes`` of the field's type (``bool``: a switch; ``int``, ``float``,
``str``, ``Path``: a value, None when not given); ``field(metadata={"positional": True})`` makes it a positional
argument, ``metadata={"choices": (...)}`` limits its values.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "Path": Path}


class OptionsError(ValueError):
    """Arguments that do not fit a worker's options (argparse's own message)."""


def _value_type(annotation: object) -> tuple[type | None, bool]:
    """(the type an option's text becomes, whether it is a switch) for a field's annotation."""
    text = str(annotation).replace(" ", "")
    if text == "bool":
        return None, True
    for part in text.split("|"):
        if part in _TYPES:
            return _TYPES[part], False
    return None, False


def options_parser(cls: type, *, prog: str | None = None, description: str | None = None,
                   add_help: bool = True, exit_on_error: bool = True) -> argparse.ArgumentParser:
    """An argument parser whose arguments are the fields of the dataclass ``cls``."""
    parser = argparse.ArgumentParser(prog=prog, description=description, add_help=add_help,
                                     exit_on_error=exit_on_error)
    for f in dataclasses.fields(cls):
        kind, switch = _value_type(f.type)
        extra: dict[str, object] = {}
        if "choices" in f.metadata:
            extra["choices"] = f.metadata["choices"]
        if kind is not None and kind is not str:
            extra["type"] = kind
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.metadata.get("positional"):
            parser.add_argument(f.name, **extra)
        elif switch:
            parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, action="store_true")
        else:
            if not required:
                extra["default"] = f.default
            parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, required=required, **extra)
    return parser


def parse_options(cls: type[T], argv: Sequence[str] | None, *, prog: str | None = None,
                  description: str | None = None) -> T:
    """``cls`` from the command line ``argv`` (None: the process's own); a bad command line exits 2 with
    argparse's usage message, as a command does."""
    ns = options_parser(cls, prog=prog, description=description).parse_args(argv)
    return cls(**vars(ns))


def parse_step_options(cls: type[T], args: Sequence[str], *, prog: str) -> tuple[T, list[str]]:
    """(``cls`` from a recipe step's arguments, the arguments it does not know); OptionsError when they do not
    parse. A step's arguments are data: they never end the process or print a usage message."""
    parser = options_parser(cls, prog=prog, add_help=False, exit_on_error=False)
    try:
        ns, extra = parser.parse_known_args(list(args))
    except (argparse.ArgumentError, SystemExit) as exc:
        raise OptionsError(str(exc)) from None
    return cls(**vars(ns)), extra


__all__ = ["OptionsError", "options_parser", "parse_options", "parse_step_options"]

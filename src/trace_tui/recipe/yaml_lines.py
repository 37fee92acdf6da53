"""Where a recipe file is wrong: the YAML line of a pydantic error's field, the allowed fields and
values, and keys a mapping repeats (PyYAML keeps the last one silently)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from yaml import Node


def one_line(text: str) -> str:
    return " ".join(text.split())


def node_line(root: Node | None, loc: tuple[Any, ...]) -> int:
    """1-based line of the deepest YAML node on the path ``loc`` (pydantic error location)."""
    import yaml

    node, line = root, (root.start_mark.line + 1 if root is not None else 1)
    for key in loc:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    nxt, line = v, k.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            nxt = node.value[key]
            line = nxt.start_mark.line + 1
        if nxt is None:
            break
        node = nxt
    return line


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at ``loc`` (to list allowed field names)."""
    import typing

    current: Any = model
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or key not in current.model_fields:
            return None
        ann = current.model_fields[key].annotation
        # unwrap list[X] / X | None to X
        for _ in range(3):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if args and not (isinstance(ann, type) and issubclass(ann, BaseModel)):
                ann = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), args[0])
        current = ann
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def describe_validation_error(exc: ValidationError, root: Node | None, source: str, model: type[BaseModel]) -> str:
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p in ("list", "literal"))))
    field = ".".join(str(p) for p in loc) or "(top level)"
    line = node_line(root, loc)
    msg = err["msg"].removeprefix("Value error, ")
    allowed = ""
    if err["type"] == "extra_forbidden":
        owner = model_at(model, loc)
        if owner is not None:
            allowed = f"; allowed fields: {', '.join(owner.model_fields)}"
        msg = "unknown field"
    elif err["type"] == "missing":
        msg = "required field is missing"
    elif "expected" in (err.get("ctx") or {}):
        allowed = f"; allowed values: {err['ctx']['expected']}"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    value = err.get("input")
    shown = "" if err["type"] in ("missing",) or isinstance(value, (dict, list)) else f" (got {short_value(value)})"
    return f"{source}:{line}: {field}: {msg}{shown}{allowed}{tail}"


def short_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# Python refuses to read an integer of more digits than this (sys.get_int_max_str_digits' default);
# no recipe value comes near it.
MAX_INTEGER_DIGITS = 4300


def _nodes(root: Node | None) -> Iterator[Node]:
    """Every node of a composed YAML tree, each once: aliases share nodes, so a "billion laughs" stays small."""
    import yaml

    stack = [root]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack += [k, v]
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)


def too_long_integer(node: Node | None) -> tuple[int, int] | None:
    """(digits, line) of the first integer scalar too long for Python to read, if any."""
    import yaml

    for n in _nodes(node):
        if isinstance(n, yaml.ScalarNode) and n.tag == "tag:yaml.org,2002:int" and len(n.value) > MAX_INTEGER_DIGITS:
            digits = sum(c.isdigit() for c in n.value)
            if digits > MAX_INTEGER_DIGITS:
                return digits, n.start_mark.line + 1
    return None


def duplicate_key(node: Node | None) -> tuple[str, int] | None:
    """The first key a YAML mapping repeats (PyYAML keeps the last silently), with its line."""
    import yaml

    for n in _nodes(node):
        if isinstance(n, yaml.MappingNode):
            keys: set[str] = set()
            for k, _v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in keys:
                        return k.value, k.start_mark.line + 1
                    keys.add(k.value)
    return None



"""Record: a small typed value with keyword construction, equality and ``model_dump()``.

For values built in bulk from already-typed data on a timed path (`trace-tui verify`
builds hundreds), where importing pydantic — or dataclasses, which imports inspect
and compiles methods per class — costs more than the work. A subclass lists its
fields in ``__slots__`` and their defaults in ``_defaults`` (a callable default is a
factory, e.g. ``list``); a field without a default is required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Any, ClassVar

    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema


class Record:
    __slots__ = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **fields: object) -> None:
        # The first record of a class makes the class its own keyword-only __init__ (as dataclasses
        # do, without their import): hundreds of checks and summaries per verify, each built with
        # plain assignments instead of a loop over the slots and the defaults.
        cls = type(self)
        init = _make_init(cls)
        if cls.__dict__.get("__init__") is Record.__dict__["__init__"]:  # not a subclass's own __init__
            cls.__init__ = init  # type: ignore[method-assign]
        init(self, **fields)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:  # never a base's made __init__: a subclass has slots of its own
            cls.__init__ = Record.__dict__["__init__"]  # type: ignore[method-assign]

    def replace(self, **changes: object) -> Record:
        """A copy with some fields changed (as dataclasses.replace)."""
        return type(self)(**{name: getattr(self, name) for name in self.__slots__} | changes)

    def model_dump(self) -> dict[str, Any]:
        return {name: _dump(getattr(self, name)) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable by default, like a dataclass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
        """As a field of a pydantic model: accepted as itself or its dump, dumped as its dump.

        pydantic_core is imported only here, i.e. when some pydantic model is being built anyway.
        """
        from pydantic_core import core_schema

        def coerce(value: object) -> Record:
            if isinstance(value, cls):
                return value
            if isinstance(value, dict):
                return cls(**value)
            raise ValueError(f"expected {cls.__name__} or a mapping of its fields")

        return core_schema.no_info_plain_validator_function(
            coerce, serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v.model_dump()))


class FrozenRecord(Record):
    """A Record that refuses assignment after construction, hashable by its fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(_freeze(getattr(self, n)) for n in self.__slots__))


_NO_VALUE = object()


def _make_init(cls: type[Record]) -> Callable[..., None]:
    """A keyword-only __init__ for CLS: each slot required, or its default (a callable one: a factory)."""
    defaults = cls._defaults
    params, body = [], []
    env: dict[str, Any] = {"_set": object.__setattr__, "_NO_VALUE": _NO_VALUE}
    for name in cls.__slots__:
        if name not in defaults:
            params.append(name)
            body.append(f"    _set(self, {name!r}, {name})")
        elif callable(defaults[name]):
            env[f"_make_{name}"] = defaults[name]
            params.append(f"{name}=_NO_VALUE")
            body.append(f"    _set(self, {name!r}, _make_{name}() if {name} is _NO_VALUE else {name})")
        else:
            env[f"_default_{name}"] = defaults[name]
            params.append(f"{name}=_default_{name}")
            body.append(f"    _set(self, {name!r}, {name})")
    source = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, env)  # noqa: S102 - our own source, from the class's slot names
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _dump(value: object) -> object:
    if isinstance(value, Record):
        return value.model_dump()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list):
        return tuple(value)
    return value


class Verification(Record):
    """What a verification returns, a release's or a campaign's: its checks, which of them failed, whether it
    passed (``strict``: the release's own stricter reading; a campaign has none) and the exit code that says so.
    The one result model: the command line and the TUI read both the same way."""

    __slots__ = ()
    checks: list[Record]

    @property
    def failed(self) -> list[Record]:
        return [c for c in self.checks if getattr(c, "status", None) == "failed"]

    def ok(self, strict: bool = False) -> bool:
        return not self.failed

    def exit_code(self, strict: bool = False) -> int:
        return 0 if self.ok(strict) else 1


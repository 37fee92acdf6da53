"""Record: a small typed value with keyword construction, equality and ``model_dump()``.

For values built in bulk from already-typed data on a timed path (`trace-tui verify`
builds hundreds), where importing pydantic — or dataclasses, which imports inspect
and compiles methods per class — costs more than the work. A subclass lists its
fields in ``__slots__`` and their defaults in ``_defaults`` (a callable default is a
factory, e.g. ``list``); a field without a default is required.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing only for type checkers: importing it costs `trace-tui verify` 2-3 ms
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, ClassVar


class Record:
    __slots__ = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **fields: Any) -> None:
        slots = self.__slots__
        if len(fields) == len(slots):  # every field given (the bulk case): no defaults to look up
            try:
                for name in slots:
                    object.__setattr__(self, name, fields[name])
                return
            except KeyError:
                pass  # a name that is not a field: the general path below says which
        for name in slots:
            if name in fields:
                value = fields.pop(name)
            elif name in self._defaults:
                value = self._defaults[name]
                value = value() if callable(value) else value
            else:
                raise TypeError(f"{type(self).__name__}: missing field {name!r}")
            object.__setattr__(self, name, value)
        if fields:
            raise TypeError(f"{type(self).__name__}: unknown fields {sorted(fields)}")

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
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As a field of a pydantic model: accepted as itself or its dump, dumped as its dump.

        pydantic_core is imported only here, i.e. when some pydantic model is being built anyway.
        """
        from pydantic_core import core_schema

        def coerce(value: Any) -> Any:
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

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(_freeze(getattr(self, n)) for n in self.__slots__))


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.model_dump()
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list):
        return tuple(value)
    return value

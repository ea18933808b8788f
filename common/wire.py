"""Dataclass <-> JSON-ready dict conversion, driven by type hints.

Wire names are camelCase unless a field's metadata gives ``wire``. ``None`` fields are left out, so
an absent optional field and a missing key mean the same thing to the CRD schema.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class WireError(ValueError):
    """Raised when a dict does not have the shape its dataclass expects."""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def wire_name(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata.get("wire", camel(field.name)))


def to_wire(value: Any, *, lean: bool = False) -> Any:
    """The JSON-ready form. `lean` also leaves out a field at an empty default ("" or ()), which
    reads back the same (``from_wire`` fills defaults) and costs nothing to store."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None or (lean and item in _EMPTY and item == field.default):
                continue
            out[wire_name(field)] = to_wire(item, lean=lean)
        return out
    if isinstance(value, tuple | list):
        return [to_wire(v, lean=lean) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v, lean=lean) for k, v in value.items()}
    return value


_EMPTY = ("", ())


Decoder = Callable[[Any], Any]


class _Bad(Exception):
    """A decode failure on its way up: the message, and the path parts added by each level."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.where: list[str] = []


def from_wire(cls: type[T], data: Any, path: str = "") -> T:
    """Build ``cls`` from wire data; raises WireError naming the bad path."""
    try:
        return typing.cast(T, _decoder(typing.cast(Any, cls))(data))
    except _Bad as bad:
        where = "".join(reversed(bad.where))
        raise WireError(f"{path or cls.__name__}{where}: {bad.message}") from None


# One decoder per type, built once from its type hints: a status has hundreds of fields, and
# walking the hints (and recomputing wire names) for each of them cost milliseconds per status.
@functools.cache
def _decoder(tp: Any) -> Decoder:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return _union(tp)
    if origin is tuple:
        return _tuple(tp)
    if origin is dict:
        return _dict(tp)
    if origin is typing.Literal:
        allowed = get_args(tp)

        def literal(data: Any) -> Any:
            if data not in allowed:
                raise _Bad(f"{data!r} is not one of {list(allowed)}")
            return data

        return literal
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if tp is Any:
        return lambda data: data
    if tp in _SCALARS:
        return _SCALARS[tp]
    raise WireError(f"unsupported type {tp!r}")


def _union(tp: Any) -> Decoder:
    options = [a for a in get_args(tp) if a is not type(None)]
    decoders = [_decoder(a) for a in options]
    if len(decoders) == 1:
        only = decoders[0]
        return lambda data: None if data is None else only(data)

    def union(data: Any) -> Any:
        if data is None:
            return None
        for decode in decoders:
            try:
                return decode(data)
            except _Bad:
                continue
        raise _Bad(f"{data!r} matches none of {options}")

    return union


def _items(decode: Decoder, data: Any) -> tuple[Any, ...]:
    if not isinstance(data, list | tuple):
        raise _Bad(f"expected a list, got {type(data).__name__}")
    return _each(zip(repeat(decode), data))


def _each(pairs: Iterable[tuple[Decoder, Any]]) -> tuple[Any, ...]:
    """Each value decoded by its decoder; a bad one's error names its index."""
    out = []
    for i, (decode, v) in enumerate(pairs):
        try:
            out.append(decode(v))
        except _Bad as bad:
            bad.where.append(f"[{i}]")
            raise
    return tuple(out)


def _tuple(tp: Any) -> Decoder:
    args = get_args(tp)
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])
        return lambda data: _items(item, data)
    decoders = [_decoder(a) for a in args]

    def fixed(data: Any) -> Any:
        if not isinstance(data, list | tuple):
            raise _Bad(f"expected a list, got {type(data).__name__}")
        if len(data) != len(decoders):
            raise _Bad(f"expected {len(decoders)} items, got {len(data)}")
        return _each(zip(decoders, data, strict=True))

    return fixed


def _dict(tp: Any) -> Decoder:
    key_t, val_t = get_args(tp)
    key_decode, val_decode = _decoder(key_t), _decoder(val_t)

    def mapping(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Bad("expected an object")
        out = {}
        for k, v in data.items():
            key = key_decode(k)
            try:
                out[key] = val_decode(v)
            except _Bad as bad:
                bad.where.append(f".{k}")
                raise
        return out

    return mapping


_MISSING = object()


def _dataclass(tp: type) -> Decoder:
    plan: list[tuple[str, str, Decoder, bool]] = []

    def build() -> None:  # on first use, so a type may refer to one defined after it
        hints = typing.get_type_hints(tp)
        for field in dataclasses.fields(tp):
            required = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            plan.append((field.name, wire_name(field), _decoder(hints[field.name]), required))

    def obj(data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Bad(f"expected an object, got {type(data).__name__}")
        if not plan:
            build()
        kwargs: dict[str, Any] = {}
        for name, key, decode, required in plan:
            value = data.get(key, _MISSING)
            if value is not _MISSING:
                try:
                    kwargs[name] = decode(value)
                except _Bad as bad:
                    bad.where.append(f".{key}")
                    raise
            elif required:
                raise _Bad(f"missing required field {key!r}")
        return tp(**kwargs)

    return obj


def _float(data: Any) -> float:
    if isinstance(data, bool) or not isinstance(data, int | float):
        raise _Bad(f"expected a number, got {data!r}")
    return float(data)


def _int(data: Any) -> int:
    if isinstance(data, bool) or not isinstance(data, int):
        raise _Bad(f"expected an integer, got {data!r}")
    return data


def _str(data: Any) -> str:
    if not isinstance(data, str):
        raise _Bad(f"expected str, got {data!r}")
    return data


def _bool(data: Any) -> bool:
    if not isinstance(data, bool):
        raise _Bad(f"expected bool, got {data!r}")
    return data


_SCALARS: dict[Any, Decoder] = {float: _float, int: _int, str: _str, bool: _bool}

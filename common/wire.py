"""Dataclass <-> JSON-ready dict conversion, driven by type hints.

Wire names are camelCase unless a field's metadata gives ``wire``. ``None`` fields are left out, so
an absent optional field and a missing key mean the same thing to the CRD schema.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class WireError(ValueError):
    """Raised when a dict does not have the shape its dataclass expects."""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def wire_name(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata.get("wire", camel(field.name)))


def to_wire(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None:
                continue
            out[wire_name(field)] = to_wire(item)
        return out
    if isinstance(value, tuple | list):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_wire(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_wire(cls: type[T], data: Any, path: str = "") -> T:
    """Build ``cls`` from wire data; raises WireError naming the bad path."""
    return typing.cast(T, _convert(cls, data, path or cls.__name__))


def _convert(tp: Any, data: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        if data is None:
            return None
        if len(options) == 1:
            return _convert(options[0], data, path)
        for arg in options:
            try:
                return _convert(arg, data, path)
            except WireError:
                continue
        raise WireError(f"{path}: {data!r} matches none of {options}")
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(data, list | tuple):
            raise WireError(f"{path}: expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{path}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise WireError(f"{path}: expected {len(args)} items, got {len(data)}")
        return tuple(
            _convert(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data, strict=True))
        )
    if origin is dict:
        key_t, val_t = get_args(tp)
        if not isinstance(data, dict):
            raise WireError(f"{path}: expected an object")
        return {
            _convert(key_t, k, path): _convert(val_t, v, f"{path}.{k}") for k, v in data.items()
        }
    if origin is typing.Literal:
        if data not in get_args(tp):
            raise WireError(f"{path}: {data!r} is not one of {list(get_args(tp))}")
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise WireError(f"{path}: expected an object, got {type(data).__name__}")
        hints = _hints(tp)
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(tp):
            key = wire_name(field)
            if key in data:
                kwargs[field.name] = _convert(hints[field.name], data[key], f"{path}.{key}")
            elif (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ):
                raise WireError(f"{path}: missing required field {key!r}")
        return tp(**kwargs)
    if tp is Any:
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise WireError(f"{path}: expected a number, got {data!r}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise WireError(f"{path}: expected an integer, got {data!r}")
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise WireError(f"{path}: expected {tp.__name__}, got {data!r}")
        return data
    raise WireError(f"{path}: unsupported type {tp!r}")

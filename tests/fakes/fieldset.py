"""The managedFields entry (fieldsV1) kube-apiserver records for a server-side apply. Pure.

Follows structured-merge-diff's field-set walk (typed/tofieldset.go): a scalar, an atomic list and
an atomic map are one member; a granular map with properties adds its members, not itself; keys
outside the properties add themselves too; each entry of a keyed list (`k:{...}`) or a set
(`v:...`) is a member and, unless atomic, holds its own members. Serialised as the API does: a
member with no children is `{}`, a member with children also carries `".": {}`.
Checked against the fieldsV1 a real kube-apiserver 1.36 wrote (tests/agent/test_status_size.py).
"""

from __future__ import annotations

import json
from typing import Any

_MEMBER = "."


def fields_v1(value: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The fieldsV1 document for `value` applied at the root of `schema` (an object)."""
    return _serialise(_walk(value, schema))


def _walk(value: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """This path's children keyed by path element; `"."` marks the path itself a member."""
    kind = schema.get("type")
    if kind == "object":
        if schema.get("x-kubernetes-map-type") == "atomic":
            return {_MEMBER: {}}
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, child in (value or {}).items():
            if key in props:
                walked = _walk(child, props[key])
                if walked:  # an empty keyed list or granular map owns nothing
                    out[f"f:{key}"] = walked
            elif isinstance(extra, dict):
                out[f"f:{key}"] = {**_walk(child, extra), _MEMBER: {}}
            # anything else is pruned by the API server before the apply
        return out
    if kind == "array":
        list_type = schema.get("x-kubernetes-list-type", "atomic")
        if list_type == "atomic":
            return {_MEMBER: {}}
        out = {}
        for item in value or []:
            if list_type == "map":
                keys = {k: item[k] for k in schema["x-kubernetes-list-map-keys"]}
                element = "k:" + json.dumps(keys, separators=(",", ":"), sort_keys=True)
            else:
                element = "v:" + json.dumps(item, separators=(",", ":"))
            out[element] = {**_walk(item, schema["items"]), _MEMBER: {}}
        return out
    return {_MEMBER: {}}


def _serialise(node: dict[str, Any]) -> dict[str, Any]:
    children = {k: _serialise(v) for k, v in sorted(node.items()) if k != _MEMBER}
    if _MEMBER in node and children:
        return {_MEMBER: {}, **children}
    return children

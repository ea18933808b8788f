"""The building blocks of the generated CRDs (hack/gen_crds.py): an OpenAPI v3 schema derived from
a common.model dataclass (keyed lists where server-side apply should merge entries), and the
CustomResourceDefinition around a schema.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import api  # noqa: E402
from common.model import (  # noqa: E402
    Condition,
    Gpu,
    Hca,
    HcaPort,
    NearHca,
    NvLinkIsland,
    NvLinkPeer,
    NvmePeer,
)
from common.wire import wire_name  # noqa: E402

# Keyed lists, so server-side apply merges entries instead of replacing the whole list.
LIST_KEYS: dict[type, str] = {
    Gpu: "index",
    Hca: "name",
    HcaPort: "port",
    Condition: "type",
    NvLinkIsland: "id",
    NvmePeer: "name",
    NvLinkPeer: "pciBusId",
    NearHca: "name",
}


def schema_for(tp: Any) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return schema_for(args[0])
    if origin is Literal:
        values = list(get_args(tp))
        return {"type": "string", "enum": values}
    if origin is tuple:
        args = get_args(tp)
        item = args[0]
        out: dict[str, Any] = {"type": "array", "items": schema_for(item)}
        if dataclasses.is_dataclass(item) and item in LIST_KEYS:
            out["x-kubernetes-list-type"] = "map"
            out["x-kubernetes-list-map-keys"] = [LIST_KEYS[item]]  # type: ignore[index]
        else:
            out["x-kubernetes-list-type"] = "atomic"
        if len(args) != 2 or args[1] is not Ellipsis:  # fixed-size tuple of scalars
            out["items"] = schema_for(args[0])
        return out
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        props = {}
        required = []
        for f in dataclasses.fields(tp):
            props[wire_name(f)] = schema_for(hints[f.name])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(wire_name(f))
        out = {"type": "object", "properties": props}
        if tp in LIST_KEYS and LIST_KEYS[tp] not in required:  # type: ignore[index]
            required.append(LIST_KEYS[tp])  # type: ignore[index]
        if required:
            out["required"] = required
        return out
    return {
        int: {"type": "integer"},
        str: {"type": "string"},
        bool: {"type": "boolean"},
        float: {"type": "number"},
    }[tp]


def crd(
    kind: str,
    plural: str,
    scope: str,
    short: list[str],
    schema: dict[str, Any],
    printer: list[dict[str, Any]],
    status_subresource: bool,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": api.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": printer,
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{api.GROUP}"},
        "spec": {
            "group": api.GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
            },
            "scope": scope,
            "versions": [version],
        },
    }

"""An object checked against the OpenAPI v3 document kube-apiserver serves for its kind
(/openapi/v3/apis/GROUP/VERSION), so a test fails where the server would refuse it: a missing
required field, a wrong type or enum value (JSON Schema), a field the schema does not know (the
server's strict decoding refuses it, the default one drops it without a word), and a union
(`x-kubernetes-unions`: "exactly one of ... must be set") with none or two of its members set.
Built-in kinds have no CRD; these documents are their schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema

REF = "#/components/schemas/"


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def closure(doc: Mapping[str, Any], root: str) -> dict[str, Any]:
    """The part of `doc` that `root` (a schema name) reaches: `openapi`, `info` and the schemas it
    refers to, each unchanged (how the fixtures under tests/fixtures/schedulers are cut)."""
    schemas = doc["components"]["schemas"]
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_refs(schemas[name]))
    return {
        "openapi": doc["openapi"],
        "info": doc["info"],
        "components": {"schemas": {n: schemas[n] for n in sorted(seen)}},
    }


def problems(obj: Any, doc: Mapping[str, Any], name: str) -> list[str]:
    """Every way `obj` breaks schema `name` of `doc`, as messages naming where."""
    schemas = doc["components"]["schemas"]
    validator = jsonschema.Draft7Validator({"$ref": REF + name, "components": doc["components"]})
    found = [f"{_where(err.absolute_path)}: {err.message}" for err in validator.iter_errors(obj)]
    found.extend(_beyond_json_schema(obj, {"$ref": REF + name}, schemas, ""))
    return found


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref":
                yield value.removeprefix(REF)
            else:
                yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _where(path: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path) or "."


def _resolved(schema: Mapping[str, Any], schemas: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with its `$ref` and `allOf` parts merged in (the generator's only composition)."""
    out = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
    parts = [{"$ref": schema["$ref"]}] if "$ref" in schema else []
    for part in [*parts, *schema.get("allOf", [])]:
        target = schemas[part["$ref"].removeprefix(REF)] if "$ref" in part else part
        out = {**_resolved(target, schemas), **out}
    return out


def _beyond_json_schema(
    obj: Any, schema: Mapping[str, Any], schemas: Mapping[str, Any], at: str
) -> Iterator[str]:
    """What JSON Schema does not say here: unknown fields (the documents leave
    additionalProperties open) and the unions."""
    full = _resolved(schema, schemas)
    if isinstance(obj, dict):
        fields = full.get("properties")
        for key, value in obj.items():
            if fields is not None and key not in fields:
                yield f"{at}.{key}: unknown field"
            elif fields is not None:
                yield from _beyond_json_schema(value, fields[key], schemas, f"{at}.{key}")
            elif isinstance(full.get("additionalProperties"), dict):
                inner = full["additionalProperties"]
                yield from _beyond_json_schema(value, inner, schemas, f"{at}.{key}")
        for union in full.get("x-kubernetes-unions", []):
            members = sorted(union["fields-to-discriminateBy"])
            chosen = [m for m in members if obj.get(m) is not None]
            if len(chosen) != 1:
                yield f"{at or '.'}: exactly one of {members} must be set, not {chosen}"
    elif isinstance(obj, list) and isinstance(full.get("items"), dict):
        for i, value in enumerate(obj):
            yield from _beyond_json_schema(value, full["items"], schemas, f"{at}[{i}]")

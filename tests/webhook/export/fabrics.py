"""Fabrics for the export tests: uneven spine domains with an empty slot, and NVLink domains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, Leaf, Spine

SCHEDULERS = Path(__file__).resolve().parents[2] / "fixtures" / "schedulers"
UUID = "6a1c9e4e-2f3b-4d5a-9c8e-0123456789ab"


def nodes(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}-{i:02d}" for i in range(1, n + 1))


def fabric() -> Fabric:
    """Spine A: leaves a0, (empty), a2, a3, a4 (5 slots: quads a0..a3 and a4); spine B: b0, b1.
    Leaf sizes differ (largest 4) and one leaf id is not a valid label value."""
    a = (
        Leaf("a0", ("a0",), nodes("gpu-a0", 4)),
        Leaf("a1", ("a1",), ()),
        Leaf("a2", ("a2",), nodes("gpu-a2", 3)),
        Leaf("A_3", ("A_3",), nodes("gpu-a3", 2)),
        Leaf("a4", ("a4",), nodes("gpu-a4", 4)),
    )
    b = (Leaf("b0", ("b0",), nodes("gpu-b0", 1)), Leaf("b1", ("b1",), nodes("gpu-b1", 4)))
    return Fabric("test", (Spine("Spine_A", ("Spine_A",), a), Spine("spine-b", ("spine-b",), b)))


def positions() -> Positions:
    return Positions(fabric())


def nvlink() -> dict[str, str]:
    """Two NVLink domains: one filling leaf a0, one spanning a2 and a3 (minus one node)."""
    out = dict.fromkeys(nodes("gpu-a0", 4), f"{UUID}.1")
    out |= dict.fromkeys(nodes("gpu-a2", 3) + nodes("gpu-a3", 1), f"{UUID}.2")
    return out


def crd_schema(name: str, version: str) -> dict[str, Any]:
    crd = next(
        d
        for d in yaml.safe_load_all((SCHEDULERS / name).read_text())
        if d and d.get("kind") == "CustomResourceDefinition"
    )
    ver = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    assert ver["served"]
    schema: dict[str, Any] = ver["schema"]["openAPIV3Schema"]
    return schema


def cel_failures(obj: Any, schema: dict[str, Any]) -> list[str]:
    """The messages of the CRD's CEL rules (`x-kubernetes-validations`) that `obj` breaks, as the
    API server evaluates them on create (rules on `oldSelf` are for updates: skipped)."""
    import celpy  # the tests' CEL interpreter; only these checks need it

    env, out = celpy.Environment(), []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" not in rule["rule"]:
            program = env.program(env.compile(rule["rule"]))
            if not bool(program.evaluate({"self": celpy.json_to_cel(obj)})):
                out.append(str(rule.get("message") or rule["rule"]))
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in schema.get("properties", {}):
                out += cel_failures(value, schema["properties"][key])
    if isinstance(obj, list) and "items" in schema:
        out += [m for item in obj for m in cel_failures(item, schema["items"])]
    return out

"""Test oracle: (original pod, mutated pod) -> JSONPatch, computed from the outside.

The webhook records its ops while editing (webhook/admission/podedit.py); this independent diff was its
patch builder before that, and the property tests now hold the two together.

The mutation only adds: keys to objects and items at the end of lists (spec.affinity, spec.volumes,
each container's env and volumeMounts). `diff` emits exactly those adds, with a whole-value
`replace` as the fallback for anything else. A general diff (jsonpatch.make_patch) of the whole pod
costs more than everything else in a review; mutate's copy shares every subtree it does not write
with the original, so the walk skips those by identity. The property tests check that the patch
rebuilds the mutated pod exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _walk(ops: list[dict[str, Any]], path: str, old: Any, new: Any) -> None:
    if old is new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
            elif old[key] is not value:
                _walk(ops, f"{path}/{_escape(key)}", old[key], value)
        return
    if isinstance(old, list) and isinstance(new, list) and len(new) >= len(old):
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            if a is not b:
                _walk(ops, f"{path}/{i}", a, b)
        for i in range(len(old), len(new)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": new[i]})
        return
    if old == new:
        return
    ops.append({"op": "replace", "path": path, "value": new})


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    _walk(ops, "", dict(old), dict(new))
    return ops

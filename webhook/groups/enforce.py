"""The one JSONPatch that places a gated member: tighten its node affinity, record, ungate.

While a pod is gated the API server accepts only tightening (KEP-3838, notes/k8s_placement.md 4.4):
node affinity may be set when absent; with required terms present, requirements may only be
appended to each term. The gate goes in the same update, after a `test` that it is still there,
so a stale or repeated patch fails instead of placing the pod twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.groups.names import ANN_PLACEMENT, GATE, escape_key, level_key
from webhook.kube.nodeselector import REQUIRED, required_terms

Op = dict[str, Any]


def placement_value(level: str | None, domain: str) -> str:
    return f"{level}={domain}" if level else "none"


def parse_placement(value: str) -> tuple[str, str] | None:
    level, sep, domain = value.partition("=")
    return (level, domain) if sep and level and domain else None


def affinity_ops(pod: Mapping[str, Any], expr: Mapping[str, Any]) -> list[Op]:
    """Add `expr` to every required nodeSelectorTerm (creating the affinity if absent)."""
    spec = pod.get("spec") or {}
    required = {"nodeSelectorTerms": [{"matchExpressions": [dict(expr)]}]}
    affinity = spec.get("affinity")
    if not isinstance(affinity, Mapping):
        value = {"nodeAffinity": {REQUIRED: required}}
        return [{"op": "add", "path": "/spec/affinity", "value": value}]
    node = affinity.get("nodeAffinity")
    if not isinstance(node, Mapping):
        return [{"op": "add", "path": "/spec/affinity/nodeAffinity", "value": {REQUIRED: required}}]
    terms = required_terms(pod)
    if not terms:  # absent (or empty, which the API does not accept anyway)
        return [{"op": "add", "path": f"/spec/affinity/nodeAffinity/{REQUIRED}", "value": required}]
    ops: list[Op] = []
    for i, term in enumerate(terms):
        base = f"/spec/affinity/nodeAffinity/{REQUIRED}/nodeSelectorTerms/{i}/matchExpressions"
        have = (term or {}).get("matchExpressions")
        if isinstance(have, list):
            if dict(expr) not in have:
                ops.append({"op": "add", "path": f"{base}/-", "value": dict(expr)})
        else:
            ops.append({"op": "add", "path": base, "value": [dict(expr)]})
    return ops


def place_ops(pod: Mapping[str, Any], level: str | None, domain: str) -> list[Op] | None:
    """The patch for one member; None if the pod no longer carries the gate."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    index = next((i for i, g in enumerate(gates) if (g or {}).get("name") == GATE), None)
    if index is None:
        return None
    ops: list[Op] = []
    if level:
        ops += affinity_ops(pod, {"key": level_key(level), "operator": "In", "values": [domain]})
    annotations = (pod.get("metadata") or {}).get("annotations")
    value = placement_value(level, domain)
    if isinstance(annotations, Mapping):
        path = f"/metadata/annotations/{escape_key(ANN_PLACEMENT)}"
        ops.append({"op": "add", "path": path, "value": value})
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {ANN_PLACEMENT: value}})
    ops.append({"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE})
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
    return ops

"""The one JSONPatch that places a gated member: tighten its node affinity, record, ungate.

While a pod is gated the API server accepts only tightening (KEP-3838, notes/k8s_placement.md 4.4):
node affinity may be set when absent; with required terms present, requirements may only be
appended to each term. The gate goes in the same update, after a `test` that it is still there,
so a stale or repeated patch fails instead of placing the pod twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.groups.model.names import ANN_PLACEMENT, ANN_RANK, GATE, escape_key, level_key
from webhook.kube.nodeselector import REQUIRED, required_terms

Op = dict[str, Any]


def placement_value(level: str | None, domain: str) -> str:
    return f"{level}={domain}" if level else "none"


def parse_placement(value: str) -> tuple[str, str] | None:
    level, sep, domain = value.partition("=")
    return (level, domain) if sep and level and domain else None


def affinity_ops(pod: Mapping[str, Any], *exprs: Mapping[str, Any]) -> list[Op]:
    """Add `exprs` to every required nodeSelectorTerm (creating the affinity if absent)."""
    spec = pod.get("spec") or {}
    required = {"nodeSelectorTerms": [{"matchExpressions": [dict(e) for e in exprs]}]}
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
        new = [dict(e) for e in exprs if not isinstance(have, list) or dict(e) not in have]
        if isinstance(have, list):
            ops += [{"op": "add", "path": f"{base}/-", "value": e} for e in new]
        elif new:
            ops.append({"op": "add", "path": base, "value": new})
    return ops


def place_ops(
    pod: Mapping[str, Any],
    level: str | None,
    domain: str,
    hold: tuple[str, str] | None = None,
    rank: int | None = None,
) -> list[Op] | None:
    """The patch for one member; None if the pod no longer carries the gate. `hold`: the member's
    own lowest (level, domain), held like the group's; `rank`: written as gpufabric.io/rank."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    index = next((i for i, g in enumerate(gates) if (g or {}).get("name") == GATE), None)
    if index is None:
        return None
    exprs = [{"key": level_key(level), "operator": "In", "values": [domain]}] if level else []
    if hold is not None and hold != (level, domain):
        exprs.append({"key": level_key(hold[0]), "operator": "In", "values": [hold[1]]})
    ops: list[Op] = affinity_ops(pod, *exprs) if exprs else []
    annotations = (pod.get("metadata") or {}).get("annotations")
    written = {ANN_PLACEMENT: placement_value(level, domain)}
    if rank is not None:
        written[ANN_RANK] = str(rank)
    if isinstance(annotations, Mapping):
        for key, value in written.items():
            path = f"/metadata/annotations/{escape_key(key)}"
            ops.append({"op": "add", "path": path, "value": value})
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": written})
    ops.append({"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE})
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
    return ops

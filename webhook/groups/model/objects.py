"""Node and Pod objects as placement reads them: a Node's NodeInfo (its GPUs, the taints pods
must tolerate, and why it may not take new pods) and the GPUs a pod's spec asks for. Malformed
fields read as none; admission reports them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common import api
from webhook.groups.model.nodelabels import NodeLabels


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Only what placement reads, so a heartbeat-only Node update compares equal."""

    name: str
    labels: Mapping[str, str]
    gpus: int  # allocatable nvidia.com/gpu
    taints: tuple[Mapping[str, Any], ...]
    why_not: str  # "" when the node may take new pods

    @property
    def usable(self) -> bool:
        return not self.why_not


def _quantity(value: object) -> int:
    """An extended resource quantity is an integer; anything else counts as none."""
    text = str(value).strip() if value is not None else ""
    if text.endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1000
    return int(text) if text.isdigit() else 0


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    labels = NodeLabels({str(k): str(v) for k, v in (meta.get("labels") or {}).items()})
    ready = next(
        (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    why = ""
    if meta.get("deletionTimestamp"):
        why = "being deleted"
    elif spec.get("unschedulable"):
        why = "unschedulable (cordoned)"
    elif ready != "True":
        why = f"not Ready (Ready={ready or 'unknown'})"
    elif labels.get(api.LABEL_FABRIC_HEALTH) == "degraded":
        why = f"{api.LABEL_FABRIC_HEALTH}=degraded"
    taints = tuple(
        {"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")}
        for t in spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
    )
    gpus = _quantity((status.get("allocatable") or {}).get(api.GPU_RESOURCE))
    return NodeInfo(str(meta.get("name", "")), labels, gpus, taints, sys.intern(why))


def as_map(value: object) -> Mapping[str, Any]:
    """value if it is a mapping, else an empty one (fields of a pod or node read without guards).
    A decoded review holds plain dicts: `type is dict` spares the ABC check (admission runs it)."""
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [c for c in value if type(c) is dict or isinstance(c, Mapping)]


def pod_gpus(spec: Mapping[str, Any]) -> int:
    """GPUs the scheduler reserves for a pod: containers summed, init containers at their max.
    Malformed parts count as none (admission reports them; this must not crash on them)."""

    def one(c: Mapping[str, Any]) -> int:
        res = as_map(c.get("resources"))
        value = as_map(res.get("requests")).get(api.GPU_RESOURCE)
        if value is None:  # extended resources: the request defaults to the limit
            value = as_map(res.get("limits")).get(api.GPU_RESOURCE)
        return _quantity(value)

    inits = _list(spec.get("initContainers"))
    main = sum(one(c) for c in _list(spec.get("containers")))
    init = [one(c) for c in inits if c.get("restartPolicy") != "Always"]
    sidecars = sum(one(c) for c in inits if c.get("restartPolicy") == "Always")
    return max([main + sidecars, *init])

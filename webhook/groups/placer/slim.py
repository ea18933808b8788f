"""Keep only what the placer reads of a Pod or Node, as soon as it arrives.

A relist of 20,000 real pods (managedFields, env, volumes, status) would otherwise sit in memory
whole until the placer has read it; the slim copies are a small fraction of that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_POD_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",  # waiting groups are tried oldest first
    "labels",
    "annotations",
    "ownerReferences",  # a group's ComputeDomain is owned by the members' controller
)
_POD_SPEC = (
    "nodeName",
    "affinity",
    "nodeSelector",
    "tolerations",
    "schedulingGates",
    "priority",  # preemption (DESIGN "Priority"); priorityClassName only for people to read
    "priorityClassName",
    "preemptionPolicy",
    "terminationGracePeriodSeconds",  # how long a victim may take to leave
    "resourceClaims",  # which ComputeDomain's IMEX channel a member claims
    "schedulingGroup",  # the PodGroup a member names (native gang)
)


def _resources(containers: Any) -> list[dict[str, Any]]:
    out = []
    for c in containers if isinstance(containers, list) else []:
        if isinstance(c, Mapping):
            kept: dict[str, Any] = {"resources": c.get("resources") or {}}
            if "restartPolicy" in c:
                kept["restartPolicy"] = c["restartPolicy"]
            out.append(kept)
    return out


def slim_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    out_meta = {k: meta[k] for k in _POD_META if k in meta}
    if meta.get("deletionTimestamp"):
        out_meta["deletionTimestamp"] = meta["deletionTimestamp"]
    out_spec = {k: spec[k] for k in _POD_SPEC if k in spec}
    out_spec["containers"] = _resources(spec.get("containers"))
    if spec.get("initContainers"):
        out_spec["initContainers"] = _resources(spec.get("initContainers"))
    status = obj.get("status") or {}
    out_status: dict[str, Any] = {"phase": status.get("phase")}
    if status.get("nominatedNodeName"):  # room the scheduler keeps for it (capacity.py)
        out_status["nominatedNodeName"] = status["nominatedNodeName"]
    said = [c for c in status.get("conditions") or [] if (c or {}).get("type") == "PodScheduled"]
    if said and not spec.get("nodeName"):  # why it is not bound (GroupPartlyBound names it)
        out_status["conditions"] = said
    return {"metadata": out_meta, "spec": out_spec, "status": out_status}


def slim_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "labels", "deletionTimestamp") if k in meta},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
        "status": {
            "allocatable": status.get("allocatable") or {},
            "conditions": [
                c for c in status.get("conditions") or [] if (c or {}).get("type") == "Ready"
            ],
        },
    }

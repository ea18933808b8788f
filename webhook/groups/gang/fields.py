"""What the placer reads of a pod for native gangs and the partly-bound watch. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def named_group(spec: Mapping[str, Any]) -> str:
    """The PodGroup a pod spec names (spec.schedulingGroup.podGroupName; "" for none)."""
    group = spec.get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else ""


def scheduler_message(status: Mapping[str, Any]) -> str:
    """kube-scheduler's last word on an unbound pod: its PodScheduled=False condition's message
    (e.g. "0/128 nodes are available: ... 8 Insufficient nvidia.com/gpu"), "" when none."""
    for c in status.get("conditions") or []:
        if not isinstance(c, Mapping):
            continue
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return ""


def nominated_node(status: Mapping[str, Any]) -> str:
    """status.nominatedNodeName: the node kube-scheduler keeps room on for this pending pod."""
    return str(status.get("nominatedNodeName") or "")

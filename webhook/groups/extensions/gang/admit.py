"""At CREATE, a group member names its group's PodGroup (`spec.schedulingGroup.podGroupName`),
where the cluster serves PodGroups. Pure: whether it does is the caller's cached answer
(served.py), never a call made while answering a review."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.groups.extensions.gang.names import podgroup_name
from webhook.groups.model.pods import named_group


def gang_ops(pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
    """The JSONPatch ops that make the pod a member of PodGroup gpufabric-<group>; none when it
    names a PodGroup already (the user's own, or ours on reinvocation) or when the group's name
    makes no valid PodGroup name."""
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    name = podgroup_name(group)
    if name is None or named_group(spec):
        return []
    if isinstance(spec.get("schedulingGroup"), Mapping):
        return [{"op": "add", "path": "/spec/schedulingGroup/podGroupName", "value": name}]
    return [{"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": name}}]

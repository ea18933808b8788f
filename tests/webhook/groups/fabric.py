"""Builders for Node and Pod objects as the API server returns them (trimmed to what the placer
reads; field names and shapes from reference/k8s-wire/nodes and core/v1 types)."""

from __future__ import annotations

from typing import Any

from webhook.groups.model.names import (
    ANN_GROUP,
    ANN_LEVEL,
    ANN_LOCALITY,
    ANN_SIZE,
    GATE,
    LABEL_GROUP,
)


def node(
    i: int,
    *,
    leaf: int = 4,
    spine_leaves: int = 16,
    gpus: int = 8,
    ready: bool = True,
    extra: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """Node i of a tree fabric: `leaf` nodes per leaf, aligned pairs and quads, spines of
    `spine_leaves` leaves. Domain values are unique cluster-wide, as DESIGN.md requires."""
    lf = i // leaf
    labels = {
        "kubernetes.io/hostname": f"node-{i:04d}",
        "gpufabric.io/leaf": f"leaf-{lf}",
        "gpufabric.io/leaf-pair": f"pair-{lf // 2}",
        "gpufabric.io/leaf-quad": f"quad-{lf // 4}",
        "gpufabric.io/spine": f"spine-{lf // spine_leaves}",
        **(extra or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:04d}", "labels": labels, "resourceVersion": str(100 + i)},
        "spec": {
            **({"taints": taints} if taints else {}),
            **({"unschedulable": True} if unschedulable else {}),
        },
        "status": {
            "allocatable": {"cpu": "190", "memory": "2063857164Ki", "nvidia.com/gpu": str(gpus)},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "Unknown"},
            ],
        },
    }


def fabric(nodes: int, **kw: Any) -> list[dict[str, Any]]:
    return [node(i, **kw) for i in range(nodes)]


def gpu_pod(
    name: str,
    gpus: int = 8,
    *,
    namespace: str = "team-a",
    node_name: str = "",
    phase: str = "Pending",
    uid: str | None = None,
    group: str | None = None,
    size: int = 0,
    locality: str = "required",
    level: str = "auto",
    gated: bool = False,
    affinity: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    labels: dict[str, str] = {}
    if group is not None:
        ann |= {ANN_GROUP: group, ANN_SIZE: str(size), ANN_LOCALITY: locality, ANN_LEVEL: level}
        labels[LABEL_GROUP] = group
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "trainer",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    if affinity is not None:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": ann,
        },
        "spec": spec,
        "status": {"phase": phase},
    }

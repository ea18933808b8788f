"""A full cluster for the preemption tests: the issue's 32 nodes x 8 GPUs, 8 leaves of 4 under 2
spines, every node running one 8-GPU pod; helpers to add priorities and to let victims go."""

from __future__ import annotations

from typing import Any

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer

LOW, HIGH = 100, 1_000_000


def prio(pod: dict[str, Any], priority: int, never: bool = False, created: str = "") -> dict:
    """The pod as admission leaves it: spec.priority from its PriorityClass."""
    pod["spec"]["priority"] = priority
    pod["spec"]["priorityClassName"] = "high" if priority >= HIGH else "low"
    if never:
        pod["spec"]["preemptionPolicy"] = "Never"
    if created:
        pod["metadata"]["creationTimestamp"] = created
    return pod


def full(priority: int = LOW, nodes: int = 32) -> tuple[FakeApi, Placer]:
    """Every node runs one 8-GPU pod `run-<node>` of this priority (namespace batch)."""
    api = FakeApi()
    placer = Placer(api, clock=lambda: api.now, extensions=Extensions(Preemption(api)))
    placer.nodes_listed(fabric(nodes, spine_leaves=4))
    running = [
        api.create(
            prio(
                gpu_pod(
                    f"run-{i:02d}", 8, namespace="batch", node_name=f"node-{i:04d}", phase="Running"
                ),
                priority,
            )
        )
        for i in range(nodes)
    ]
    placer.pods_listed(running)
    return api, placer


def group(
    api: FakeApi,
    placer: Placer,
    name: str,
    size: int,
    priority: int,
    *,
    level: str = "leaf",
    locality: str = "required",
    never: bool = False,
    created: str = "",
) -> None:
    for i in range(size):
        pod = gpu_pod(
            f"{name}-{i}", 8, group=name, size=size, level=level, locality=locality, gated=True
        )
        placer.pod_event("ADDED", api.create(prio(pod, priority, never, created)))
    placer.reconcile()


def evicted(api: FakeApi) -> list[str]:
    return [name for name, code in api.evictions if code == 201]


def leave(api: FakeApi, placer: Placer, names: list[str], namespace: str = "batch") -> None:
    """The evicted pods finish: the watch reports them deleted."""
    for name in names:
        obj = api.pods.pop((namespace, name))
        placer.pod_event("DELETED", obj)
    placer.reconcile()


def placement(api: FakeApi, name: str) -> str:
    return str(api.get(name)["metadata"]["annotations"].get("gpufabric.io/placement", ""))


def leaf_of(name: str) -> str:
    """run-NN runs on node-00NN: leaf NN // 4."""
    return f"leaf-{int(name.split('-')[1]) // 4}"

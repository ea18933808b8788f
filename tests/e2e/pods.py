"""Pods as users write them, and what the tier reads back: which are bound where, their ranks and
placements, the Events they were given. Names here are DESIGN.md's (the external contract), spelled
out rather than imported, so a renamed constant cannot hide a changed contract."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes import client

from tests.e2e.waits import wait_until

wait_for = wait_until  # for tests that import only this module

PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: no kubelet runs it
RANK = "gpufabric.io/rank"
PLACEMENT = "gpufabric.io/placement"


def gpu_container(gpus: int, name: str = "main") -> dict[str, Any]:
    return {"name": name, "image": PAUSE, "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}


def group_annotations(group: str, size: int, **more: str) -> dict[str, str]:
    """gpufabric.io/group and group-size, plus `more` (level="leaf" -> gpufabric.io/level...)."""
    out = {"gpufabric.io/group": group, "gpufabric.io/group-size": str(size)}
    out.update({f"gpufabric.io/{k.replace('_', '-')}": v for k, v in more.items()})
    return out


def pod(
    name: str,
    gpus: int,
    annotations: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [gpu_container(gpus)], "terminationGracePeriodSeconds": 0}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": spec,
    }


def create(core: client.CoreV1Api, namespace: str, pods: Iterable[dict[str, Any]]) -> None:
    for body in pods:
        core.create_namespaced_pod(namespace, body)


def delete_all(core: client.CoreV1Api, namespace: str) -> None:
    """Every pod of the namespace force-deleted (as a kubelet confirms), and gone."""
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    wait_until(lambda: not listed(core, namespace), 30, f"pods of {namespace} deleted")


def listed(core: client.CoreV1Api, namespace: str, selector: str = "") -> list[Any]:
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def wait_bound(
    core: client.CoreV1Api,
    namespace: str,
    count: int,
    selector: str = "",
    timeout: float = 60,
    interval: float = 0.2,
) -> list[Any]:
    """Until exactly `count` pods (matching `selector`) exist and every one is bound to a node."""

    def bound() -> list[Any] | None:
        pods = listed(core, namespace, selector)
        if len(pods) == count and all(p.spec.node_name for p in pods):
            return pods
        return None

    def state() -> str:
        pods = listed(core, namespace, selector)
        gated = sum(1 for p in pods if p.spec.scheduling_gates)
        unbound = sum(1 for p in pods if not p.spec.node_name)
        return (
            f"{len(pods)} pods, {unbound} unbound, {gated} gated; events: {events(core, namespace)}"
        )

    try:
        return wait_until(bound, timeout, f"{count} pods bound in {namespace}", interval)
    except AssertionError as err:
        raise AssertionError(f"{err}; {state()}") from None


def events(core: client.CoreV1Api, namespace: str, reason: str | None = None) -> list[str]:
    """`reason: message` of the namespace's Events (optionally one reason), oldest first."""
    found = core.list_namespaced_event(namespace).items
    found.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [f"{e.reason}: {e.message}" for e in found if reason is None or e.reason == reason][-20:]


def node_labels(core: client.CoreV1Api) -> dict[str, dict[str, str]]:
    return {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}


def env_of(pod_obj: Any) -> dict[str, Any]:
    """The first container's env: name -> literal value or `fieldRef:<path>`."""
    out: dict[str, Any] = {}
    for var in pod_obj.spec.containers[0].env or []:
        if var.value_from is not None and var.value_from.field_ref is not None:
            out[var.name] = f"fieldRef:{var.value_from.field_ref.field_path}"
        else:
            out[var.name] = var.value
    return out

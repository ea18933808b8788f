"""Preemption under PodDisruptionBudgets, as installed. A full cluster of Running low-priority
pods, one budget per leaf that keeps one of its two pods: a high-priority group needing a whole
leaf evicts nothing and its waiting Event names the budgets. With one leaf's budget gone, exactly
that leaf's pods are evicted (through the Eviction API) and the group is bound there."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.waits import wait_until

LOW, HIGH = "e2e-low", "e2e-high"


@pytest.fixture
def priorities(cluster_env: Env) -> Iterator[None]:
    sched = client.SchedulingV1Api(cluster_env.admin)
    for name, value in ((LOW, 100), (HIGH, 10000)):
        sched.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    try:
        yield
    finally:
        for name in (LOW, HIGH):
            sched.delete_priority_class(name)


def budget(leaf: str) -> dict[str, object]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"keep-one-{leaf}"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"e2e/leaf": leaf}}},
    }


@pytest.mark.usefixtures("priorities")
def test_preemption_respects_budgets_then_frees_exactly_one_leaf(
    cluster_env: Env, fleet: Fleet, ns: str
) -> None:
    core, policy = cluster_env.core, client.PolicyV1Api(cluster_env.admin)
    layout = fleet.hgx_leaves(leaves=4, per_leaf=2)
    cluster_env.kubelet.run_pods_in(ns)
    low = [
        pods.pod(
            f"low-{node}",
            8,
            labels={"e2e/leaf": leaf, "e2e/role": "low"},
            priority_class=LOW,
        )
        for leaf, nodes in layout.items()
        for node in nodes
    ]
    for body, node in zip(low, [n for nodes in layout.values() for n in nodes], strict=True):
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    pods.create(core, ns, low)
    for leaf in layout:
        policy.create_namespaced_pod_disruption_budget(ns, budget(leaf))
    pods.wait_bound(core, ns, len(low), selector="e2e/role=low")

    def budgets_settled() -> bool:
        found = policy.list_namespaced_pod_disruption_budget(ns).items
        return len(found) == len(layout) and all(
            b.status is not None
            and b.status.current_healthy == 2
            and b.status.disruptions_allowed == 1
            for b in found
        )

    wait_until(budgets_settled, 60, "every leaf's budget: 2 healthy, 1 disruption allowed")

    size = 2  # 2 members of 8 GPUs: a whole leaf
    pods.create(
        core,
        ns,
        (
            pods.pod(f"high-{i}", 8, pods.group_annotations("urgent", size), priority_class=HIGH)
            for i in range(size)
        ),
    )

    def named_budget() -> list[str]:
        return [e for e in pods.events(core, ns) if "keep-one-" in e and "urgent" in e]

    said = wait_until(named_budget, 60, "an Event of group urgent naming a blocking budget")
    time.sleep(3)  # the placer has had its chance to evict something: it must not have
    low_left = pods.listed(core, ns, "e2e/role=low")
    assert len(low_left) == len(low), f"evicted under budgets: {pods.events(core, ns)}"
    assert all(p.metadata.deletion_timestamp is None for p in low_left)
    assert not pods.events(core, ns, "Preempted"), said

    freed = "leaf-2"
    policy.delete_namespaced_pod_disruption_budget(f"keep-one-{freed}", ns)
    bound = pods.wait_bound(core, ns, size, selector="gpufabric.io/group=urgent", timeout=90)
    assert {p.spec.node_name for p in bound} == set(layout[freed])
    assert {p.metadata.annotations[pods.PLACEMENT] for p in bound} == {f"leaf={freed}"}
    survivors = {p.metadata.name for p in pods.listed(core, ns, "e2e/role=low")}
    assert survivors == {
        f"low-{n}" for leaf, nodes in layout.items() if leaf != freed for n in nodes
    }
    preempted = pods.events(core, ns, "Preempted")
    assert len(preempted) == 2, preempted

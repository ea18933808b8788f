"""Preemption that never evicts for nothing (issue 29, DESIGN "Priority"): PodDisruptionBudgets are
counted against the whole plan before the first eviction, the plan is confirmed by dry runs, a
refusal mid-plan stops it and keeps its domain, replacements preempt in their own domain, and
holds are named. The fake API server answers Eviction as kube-apiserver does."""

from __future__ import annotations

from typing import Any

from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.preempt_world import (
    HIGH,
    LOW,
    evicted,
    full,
    group,
    leaf_of,
    leave,
    placement,
    prio,
)
from webhook.groups.extensions.preempt.state import RETRY
from webhook.groups.placer.placer import Placer


def label(api: FakeApi, placer: Placer, name: str, labels: dict[str, str]) -> None:
    """The pod's labels change; the watch tells the placer."""
    api.pods[("batch", name)]["metadata"]["labels"] = labels
    placer.pod_event("MODIFIED", api.get(name, "batch"))


def watched(api: FakeApi, placer: Placer) -> None:
    """The placer's PodDisruptionBudget watch catches up with the API server."""
    placer.budgets_listed([dict(p) for p in api.pdbs.values()])


def guard_last_pod_of_every_leaf(api: FakeApi, placer: Placer) -> None:
    """The issue's set-up: one budget allowing no disruption selects run-03, run-07, ...: the last
    pod of each leaf (minAvailable equal to the pods it selects)."""
    for leaf in range(8):
        label(api, placer, f"run-{4 * leaf + 3:02d}", {"app": "guarded"})
    api.add_pdb("guard", {"app": "guarded"}, 0)
    watched(api, placer)


def waiting_text(placer: Placer, name: str = "train") -> str:
    return placer.waiting[("team-a", name)]


def test_a_budget_on_a_non_first_victim_of_every_leaf_evicts_nothing_and_says_why() -> None:
    api, placer = full()
    guard_last_pod_of_every_leaf(api, placer)
    group(api, placer, "train", 4, HIGH)
    for _ in range(6):  # six more rounds: still nothing
        api.now += RETRY + 1
        placer.retry_all()
        placer.reconcile()
    assert api.evictions == [] and api.dry_runs == []  # the count alone refused every leaf
    text = waiting_text(placer)
    assert "no leaf can be freed without breaking a PodDisruptionBudget" in text
    assert "batch/guard (allowed 0, wanted 1)" in text and "nothing evicted" in text
    waits = [m for pod, r, m in api.events if r == "GroupWaiting" and pod == "train-0"]
    assert waits and "batch/guard (allowed 0, wanted 1)" in waits[0]
    assert all(placement(api, f"train-{i}") == "" for i in range(4))


def test_when_one_leaf_loses_its_guard_exactly_that_leaf_is_freed() -> None:
    api, placer = full()
    guard_last_pod_of_every_leaf(api, placer)
    group(api, placer, "train", 4, HIGH)
    assert api.evictions == []
    label(api, placer, "run-23", {"app": "free"})  # leaf-5's guarded pod leaves the budget
    placer.reconcile()
    victims = evicted(api)
    assert sorted(victims) == ["run-20", "run-21", "run-22", "run-23"]
    assert sorted(n for n, _ in api.dry_runs) == sorted(victims)  # confirmed first, all of them
    leave(api, placer, victims)
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-5"}
    assert len(evicted(api)) == 4  # none elsewhere


def test_one_budget_shared_by_two_victims_is_counted_once_per_victim() -> None:
    api, placer = full(nodes=8)  # two leaves
    for name in ("run-00", "run-01"):  # leaf-0: two victims under one budget allowing one
        label(api, placer, name, {"app": "web"})
    api.add_pdb("web", {"app": "web"}, 1)
    for name in ("run-04", "run-05"):  # leaf-1: two budgets, one victim each, allowing one each
        label(api, placer, name, {"app": name})
        api.add_pdb(name, {"app": name}, 1)
    watched(api, placer)
    group(api, placer, "train", 4, HIGH)
    # A dry run of each of leaf-0's victims alone would pass; the count does not.
    assert {leaf_of(v) for v in evicted(api)} == {"leaf-1"} and len(evicted(api)) == 4
    assert all(leaf_of(n) == "leaf-1" for n, _ in api.dry_runs)


def test_a_pod_two_budgets_select_is_no_victim() -> None:
    api, placer = full(nodes=8)
    label(api, placer, "run-01", {"app": "web", "tier": "front"})
    api.add_pdb("web", {"app": "web"}, 5)
    api.add_pdb("front", {"tier": "front"}, 5)
    watched(api, placer)
    group(api, placer, "train", 4, HIGH)
    assert {leaf_of(v) for v in evicted(api)} == {"leaf-1"}
    assert not any(code == 500 for _, code in api.dry_runs + api.evictions)


def test_a_dry_run_that_refuses_while_the_watch_said_allowed_evicts_nothing_there() -> None:
    api, placer = full(nodes=8)
    label(api, placer, "run-02", {"app": "db"})
    api.add_pdb("db", {"app": "db"}, 1)
    watched(api, placer)
    api.pdbs["db"]["status"]["disruptionsAllowed"] = 0  # changed; the watch has not said so
    group(api, placer, "train", 4, HIGH)
    assert ("run-02", 429) in api.dry_runs
    assert {leaf_of(v) for v in evicted(api)} == {"leaf-1"}  # leaf-0 lost no pod


def test_a_refusal_mid_plan_stops_at_once_and_the_next_plan_finishes_that_leaf() -> None:
    api, placer = full()
    label(api, placer, "run-02", {"app": "db"})
    api.add_pdb("db", {"app": "db"}, 1)
    watched(api, placer)
    real = api.eviction

    def race(namespace: str, name: str, dry_run: bool = False) -> tuple[int, dict[str, Any]]:
        if name == "run-01" and not dry_run:  # another client spends the budget between
            api.pdbs["db"]["status"]["disruptionsAllowed"] = 0
        return real(namespace, name, dry_run)

    api.eviction = race  # type: ignore[method-assign]
    group(api, placer, "train", 4, HIGH)
    assert api.evictions == [("run-00", 201), ("run-01", 201), ("run-02", 429)]
    blocked = [m for _, r, m in api.events if r == "GroupPreemptionBlocked"]
    assert blocked and "2 pods already evicted in leaf leaf-0 stay held" in blocked[0]
    leave(api, placer, ["run-00", "run-01"])  # they go; the group still does not fit
    for _ in range(3):
        placer.retry_all()
        placer.reconcile()
    assert len(evicted(api)) == 2  # no other leaf was opened while the refusal stands
    assert "stopped by the API server" in waiting_text(placer)
    api.pdbs["db"]["status"]["disruptionsAllowed"] = 1  # the budget allows again
    placer.budget_event("MODIFIED", dict(api.pdbs["db"]))  # the watch says so: no 10 s wait
    placer.reconcile()
    assert sorted(evicted(api)) == ["run-00", "run-01", "run-02", "run-03"]
    leave(api, placer, ["run-02", "run-03"])
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-0"}


def test_a_replacement_member_preempts_inside_its_groups_leaf_only() -> None:
    api, placer = full()
    group(api, placer, "train", 4, HIGH)
    first = evicted(api)
    leaf = leaf_of(first[0])
    leave(api, placer, first)
    assert {placement(api, f"train-{i}") for i in range(4)} == {f"leaf={leaf}"}
    for i in range(4):  # the scheduler binds them where their GPUs were promised
        pod = api.pods[("team-a", f"train-{i}")]
        pod["spec"]["nodeName"] = f"node-{int(first[i].split('-')[1]):04d}"
        pod["status"] = {"phase": "Running"}
        placer.pod_event("MODIFIED", api.get(f"train-{i}"))
    lost = api.pods.pop(("team-a", "train-2"))  # its node failed; the pod is deleted
    node = lost["spec"]["nodeName"]
    placer.pod_event("DELETED", lost)
    squatter = prio(gpu_pod("squat", 8, namespace="batch", node_name=node, phase="Running"), LOW)
    placer.pod_event("ADDED", api.create(squatter))  # a low pod takes the freed node
    back = gpu_pod("train-2", 8, group="train", size=4, level="leaf", gated=True)
    placer.pod_event("ADDED", api.create(prio(back, HIGH)))  # its controller recreates it
    placer.reconcile()
    assert evicted(api)[4:] == ["squat"]  # the one pod in its leaf; no other leaf touched
    leave(api, placer, ["squat"])
    assert placement(api, "train-2") == f"leaf={leaf}"


def test_a_group_kept_out_of_a_held_leaf_names_the_group_holding_it() -> None:
    api, placer = full(nodes=8, priority=2 * HIGH)
    for name in ("run-00", "run-01", "run-02", "run-03"):  # leaf-0 may be freed for HIGH
        api.pods[("batch", name)]["spec"]["priority"] = LOW
        placer.pod_event("MODIFIED", api.get(name, "batch"))
    group(api, placer, "train", 4, HIGH)
    leave(api, placer, evicted(api)[:2])  # half of leaf-0 free, held for train
    group(api, placer, "notebook", 2, 500, level="leaf")
    text = waiting_text(placer, "notebook")
    assert "held for other groups: leaf leaf-0 for team-a/train (priority 1000000)" in text


def test_a_dry_run_that_refuses_the_last_victim_of_a_plan_evicts_none_of_it() -> None:
    api, placer = full(nodes=8)
    label(api, placer, "run-03", {"app": "db"})  # the last victim of leaf-0's plan
    api.add_pdb("db", {"app": "db"}, 1)
    watched(api, placer)
    api.pdbs["db"]["status"]["disruptionsAllowed"] = 0  # changed; the watch has not said so
    group(api, placer, "train", 4, HIGH)
    assert [n for n, _ in api.dry_runs[:4]] == ["run-00", "run-01", "run-02", "run-03"]
    assert api.dry_runs[3] == ("run-03", 429)
    assert {leaf_of(v) for v in evicted(api)} == {"leaf-1"}  # leaf-0 lost no pod

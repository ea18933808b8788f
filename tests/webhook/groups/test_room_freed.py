"""Which pod events make the waiting groups decided again (inputs.pod_event): those that free room
on some node (a pod bound off the node kept for it, deleted, finished; kube-scheduler's nomination
moved) or change what a node reads as; not a bind where its room was kept, a burst's usual event,
which at scale was every waiting group decided again at each bind."""

from __future__ import annotations

import copy
from typing import Any

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.placer.placer import Placer

A, W, X = ("team-a", "a"), ("team-a", "w"), ("team-a", "x")


def placed_and_waiting() -> tuple[FakeApi, Placer]:
    """8 nodes in 2 leaves of 4; group a (2 nodes) placed and ungated, group w (8 nodes: every
    node) waiting for room, group x waiting for its third member."""
    api = FakeApi()
    placer = Placer(api)
    placer.nodes_listed(fabric(8))
    placer.pods_listed([])
    for i in range(2):
        placer.pod_event("ADDED", api.create(gpu_pod(f"a-{i}", group="a", size=2, gated=True)))
    placer.reconcile()
    for i in range(8):
        placer.pod_event("ADDED", api.create(gpu_pod(f"w-{i}", group="w", size=8, gated=True)))
    for i in range(2):
        placer.pod_event("ADDED", api.create(gpu_pod(f"x-{i}", group="x", size=3, gated=True)))
    placer.reconcile()
    assert W in placer.waiting and X in placer.waiting and A not in placer.waiting
    for i in range(2):  # the answers of a's patches
        placer.pod_event("MODIFIED", api.get(f"a-{i}"))
    placer.reconcile()
    placer.dirty = set()
    return api, placer


def kept(placer: Placer, name: str) -> str:
    return placer.view.promised[f"uid-team-a-{name}"][0]


def lowest(placer: Placer, node: str) -> tuple[Any, str]:
    found = placer.view.lowest(node)
    assert found is not None
    return found


def event(api: FakeApi, placer: Placer, name: str, **changes: Any) -> set[tuple[str, str]]:
    """The pod changed as the API would report it; the groups then to be decided again."""
    pod = api.pods[("team-a", name)]
    for field, value in changes.items():
        if field == "node":
            pod["spec"]["nodeName"] = value
            pod["status"] = {"phase": "Running"}
        elif field == "nominated":
            pod.setdefault("status", {})["nominatedNodeName"] = value
        elif field == "phase":
            pod.setdefault("status", {})["phase"] = value
    placer.dirty = set()
    placer.pod_event("MODIFIED", copy.deepcopy(pod))
    return set(placer.dirty)


def deleted(api: FakeApi, placer: Placer, name: str) -> set[tuple[str, str]]:
    placer.dirty = set()
    placer.pod_event("DELETED", api.pods.pop(("team-a", name)))
    return set(placer.dirty)


def test_a_bind_where_its_room_was_kept_leaves_the_waiting_groups_alone() -> None:
    api, placer = placed_and_waiting()
    for i in range(2):
        assert event(api, placer, f"a-{i}", node=kept(placer, f"a-{i}")) == {A}
    placer.dirty = set()
    placer.pod_event("ADDED", api.create(gpu_pod("plain", node_name="node-0007")))
    assert placer.dirty == set()  # a pod that takes room lets no one in


def test_a_bind_off_its_kept_node_frees_that_node_for_the_waiting_groups() -> None:
    api, placer = placed_and_waiting()
    was = kept(placer, "a-0")
    free = next(n for n in placer.view.domain_nodes(*lowest(placer, was)) if placer.view.free(n))
    assert event(api, placer, "a-0", node=free) == {W, X}  # every group with a gated member
    assert placer.view.free(was) == 8


def test_a_pod_deleted_or_finished_frees_its_node() -> None:
    api, placer = placed_and_waiting()
    event(api, placer, "a-0", node=kept(placer, "a-0"))
    event(api, placer, "a-1", node=kept(placer, "a-1"))
    assert event(api, placer, "a-0", phase="Succeeded") == {W, X}  # every group with a gated member
    assert deleted(api, placer, "a-1") == {W, X}  # a is gone with it


def test_a_moved_nomination_frees_the_node_kept_before() -> None:
    api, placer = placed_and_waiting()
    was = kept(placer, "a-0")
    other = next(n for n in placer.view.domain_nodes(*lowest(placer, was)) if placer.view.free(n))
    assert event(api, placer, "a-0", nominated=other) == {W, X}  # every group with a gated member
    assert event(api, placer, "a-0", nominated=other) == {A}  # the same again: nothing moved


def test_a_gated_member_deleted_retries_its_own_group_and_the_last_one_everyone() -> None:
    api, placer = placed_and_waiting()
    assert deleted(api, placer, "x-0") == {X}  # it held no room
    assert deleted(api, placer, "x-1") == {W}  # x is gone: what it held is let go


def test_the_waiting_group_is_placed_once_the_room_is_freed() -> None:
    api, placer = placed_and_waiting()
    for i in range(2):
        event(api, placer, f"a-{i}", node=kept(placer, f"a-{i}"))
    placer.reconcile()
    assert W in placer.waiting
    deleted(api, placer, "a-0")
    placer.reconcile()
    assert W in placer.waiting  # 7 of 8 nodes free
    deleted(api, placer, "a-1")
    placer.reconcile()
    assert W not in placer.waiting
    assert all(not api.get(f"w-{i}")["spec"].get("schedulingGates") for i in range(8))

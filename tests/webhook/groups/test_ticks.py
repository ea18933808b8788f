"""The extensions' ticks look at the groups whose pods changed and those whose bound came, not at
every group they follow: at 65,536 nodes a tick over 8,192 groups of 8 took ~200 ms (every 10 s),
and one over 4,096 groups ungated and not yet bound ~100 ms every 0.5 s (docs/benchmarks.md,
"Seventh pass"). What each still does: a partly-bound group is told when its bound comes with no
event since, a group a previous leader ungated is followed from the Pod list, a group a list
leaves out is forgotten, and a PodGroup lost while nothing else changed is made again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhook.groups.burst_world import GangApi, admitted, member
from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.test_gang import Recorded, arrive, bind, native_placer, watched
from webhook.groups.extensions.gang import place as gang_place
from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.partly import bound as partly_bound
from webhook.groups.extensions.partly.bound import PartlyBound
from webhook.groups.framework.binding import binding
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer


def told(api: GangApi) -> list[str]:
    return [name for name, reason, _ in api.events if reason == "GroupPartlyBound"]


def test_a_partly_bound_group_is_told_when_its_bound_comes_with_no_event_since() -> None:
    api, placer, _ = watched(job=False)  # bare pods: told, not deleted
    for i in range(3):
        bind(api, placer, f"g-{i}", f"node-000{i}")
    placer.reconcile()
    api.now = 59.0
    placer.reconcile()
    assert told(api) == []
    api.now = 60.0
    placer.reconcile()
    assert told(api) == ["g-3"]


def listed_placer(pods: list[dict[str, Any]]) -> tuple[GangApi, Placer, Recorded]:
    """A placer that starts (a new leader) with `pods` already there."""
    api, metrics = GangApi(), Recorded()
    ext = Extensions(gang=NativeGang(api), partly=PartlyBound(api, metrics))
    placer = Placer(api, clock=lambda: api.now, extensions=ext)
    placer.nodes_listed(fabric(16))
    placer.pods_listed([api.create(p) for p in pods])
    return api, placer, metrics


def ungated_member(i: int, node: str) -> dict[str, Any]:
    """A member a previous leader ungated (its gate gone, its placement written)."""
    pod = admitted(member("g", i, 4, level="leaf", job=False), native=False)
    pod["spec"].pop("schedulingGates", None)
    pod["metadata"]["annotations"]["gpufabric.io/placement"] = "leaf=leaf-0"
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


def test_a_group_a_previous_leader_ungated_is_followed_from_the_pod_list() -> None:
    pods = [ungated_member(i, f"node-000{i}" if i < 3 else "") for i in range(4)]
    api, placer, metrics = listed_placer(pods)
    placer.reconcile()
    api.now = 60.0
    placer.reconcile()
    assert told(api) == ["g-3"] and metrics.gauge == [1]


def test_a_group_a_pod_list_leaves_out_is_forgotten() -> None:
    pods = [ungated_member(i, f"node-000{i}" if i < 3 else "") for i in range(4)]
    api, placer, _ = listed_placer(pods)
    placer.reconcile()
    partly = placer.ext.partly
    assert ("burst", "g") in partly.since
    placer.pods_listed([])  # its pods were deleted while the watch was down
    placer.reconcile()
    assert ("burst", "g") not in partly.since
    api.now = 60.0
    placer.reconcile()
    assert told(api) == []


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many groups the ticks judge (each extension's call of `binding`)."""
    seen = [0]

    def counted(recs: Any) -> Any:
        seen[0] += 1
        return binding(recs)

    monkeypatch.setattr(partly_bound, "binding", counted)
    monkeypatch.setattr(gang_place, "binding", counted)
    return seen


def test_a_tick_where_nothing_changed_looks_at_no_group(looks: list[int]) -> None:
    """40 groups placed whole and 40 ungated not yet bound (kube-scheduler slow): after the
    first tick, ticks with no pod event judge none of them; an event, only its group."""
    pods = []
    for g in range(80):
        for i in range(2):
            pod = gpu_pod(f"g{g}-{i}", 8, namespace="burst", group=f"g{g}", size=2)
            pod["spec"].pop("schedulingGates", None)
            pod["metadata"]["annotations"]["gpufabric.io/placement"] = "leaf=leaf-0"
            if g < 40:
                pod["spec"]["nodeName"] = f"node-{2 * g + i:04d}"
                pod["status"] = {"phase": "Running"}
            pods.append(pod)
    api, placer, _ = listed_placer(pods)
    placer.reconcile()
    assert looks[0] >= 80  # the first tick after the list: every group once
    looks[0] = 0
    for t in (1.0, 10.0, 30.0):
        api.now = t
        placer.reconcile()
    assert looks[0] == 0
    unbound = api.pods[("burst", "g40-0")]
    unbound["spec"]["nodeName"] = "node-0100"
    placer.pod_event("MODIFIED", unbound)
    placer.reconcile()
    assert 1 <= looks[0] <= 2  # its group, once in each extension that follows it


def test_a_podgroup_lost_while_nothing_else_changed_is_made_again() -> None:
    api, placer = native_placer()
    gang = placer.ext.gang
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    (made,) = api.podgroups.values()
    placer.reconcile()  # its members' patches seen: nothing else changes from here
    placer.reconcile()
    del api.podgroups[("burst", "gpufabric-g")]
    gang.book.event("DELETED", made)
    placer.reconcile()
    (again,) = api.podgroups.values()
    assert again["metadata"]["uid"] != made["metadata"]["uid"]


def test_a_group_not_a_gang_is_followed_by_the_partly_bound_watch_alone() -> None:
    """Its members name no PodGroup: the gang extension has nothing to keep for it."""
    _, placer, _ = listed_placer([ungated_member(i, "") for i in range(4)])
    placer.reconcile()
    assert placer.ext.gang.ungated == set()
    assert ("burst", "g") in placer.ext.partly.since


def test_a_podgroup_is_swept_only_after_a_list_or_where_its_group_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every PodGroup is looked at once after a Pod list (a group the list left out is gone:
    its PodGroup deleted), then only those whose group changed."""
    api, placer = native_placer()
    gang = placer.ext.gang
    for g in ("a", "b"):
        for i in range(2):
            arrive(api, placer, admitted(member(g, i, 2), native=True))
    assert len(api.podgroups) == 2
    full = [0]
    ours = gang.book.ours

    def counted() -> Any:
        full[0] += 1
        return ours()

    monkeypatch.setattr(gang.book, "ours", counted)
    for _ in range(3):
        placer.reconcile()
    assert full[0] == 0
    kept = [p for p in api.pods.values() if p["metadata"]["name"].startswith("a-")]
    placer.pods_listed(kept)  # b's pods were deleted while the watch was down
    placer.reconcile()
    assert full[0] == 1
    assert [k[1] for k in api.podgroups] == ["gpufabric-a"]

"""The placer's index of groups with gated members (inputs.set_pod): what `retry_all` marks to
decide again, kept as records change instead of found by a pass over every group at each bind
(23 ms a pod event at 8,192 groups of 8)."""

from __future__ import annotations

from typing import Any

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.framework.refusals import Rejected
from webhook.groups.model.names import GroupKey
from webhook.groups.placer.placer import Placer


def pod(group: str, i: int, size: int) -> dict[str, Any]:
    return gpu_pod(f"{group}-{i}", 8, group=group, size=size, gated=True)


def by_pass(placer: Placer) -> set[GroupKey]:
    """The groups with a gated member, found the slow way."""
    return {
        k
        for k, uids in placer.groups.items()
        if any((r := placer.pods.get(u)) is not None and r.gated and r.member for u in uids)
    }


def retried(placer: Placer) -> set[GroupKey]:
    placer.dirty = set()
    placer.retry_all()
    return set(placer.dirty)


class Refusing(FakeApi):
    def __init__(self) -> None:
        super().__init__()
        self.refuse: set[str] = set()

    def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        if name in self.refuse:
            raise Rejected("pods/patch", f"patch of pod {namespace}/{name}", 422, "denied", name)
        super().patch_pod(namespace, name, ops)


def test_the_groups_retried_are_those_with_a_gated_member_through_every_change() -> None:
    api = Refusing()
    placer = Placer(api)
    placer.nodes_listed(fabric(8))
    placer.pods_listed([])
    a, b, c = ("team-a", "a"), ("team-a", "b"), ("team-a", "c")
    steps: list[set[GroupKey]] = []

    def step() -> None:
        assert retried(placer) == by_pass(placer)
        steps.append(retried(placer))

    for i in range(2):
        placer.pod_event("ADDED", api.create(pod("a", i, 2)))
    placer.pod_event("ADDED", api.create(pod("b", 0, 2)))  # b waits for its second member
    step()  # a and b gated
    placer.reconcile()
    step()  # a ungated by its patches; b still waits
    api.refuse = {"c-1"}
    for i in range(2):
        placer.pod_event("ADDED", api.create(pod("c", i, 2)))
    placer.reconcile()
    step()  # c: its refused patch puts that member back gated (c-0 stays ungated)
    placer.pod_event("DELETED", api.pods.pop(("team-a", "b-0")))
    step()  # b gone
    placer.pods_listed(list(api.pods.values()))
    step()  # a relist: from the listed pods
    assert steps == [{a, b}, {b}, {b, c}, {c}, {c}]

"""The placer's extension points (framework/points.py): the runner calls each point over the
extensions that implement it, in the list's order; the first "wait" wins; Unreserve runs in the
reverse order when a member's patch is refused; every check that can make a group wait runs
before the first object is made (a ComputeDomain is not made for a group its PodGroup holds)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from tests.nvl72 import racks_under_leaves
from tests.webhook.groups.burst_world import GangApi
from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.imex_world import FakeDomains, arrive, member, settle
from webhook.groups.decision.decision import Member, Request, Waiting
from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.framework.points import Cycle, Points, Undo
from webhook.groups.model.records import PodRecord, pod_record
from webhook.groups.model.selector import selector_of
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer


class Told:
    """What a run of the points told the probes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []


class Probe:
    """An extension of every point that answers as it is told to and records each call."""

    def __init__(self, name: str, told: Told, wait_at: str = "") -> None:
        self.name, self.told, self.wait_at = name, told, wait_at

    def _say(self, point: str) -> str:
        self.told.calls.append((self.name, point))
        return f"{self.name} says wait" if point == self.wait_at else ""

    def adjust(self, cycle: Cycle, request: Request) -> Request | str:
        return self._say("adjust") or replace(request, name=f"{request.name}+{self.name}")

    def hide(self, cycle: Cycle) -> Undo:
        self._say("hide")

        def undo() -> None:
            self._say("unhide")

        return undo

    def nothing_fits(self, cycle: Cycle, request: Request, decided: Waiting) -> str:
        self._say("nothing_fits")
        return f"; {self.name}"

    def permit(self, cycle: Cycle) -> str:
        return self._say("permit")

    def prebind(self, cycle: Cycle) -> str:
        return self._say("prebind")

    def reserve(self, rec: PodRecord, node: str) -> None:
        self._say(f"reserve {rec.name} {node} gated={rec.gated}")

    def unreserve(self, rec: PodRecord) -> None:
        self._say(f"unreserve {rec.name} gated={rec.gated}")

    def fits(self, rec: PodRecord, node: str) -> bool:
        self._say("fits")
        return node != self.wait_at


class TickOnly:
    """An extension of one point: no other point calls it."""

    def __init__(self, told: Told) -> None:
        self.told = told

    def tick(self) -> None:
        self.told.calls.append(("tick-only", "tick"))


def cycle() -> Cycle:
    rec = pod_record(gpu_pod("w-0", 8, group="g", size=1, gated=True), 0.0)
    return Cycle(("team-a", "g"), (rec,), (rec,), 1, None, Writes())


@dataclass
class Writes:
    added: list[object] = field(default_factory=list)

    def add(self, call: Any, done: Any) -> None:
        self.added.append(call)


def request() -> Request:
    sel = selector_of({})
    return Request("g", (Member("team-a/w-0", 8, sel),))


def test_each_point_runs_over_its_extensions_in_the_lists_order() -> None:
    told = Told()
    points = Points([Probe("a", told), TickOnly(told), Probe("b", told)])
    c = cycle()
    adjusted = points.adjust(c, request())
    assert isinstance(adjusted, Request) and adjusted.name == "g+a+b"  # each on the last's
    undo = points.hide(c)
    assert points.nothing_fits(c, request(), Waiting(None, "no room")) == "; a; b"
    undo()
    points.tick()
    assert told.calls == [
        ("a", "adjust"),
        ("b", "adjust"),
        ("a", "hide"),
        ("b", "hide"),
        ("a", "nothing_fits"),
        ("b", "nothing_fits"),
        ("b", "unhide"),  # put back in the reverse order
        ("a", "unhide"),
        ("tick-only", "tick"),  # only the tick point calls it
    ]


@pytest.mark.parametrize("point", ["adjust", "permit", "prebind"])
def test_the_first_wait_wins_and_the_rest_are_not_asked(point: str) -> None:
    told = Told()
    points = Points([Probe("a", told), Probe("b", told, wait_at=point), Probe("c", told)])
    answer = {
        "adjust": lambda: points.adjust(cycle(), request()),
        "permit": lambda: points.permit(cycle()),
        "prebind": lambda: points.prebind(cycle()),
    }[point]()
    assert answer == "b says wait"
    assert told.calls == [("a", point), ("b", point)]  # c never asked
    told = Told()
    points = Points([Probe("a", told), Probe("b", told)])
    assert points.permit(cycle()) == "" and points.prebind(cycle()) == ()  # none: patches go


def test_a_node_fits_only_where_every_extension_lets_it() -> None:
    told = Told()
    points = Points([Probe("a", told), Probe("b", told, wait_at="node-1")])
    rec = cycle().recs[0]
    assert points.fits(rec, "node-0") and not points.fits(rec, "node-1")


@dataclass(frozen=True, slots=True)
class Probed(Extensions):
    """The shipped list with two probes after it, as a new extension is added."""

    first: Probe = field(default_factory=lambda: Probe("first", Told()))
    second: Probe = field(default_factory=lambda: Probe("second", Told()))


def test_a_refused_patch_unreserves_each_member_in_the_reverse_order() -> None:
    told = Told()
    api = FakeApi()
    api.admission = lambda old, new: ["no placements today"]  # every placement patch refused
    ext = Probed(first=Probe("first", told), second=Probe("second", told))
    placer = Placer(api, extensions=ext)
    placer.nodes_listed(fabric(8))
    placer.pods_listed([])
    for i in range(2):
        placer.pod_event("ADDED", api.create(gpu_pod(f"w-{i}", 8, group="g", size=2, gated=True)))
    placer.reconcile()
    assert api.patches == [] and len(api.refusals) == 2
    seats = [c for c in told.calls if c[1].startswith(("reserve", "unreserve"))]
    reserved = [c for c in seats if c[1].startswith("reserve")]
    assert [c[0] for c in reserved] == ["first", "second", "first", "second"]
    assert all("gated=False" in c[1] for c in reserved)  # counted as placed, on its node
    assert seats[4:] == [  # then each refusal undoes both, the last extension first
        ("second", "unreserve w-0 gated=True"),
        ("first", "unreserve w-0 gated=True"),
        ("second", "unreserve w-1 gated=True"),
        ("first", "unreserve w-1 gated=True"),
    ]
    assert all(r.gated and not r.placement for r in placer.pods.values())
    assert placer.view.promised == {}  # the core's own promise undone too


def test_no_compute_domain_is_made_while_the_groups_podgroup_can_still_make_it_wait() -> None:
    api = GangApi()
    domains = FakeDomains(api)
    imex = ImexChannels(domains)
    imex.book.listed([])
    imex.templates.listed([])
    domains.templates = imex.templates
    gang = NativeGang(api)  # whether PodGroups are served: not listed yet
    placer = Placer(api, extensions=Extensions(imex=imex, gang=gang))
    domains.changed = placer.retry_all  # the template watch
    placer.nodes_listed(racks_under_leaves(4))
    placer.pods_listed([])
    pods = [member(i, 4) for i in range(4)]
    for pod in pods:
        pod["spec"]["schedulingGroup"] = {"podGroupName": "gpufabric-moe"}
    arrive(api, placer, pods)
    assert "waiting for the first list of podgroups" in placer.waiting[("team-a", "moe")]
    assert domains.objects == {} and api.patches == []  # checked before anything was made
    gang.book.set_served("v1alpha2")
    placer.retry_all()
    settle(placer)  # the ComputeDomain asked for, then its template's event tries it again
    assert list(domains.objects) == [("team-a", "moe")] and len(api.podgroups) == 1
    assert len(api.patches) == 4  # then made, and the gates lifted

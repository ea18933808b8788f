from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.groups.fabric import fabric, node
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import candidates, decide
from webhook.groups.decision.decision import Member, Placed, Request, Waiting
from webhook.groups.decision.fit import GroupFit
from webhook.groups.model.names import LEVELS, level_key
from webhook.groups.model.selector import selector_of

ANY = selector_of({})


def view_of(nodes: list[dict[str, Any]], used: dict[str, int] | None = None) -> CapacityView:
    v = CapacityView()
    v.replace_nodes(nodes)
    for i, (name, gpus) in enumerate(sorted((used or {}).items())):
        v.put_pod(f"busy-{i}", name, gpus, active=True)
    return v


def members(n: int, gpus: int = 8, selector: Any = ANY) -> tuple[Member, ...]:
    return tuple(Member(f"team-a/w-{i:02d}", gpus, selector) for i in range(n))


def test_rule_of_the_issue_sizes_map_to_levels() -> None:
    # 64 empty nodes of 8 GPUs, leaves of 4 nodes: 2 nodes -> leaf, 4 -> leaf (complete),
    # 8 -> leaf-pair, 16 -> leaf-quad, 32 -> spine.
    v = view_of(fabric(64))
    for n, level in ((2, "leaf"), (4, "leaf"), (8, "leaf-pair"), (16, "leaf-quad"), (32, "spine")):
        d = decide(v, Request("g", members(n)))
        assert isinstance(d, Placed), d
        assert d.level == level and len(d.domains) == 1
        assert len({a.node for a in d.assignments}) == n


def test_tightest_fit_keeps_the_empty_leaf_whole() -> None:
    # leaf-0 has 1 node busy (24 free), leaf-1 empty (32 free): a 2-node job goes to leaf-0.
    v = view_of(fabric(8), {"node-0000": 8})
    d = decide(v, Request("g", members(2)))
    assert isinstance(d, Placed) and d.domains == ("leaf-0",)
    first = decide(view_of(fabric(8), {"node-0004": 8}), Request("g", members(2)), policy="first")
    assert isinstance(first, Placed) and first.domains == ("leaf-0",)
    tight = decide(view_of(fabric(8), {"node-0004": 8}), Request("g", members(2)))
    assert isinstance(tight, Placed) and tight.domains == ("leaf-1",)


def test_required_waits_with_the_best_domain_named() -> None:
    # Every leaf-pair has 2 busy nodes except pair-1, which has 1: best is pair-1 with 56.
    used = {f"node-{i:04d}": 8 for i in (0, 1, 9, 16, 17, 24, 25)}
    d = decide(view_of(fabric(32), used), Request("g", members(8)))
    assert isinstance(d, Waiting)
    assert d.message == "no leaf-pair has 64 free GPUs for 8 pods; best: pair-1 with 56"


def test_preferred_goes_up_then_spreads_over_fewest_spines() -> None:
    used = {f"node-{i:04d}": 8 for i in (0, 1, 9, 16, 17, 24, 25)}
    d = decide(view_of(fabric(32), used), Request("g", members(8), locality="preferred"))
    assert isinstance(d, Placed) and d.level == "leaf-quad" and d.domains == ("quad-1",)
    # Three spines of 16 nodes, with 9, 8 and 10 free nodes: 12 pods need two of them; the
    # largest (spine-2) is taken first, then the tightest that holds the remaining 2 (spine-1).
    nodes = fabric(48, spine_leaves=4)
    busy = {f"node-{i:04d}": 8 for i in (*range(7), *range(16, 24), *range(32, 38))}
    d = decide(view_of(nodes, busy), Request("g", members(12), locality="preferred"))
    assert isinstance(d, Placed) and d.level == "spine"
    assert d.domains == ("spine-2", "spine-1")
    assert isinstance(decide(view_of(nodes, busy), Request("g", members(12))), Waiting)


def test_members_own_affinity_is_respected() -> None:
    nodes = [node(i, extra={"zone": "a" if i < 4 else "b"}) for i in range(8)]
    only_b = selector_of(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "NotIn", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                }
            }
        }
    )
    d = decide(view_of(nodes, {"node-0005": 8}), Request("g", members(2, selector=only_b)))
    assert isinstance(d, Placed) and d.domains == ("leaf-1",)
    assert {a.node for a in d.assignments} <= {"node-0004", "node-0006", "node-0007"}


def test_unusable_nodes_leave_the_view() -> None:
    nodes = fabric(8)
    nodes[4] = node(4, ready=False)
    nodes[5] = node(5, unschedulable=True)
    nodes[6] = node(6, extra={"gpufabric.io/fabric-health": "degraded"})
    v = view_of(nodes, {"node-0000": 8, "node-0001": 8, "node-0002": 8})
    d = decide(v, Request("g", members(2)))
    assert isinstance(d, Waiting)
    assert d.message == "no leaf has 16 free GPUs for 2 pods; best: leaf-0 with 8"


def test_no_network_labels() -> None:
    plain = [{**n, "metadata": {**n["metadata"], "labels": {}}} for n in fabric(4)]
    assert isinstance(decide(view_of(plain), Request("g", members(2))), Waiting)
    d = decide(view_of(plain), Request("g", members(2), locality="preferred"))
    assert isinstance(d, Placed) and d.level is None


def test_candidates_explain_each_domain() -> None:
    v = view_of(fabric(8), {"node-0000": 8, "node-0001": 8, "node-0002": 8})
    got = [(c.domain, c.free, c.fits) for c in candidates(v, members(2), "leaf")]
    assert got == [("leaf-0", 8, False), ("leaf-1", 32, True)]


# -- properties --------------------------------------------------------------------------------

ZONES = ("a", "b")


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[CapacityView, list[Request]]:
    n = draw(st.integers(4, 40))
    zones = draw(st.lists(st.sampled_from(ZONES), min_size=n, max_size=n))
    gpus = draw(st.lists(st.sampled_from((4, 8)), min_size=n, max_size=n))
    nodes = [node(i, gpus=gpus[i], spine_leaves=4, extra={"zone": zones[i]}) for i in range(n)]
    used = {
        f"node-{i:04d}": draw(st.integers(0, gpus[i]))
        for i in draw(st.lists(st.integers(0, n - 1), max_size=n, unique=True))
    }
    v = view_of(nodes, used)
    reqs = []
    for g in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 10))
        per = draw(st.sampled_from((1, 2, 4, 8)))
        zone = draw(st.sampled_from((None, *ZONES)))
        sel = ANY
        if zone:
            expr = {
                "key": "zone",
                "operator": draw(st.sampled_from(("In", "NotIn"))),
                "values": [zone],
            }
            sel = selector_of(
                {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
                            }
                        }
                    }
                }
            )
        reqs.append(
            Request(
                f"g{g}",
                tuple(Member(f"g{g}/p{i}", per, sel) for i in range(size)),
                locality=draw(st.sampled_from(("required", "preferred"))),
                level=draw(st.sampled_from(("auto", *LEVELS))),
            )
        )
    return v, reqs


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_properties_of_every_decision(case: tuple[CapacityView, list[Request]]) -> None:
    v, reqs = case
    for req in reqs:
        before = {n: v.free(n) for n in v.nodes}
        d = decide(v, req)
        if isinstance(d, Waiting):
            continue
        by_key = {m.key: m for m in req.members}
        assert sorted(a.member for a in d.assignments) == sorted(by_key)
        load: dict[str, int] = {}
        for a in d.assignments:
            m = by_key[a.member]
            info = v.nodes[a.node]
            # The chosen node is in the chosen domain and admits the member.
            assert a.level is not None and info.labels[level_key(a.level)] == a.domain
            assert info.usable and m.selector.admits(info.name, info.labels, info.taints)
            load[a.node] = load.get(a.node, 0) + m.gpus
        # Never more than the free GPUs (which already exclude earlier groups' promises).
        assert all(load[n] <= before[n] for n in load)
        if req.locality == "required":
            assert len(d.domains) == 1  # required never spans domains
        elif len(d.domains) > 1:
            # Preferred spreads only at the top level and over the fewest domains: no smaller set
            # of top domains has enough usable free GPUs (members are identical here).
            top = v.levels()[-1]
            assert d.level == top
            per = req.members[0].gpus
            ok = v.eligible(req.members[0].selector)
            slots = sorted(
                (sum(v.free(x) // per for x in nodes if x in ok) for _, nodes in v.index()[top]),
                reverse=True,
            )
            fewest = next(k for k in range(1, len(slots) + 1) if sum(slots[:k]) >= len(req.members))
            assert len(d.domains) == fewest
        for a in d.assignments:
            v.promise(f"{req.name}/{a.member}", a.node, by_key[a.member].gpus)
        # Two groups are never promised the same GPUs.
        assert all(v.free(n) >= 0 and v._taken.get(n, 0) <= v.nodes[n].gpus for n in v.nodes)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_the_domain_chosen_is_the_tightest_that_holds_every_member(
    case: tuple[CapacityView, list[Request]],
) -> None:
    """GroupFit.best judges a domain only where it would beat the one found so far: the same
    answer as judging every domain (`candidates`), the tightest (fewest GPUs left, then first in
    fabric order) or the first in fabric order."""
    v, reqs = case
    for req in reqs:
        for level in v.levels():
            need = sum(m.gpus for m in req.members)
            order = v.order(level)
            fit = [c for c in candidates(v, req.members, level) if c.fits]
            ev = GroupFit(v, req.members)
            tight = min(((c.free - need, order[c.domain], c.domain) for c in fit), default=None)
            assert ev.best(level) == (None if tight is None else (tight[2], tight[0]))
            first = min(((order[c.domain], c.domain, c.free - need) for c in fit), default=None)
            assert ev.best(level, tightest=False) == (
                None if first is None else (first[1], first[2])
            )

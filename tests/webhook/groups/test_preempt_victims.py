"""The victim choice and the running-pod index it reads (pure; no API)."""

from __future__ import annotations

import random

from tests.webhook.groups.fabric import fabric, node
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.extensions.preempt.index import Running, RunningIndex
from webhook.groups.extensions.preempt.victims import choose, closest
from webhook.groups.model.names import LEVELS
from webhook.groups.model.selector import selector_of

ANY = selector_of({})


def world(pods: list[Running], nodes: int = 8) -> tuple[CapacityView, RunningIndex]:
    view = CapacityView()
    view.replace_nodes(fabric(nodes))
    index = RunningIndex()
    for r in pods:
        view.put_pod(r.uid, r.node, r.gpus, True)
        index.put(r)
    return view, index


def run(name: str, node: int, gpus: int, priority: int, gang: str = "") -> Running:
    return Running(
        name, "b", name, f"node-{node:04d}", gpus, priority, ("b", gang) if gang else None, False
    )


def members(n: int, gpus: int = 8) -> tuple[Member, ...]:
    return tuple(Member(f"g/{i}", gpus, ANY) for i in range(n))


def test_lowest_priorities_first_then_fewest_pods_and_the_spare_ones_kept() -> None:
    pods = [
        # leaf-0: one node of 8 x 1-GPU pods at 100, the rest whole-node pods at 300
        *(run(f"small-{k}", 0, 1, 100) for k in range(8)),
        *(run(f"mid-{i}", i, 8, 300) for i in (1, 2, 3)),
        # leaf-1: whole-node pods at 200: its highest victim is lower than leaf-0's
        *(run(f"low-{i}", i, 8, 200) for i in (4, 5, 6, 7)),
    ]
    view, index = world(pods)
    plan = choose(view, index, members(2), "leaf", 1000).plan
    assert plan is not None and plan.domain == "leaf-1"  # priority 200 < 300 beats fewer pods
    assert sorted(v.name for v in plan.victims) == ["low-4", "low-5"]  # only what it needs
    assert plan.cost == (False, 200, 2, 16)
    assert choose(view, index, members(2), "leaf", 200).plan is None  # never equal or higher
    blocked = choose(view, index, members(2), "leaf", 1000, blocked={"leaf-1"}).plan
    assert blocked is not None and blocked.domain == "leaf-0"  # a PDB-blocked leaf comes last


def test_a_gang_member_brings_its_whole_gang_and_higher_gangs_are_safe() -> None:
    pods = [
        run("g-a", 0, 8, 100, gang="old"),
        run("g-b", 4, 8, 100, gang="old"),  # the same gang, in leaf-1
        *(run(f"r-{i}", i, 8, 100) for i in (1, 2, 3, 5, 6, 7)),
    ]
    view, index = world(pods)
    plan = choose(view, index, members(4), "leaf", 1000).plan
    assert plan is not None and plan.domain == "leaf-0"  # equal cost: fabric order
    assert sorted(v.name for v in plan.victims) == ["g-a", "g-b", "r-1", "r-2", "r-3"]
    assert plan.cost == (False, 100, 5, 40)
    view, index = world([*pods[:2], run("vip", 1, 8, 5000, gang="vip"), *pods[3:]])
    plan = choose(view, index, members(4), "leaf", 1000).plan
    assert plan is not None and plan.domain == "leaf-1"  # leaf-0 holds a pod it may not evict


def test_the_index_after_any_sequence_equals_one_built_afresh() -> None:
    rng = random.Random(3)
    nodes = fabric(16)
    view = CapacityView()
    view.replace_nodes(nodes)
    index = RunningIndex()
    index.domains(view, "leaf")  # built: from here on kept up to date
    live: dict[str, Running] = {}
    for step in range(400):
        if step == 200:  # a node moves to another leaf: its pods count there now
            nodes[3]["metadata"]["labels"]["gpufabric.io/leaf"] = "leaf-3"
            view.put_node(nodes[3])
        uid = f"p{rng.randrange(40)}"
        if uid in live and rng.random() < 0.5:
            index.remove(uid)
            del live[uid]
        else:
            r = Running(
                uid,
                "b",
                uid,
                f"node-{rng.randrange(16):04d}",
                rng.choice((1, 4, 8)),
                rng.choice((100, 200)),
                None,
                rng.random() < 0.1,
            )
            index.put(r)
            live[uid] = r
        fresh = RunningIndex()
        for r in live.values():
            fresh.put(r)
        for level in ("leaf", "leaf-pair"):
            assert index.domains(view, level) == fresh.domains(view, level)


def test_one_member_a_node_frees_one_slot_on_each_of_as_many_nodes() -> None:
    # An IMEX group (issue 31): 4 members of 1 GPU, one a node. Node 0 runs 1-GPU pods at 100,
    # nodes 1-3 1-GPU pods at 200: GPUs alone would take four pods of node 0; one a node needs
    # a pod on each of four nodes.
    pods = [run(f"p{n}-{k}", n, 1, 100 if n == 0 else 200) for n in range(4) for k in range(8)]
    view, index = world(pods, nodes=4)
    whole = tuple(Member(f"g/{i}", 1, ANY, whole=True) for i in range(4))
    plan = choose(view, index, whole, "leaf", 1000).plan
    assert plan is not None
    assert sorted({v.node for v in plan.victims}) == [f"node-{n:04d}" for n in range(4)]
    assert len(plan.victims) == 4
    plain = choose(view, index, members(4, gpus=1), "leaf", 1000).plan
    assert plain is not None and {v.node for v in plain.victims} == {"node-0000"}


def test_the_closest_domain_counts_free_gpus_on_the_nodes_some_member_may_use() -> None:
    """From the view's tally of those nodes (kept as pods come and go), as the pass over every
    node with a free GPU it replaced found it, whichever nodes the members' selectors admit."""
    rng = random.Random(7)
    view = CapacityView()
    view.replace_nodes(
        fabric(16, extra={"zone": "a"}) + [node(i, extra={"zone": "b"}) for i in range(16, 32)]
    )
    for k in range(40):  # zone b busy, zone a free: the nodes admitted decide the answer
        view.put_pod(f"p{k}", f"node-{rng.randrange(16, 32):04d}", rng.choice((1, 2, 4)), True)
    zone_b = selector_of({"nodeSelector": {"zone": "b"}})
    for chosen in ((Member("m0", 8, zone_b),), (Member("m0", 8, zone_b), Member("m1", 8, ANY))):
        ok = set().union(*(view.admitted(m.selector) for m in chosen))
        for i, level in enumerate(LEVELS):
            by_pass: dict[str, int] = {}
            for n, f in view.with_free().items():
                if n in ok and (d := view.where(n)[i]) is not None:
                    by_pass[d] = by_pass.get(d, 0) + f
            order = view.order(level)
            best = min(by_pass, key=lambda d: (-by_pass[d], order.get(d, 0)), default=None)
            assert closest(view, chosen, level) == best
    zone_b_leaves = {f"leaf-{i}" for i in range(4, 8)}  # nodes 16-31 in leaves of 4
    assert closest(view, (Member("m0", 8, zone_b),), "leaf") in zone_b_leaves


def test_the_closest_domain_is_asked_again_once_a_pod_moves() -> None:
    """Kept between asks (the groups waiting after one event share one pass over the domains),
    never past a change: a pod bound or gone moves the answer at once."""
    view = CapacityView()
    view.replace_nodes(fabric(16))  # leaves of 4 nodes, 8 GPUs each
    one = (Member("m0", 8, ANY),)
    assert closest(view, one, "leaf") == "leaf-0"  # all free: the first in fabric order
    assert closest(view, one, "leaf") == "leaf-0"
    for n in range(4):
        view.put_pod(f"p{n}", f"node-{n:04d}", 8, True)
    assert closest(view, one, "leaf") == "leaf-1"
    for leaf in (2, 3):
        view.put_pod(f"q{leaf}", f"node-{4 * leaf:04d}", 8, True)  # leaves 2 and 3: 24 free
    view.delete_pod("p0")  # leaf-0: 8 free; leaf-1 still 32
    assert closest(view, one, "leaf") == "leaf-1"
    view.put_pod("r", "node-0005", 8, True)  # leaf-1 down to 24, leaves 2-3 have 24 too
    assert closest(view, one, "leaf") == "leaf-1"
    view.put_pod("s", "node-0006", 4, True)  # leaf-1 20: leaf-2 (24) first of the rest
    assert closest(view, one, "leaf") == "leaf-2"

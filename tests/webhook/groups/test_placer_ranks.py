"""Ranks through the placer and the API server stand-in: indexes to leaves in fabric order, each
member held to its own leaf, replacements back to their rank's leaf, bad groups left gated."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi, setup
from tests.webhook.groups.test_placer import REQ, arrive, feed_back
from webhook.groups.model.indexes import COMPLETION_INDEX
from webhook.groups.model.names import LEVELS
from webhook.groups.placer.placer import Placer


def indexed(i: int, size: int = 8, name: str = "", **kw: Any) -> dict[str, Any]:
    """A pod of an Indexed Job: random suffix, completion index in annotation and label."""
    pod = gpu_pod(
        name or f"train-{i}-{random.randbytes(3).hex()}",
        8,
        group="train",
        size=size,
        gated=True,
        **kw,
    )
    pod["metadata"]["annotations"][COMPLETION_INDEX] = str(i)
    pod["metadata"]["labels"][COMPLETION_INDEX] = str(i)
    return pod


def leaf_held(pod: dict[str, Any]) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
    (term,) = terms
    return next(e["values"][0] for e in term["matchExpressions"] if e["key"] == "gpufabric.io/leaf")


def by_index(api: FakeApi) -> dict[int, dict[str, Any]]:
    return {
        int(p["metadata"]["annotations"][COMPLETION_INDEX]): p
        for p in api.pods.values()
        if COMPLETION_INDEX in p["metadata"]["annotations"]
    }


def test_indexed_job_of_8_in_a_leaf_pair_gets_0_to_3_on_one_leaf_and_4_to_7_on_the_other() -> None:
    # 16 nodes, leaves of 4: pair-0 has a busy node, so pair-1 (leaf-2, leaf-3) is the fit.
    api, placer = setup(fabric(16), {"node-0001": 8})
    order = list(range(8))
    random.Random(3).shuffle(order)
    for i in order:
        arrive(api, placer, indexed(i))
    pods = by_index(api)
    assert all(p["spec"]["schedulingGates"] == [] for p in pods.values())
    for i, p in pods.items():
        ann = p["metadata"]["annotations"]
        assert ann["gpufabric.io/placement"] == "leaf-pair=pair-1"
        assert ann["gpufabric.io/rank"] == str(i)  # the index is the rank
        assert leaf_held(p) == ("leaf-2" if i < 4 else "leaf-3")
    assert not [r for _, r, _ in api.events if r == "GroupRankMoved"]  # the ring lost nothing
    feed_back(api, placer)
    assert len(api.patches) == 8


def bind_all(api: FakeApi, placer: Placer) -> None:
    """The scheduler binds each ungated pod to a free node of the leaf it is held to."""
    for p in sorted(api.pods.values(), key=lambda p: p["metadata"]["name"]):
        if p["spec"].get("schedulingGates") or p["spec"].get("nodeName"):
            continue
        leaf = leaf_held(p)
        node = next(
            n
            for n in sorted(placer.view.nodes)
            if placer.view.nodes[n].labels["gpufabric.io/leaf"] == leaf
            and not any(q["spec"].get("nodeName") == n for q in api.pods.values())
        )
        p["spec"]["nodeName"] = node
        p["status"]["phase"] = "Running"
        placer.pod_event("MODIFIED", p)
    placer.reconcile()


def fail(api: FakeApi, placer: Placer, pod: dict[str, Any]) -> None:
    del api.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
    placer.pod_event("DELETED", pod)
    placer.reconcile()


def test_a_replacement_with_the_same_index_returns_to_its_leaf() -> None:
    api, placer = setup(fabric(16), {"node-0001": 8})
    for i in range(8):
        arrive(api, placer, indexed(i))
    bind_all(api, placer)
    fail(api, placer, by_index(api)[5])
    arrive(api, placer, indexed(5))
    new = by_index(api)[5]
    assert new["spec"]["schedulingGates"] == []
    assert new["metadata"]["annotations"]["gpufabric.io/rank"] == "5"
    assert leaf_held(new) == "leaf-3"


def test_a_plain_replacement_takes_the_missing_rank_and_moves_with_an_event_when_its_leaf_is_full() -> (
    None
):
    # 6 plain pods in pair-0: ranks 0-3 on leaf-0, 4-5 on leaf-1 (two nodes of leaf-1 left free)
    api, placer = setup(fabric(16), {f"node-{i:04d}": 8 for i in range(8, 16)})
    for i in range(6):
        arrive(api, placer, gpu_pod(f"w-{i}", 8, group="w", size=6, gated=True))
    bind_all(api, placer)
    ranks = {
        p["metadata"]["name"]: p["metadata"]["annotations"]["gpufabric.io/rank"]
        for p in api.pods.values()
        if p["metadata"]["name"].startswith("w-")
    }
    assert ranks == {f"w-{i}": str(i) for i in range(6)}
    lost = api.get("w-1")
    fail(api, placer, lost)
    # someone else takes the freed node of leaf-0: rank 1 cannot go back
    busy = gpu_pod(
        "other", 8, namespace="other", node_name=lost["spec"]["nodeName"], phase="Running"
    )
    placer.pod_event("ADDED", api.create(busy))
    arrive(api, placer, gpu_pod("w-1-again", 8, group="w", size=6, gated=True))
    new = api.get("w-1-again")
    assert new["spec"]["schedulingGates"] == []
    assert new["metadata"]["annotations"]["gpufabric.io/rank"] == "1"
    assert leaf_held(new) == "leaf-1"
    moved = [m for n, r, m in api.events if n == "w-1-again" and r == "GroupRankMoved"]
    assert moved == [
        "rank 1 belongs in leaf leaf-0 beside ranks 0 and 2, which has no room on nodes its "
        "constraints admit; placed in leaf leaf-1"
    ]


def test_members_that_disagree_or_share_an_index_stay_gated_with_the_pods_named() -> None:
    api, placer = setup(fabric(16))
    for i in range(3):
        arrive(api, placer, indexed(i, size=4, name=f"a-{i}"))
    arrive(api, placer, indexed(3, size=8, name="a-3"))
    assert api.patches == []
    why = {m for _, r, m in api.events if r == "GroupInvalid"}
    assert why == {
        "group train is not placed: members disagree on the group: a-0, a-1, a-2: size 4, "
        "level auto, locality required; a-3: size 8, level auto, locality required"
    }
    api2, placer2 = setup(fabric(16))
    for i, index in enumerate((0, 1, 1, 2)):
        arrive(api2, placer2, indexed(index, size=4, name=f"b-{i}"))
    assert api2.patches == []
    assert any(
        r == "GroupInvalid" and "index 1 is held by more than one pod: team-a/b-1, team-a/b-2" in m
        for _, r, m in api2.events
    )


def test_a_restart_mid_group_keeps_every_rank_once_and_each_leaf_consecutive() -> None:
    api, placer = setup(fabric(16), {"node-0001": 8})
    api.fail_after = 3  # the placer dies while patching the 4th member
    pods = [indexed(i, name=f"t-{i}") for i in range(8)]
    for p in pods[:7]:
        arrive(api, placer, p)
    with pytest.raises(KeyboardInterrupt):
        arrive(api, placer, pods[7])
    assert len(api.patches) == 3
    api.fail_after = None
    fresh = Placer(api)
    fresh.nodes_listed(fabric(16))
    fresh.pods_listed(list(api.pods.values()))  # the 3 placed are unbound: read from affinity
    fresh.reconcile()
    for i, p in by_index(api).items():
        assert p["metadata"]["annotations"]["gpufabric.io/rank"] == str(i)
        assert leaf_held(p) == ("leaf-2" if i < 4 else "leaf-3")
    assert not [r for _, r, _ in api.events if r == "GroupRankMoved"]  # the ring lost nothing


def test_ranks_are_consecutive_per_nvlink_domain_and_held_to_the_lowest_level_the_placer_knows() -> (
    None
):
    # 16 trays of 4 GPUs, 8 per leaf, two NVLink domains per leaf that alternate in name order
    # (even trays in one, odd in the other): name order would interleave them.
    racks = {i: f"nvl-{i // 8}-{i % 2}" for i in range(16)}
    nodes = fabric(16, leaf=8, gpus=4)
    for i, n in enumerate(nodes):
        n["metadata"]["labels"]["gpufabric.io/nvlink-domain"] = racks[i]
    api, placer = setup(nodes)
    for i in range(8):
        arrive(api, placer, gpu_pod(f"r-{i}", 4, group="r", size=8, gated=True))
    nvl = "nvlink-domain" in LEVELS  # the placement level issue 18's other half adds
    key = "gpufabric.io/nvlink-domain" if nvl else "gpufabric.io/leaf"
    held: dict[int, str] = {}
    for p in api.pods.values():
        (term,) = p["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
        held[int(p["metadata"]["annotations"]["gpufabric.io/rank"])] = next(
            e["values"][0] for e in term["matchExpressions"] if e["key"] == key
        )
    assert sorted(held) == list(range(8))
    runs = [held[r] for r in range(8)]
    changes = sum(runs[r] != runs[r + 1] for r in range(7))
    assert changes == len(set(runs)) - 1  # each domain's ranks consecutive


def test_a_jobset_of_two_jobs_of_4_puts_each_job_on_its_own_leaf() -> None:
    api, placer = setup(fabric(16), {"node-0001": 8})
    order = [(j, c) for j in range(2) for c in range(4)]
    random.Random(5).shuffle(order)
    for j, c in order:
        p = gpu_pod(f"js-w-{j}-{c}-x", 8, group="js", size=8, gated=True)
        p["metadata"]["labels"] |= {
            "jobset.sigs.k8s.io/job-index": str(j),
            "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
            COMPLETION_INDEX: str(c),
        }
        p["metadata"]["annotations"][COMPLETION_INDEX] = str(c)
        arrive(api, placer, p)
    for j, c in order:
        p = api.get(f"js-w-{j}-{c}-x")
        assert p["metadata"]["annotations"]["gpufabric.io/rank"] == str(4 * j + c)
        assert leaf_held(p) == f"leaf-{2 + j}"

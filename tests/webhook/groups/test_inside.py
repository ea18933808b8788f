"""Inside the domain a group is given (issue 25), through the placer and the API server stand-in:
the fewest lowest domains, tightest first, whatever order the node names are in; rank 0 where the
workload's convention puts its coordinator; the Event names each lowest domain with its level."""

from __future__ import annotations

import random
from typing import Any

from tests.nvl72 import domain, racks_under_leaves, tray_name
from tests.webhook.groups.fabric import gpu_pod, node
from tests.webhook.groups.fake_api import FakeApi, setup
from tests.webhook.groups.test_placer import arrive, feed_back
from webhook.groups.decision.inside import Low, choose_lows
from webhook.groups.model.indexes import (
    KUBEFLOW_JOB_ROLE,
    KUBEFLOW_REPLICA_INDEX,
    KUBEFLOW_REPLICA_TYPE,
)

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
RANK = "gpufabric.io/rank"


def interleaved(n: int, leaves: int = 4) -> list[dict[str, Any]]:
    """n nodes whose names do not follow the leaves: node-i sits in leaf i % leaves (one quad)."""
    return [
        node(
            i,
            extra={
                "gpufabric.io/leaf": f"leaf-{i % leaves}",
                "gpufabric.io/leaf-pair": f"pair-{i % leaves // 2}",
                "gpufabric.io/leaf-quad": f"quad-{i % leaves // 4}",
            },
        )
        for i in range(n)
    ]


def reverse_leaves(n: int) -> list[dict[str, Any]]:
    """n nodes named in reverse leaf order: node-0000 sits in the last leaf."""
    out = []
    for i in range(n):
        lf = (n - 1 - i) // 4
        labels = {
            "gpufabric.io/leaf": f"leaf-{lf}",
            "gpufabric.io/leaf-pair": f"pair-{lf // 2}",
            "gpufabric.io/leaf-quad": f"quad-{lf // 4}",
        }
        out.append(node(i, extra=labels))
    return out


def held(pod: dict[str, Any], key: str = "gpufabric.io/leaf") -> str:
    (term,) = pod["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
    return next(e["values"][0] for e in term["matchExpressions"] if e["key"] == key)


def placed(api: FakeApi, key: str = "gpufabric.io/leaf") -> dict[str, tuple[str, str]]:
    """pod name -> (rank, lowest domain it is held to)."""
    return {
        name: (p["metadata"]["annotations"].get(RANK, ""), held(p, key))
        for (_, name), p in api.pods.items()
        if not p["spec"].get("schedulingGates")
    }


def kubeflow(
    name: str, kind: str, index: int, gpus: int = 8, size: int = 8, **kw: Any
) -> dict[str, Any]:
    pod = gpu_pod(name, gpus, group="job", size=size, gated=True, **kw)
    pod["metadata"]["labels"] |= {
        KUBEFLOW_REPLICA_TYPE: kind,
        KUBEFLOW_REPLICA_INDEX: str(index),
        "training.kubeflow.org/job-name": "job",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
    }
    if kind == "master":
        pod["metadata"]["labels"][KUBEFLOW_JOB_ROLE] = "master"
    return pod


def test_eight_pods_at_leaf_quad_in_an_empty_quad_use_two_leaves_whatever_the_names() -> None:
    api, placer = setup(interleaved(16))
    for i in range(8):
        arrive(api, placer, gpu_pod(f"w-{i}", 8, group="g", size=8, level="leaf-quad", gated=True))
    got = placed(api)
    assert len(got) == 8
    leaves = {leaf for _, leaf in got.values()}
    assert leaves == {"leaf-0", "leaf-1"}  # was all four leaves, 2 pods each
    by_rank = {int(r): leaf for r, leaf in got.values()}
    assert [by_rank[r] for r in range(8)] == ["leaf-0"] * 4 + ["leaf-1"] * 4
    words = {m for _, reason, m in api.events if reason == "GroupPlaced"}
    assert (
        "group g placed in leaf-quad=quad-0, rank 5 in leaf leaf-1; ranks by lowest domain: "
        "leaf leaf-0: 0-3; leaf leaf-1: 4-7" in words
    )


def test_the_fewest_leaves_then_the_tightest_set_keeps_whole_leaves_whole() -> None:
    # quad-0: leaf-0 whole (4 free), leaf-1 and leaf-2 3 free each, leaf-3 2 free. Six pods need
    # two leaves; {leaf-1, leaf-2} leave nothing over and break no whole leaf.
    busy = {"node-0005": 8, "node-0009": 8, "node-0012": 8, "node-0013": 8}
    api, placer = setup([node(i) for i in range(16)], busy)
    for i in range(6):
        arrive(api, placer, gpu_pod(f"w-{i}", 8, group="g", size=6, level="leaf-quad", gated=True))
    assert {leaf for _, leaf in placed(api).values()} == {"leaf-1", "leaf-2"}


def test_pytorchjob_master_is_rank_0_and_worker_i_rank_i_plus_1() -> None:
    for nodes in ([node(i) for i in range(16)], reverse_leaves(16)):
        api, placer = setup(nodes)
        pods = [kubeflow("job-master-0", "master", 0)]
        pods += [kubeflow(f"job-worker-{i}", "worker", i) for i in range(7)]
        for pod in reversed(pods):
            arrive(api, placer, pod)
        got = placed(api)
        assert got["job-master-0"][0] == "0"
        assert {name: int(r) for name, (r, _) in got.items() if "worker" in name} == {
            f"job-worker-{i}": i + 1 for i in range(7)
        }
        # ranks 0-3 on one leaf, 4-7 on the next in fabric order
        by_rank = {int(r): leaf for r, leaf in got.values()}
        first, second = by_rank[0], by_rank[4]
        assert [by_rank[r] for r in range(8)] == [first] * 4 + [second] * 4
        assert int(first.split("-")[1]) < int(second.split("-")[1])


def mpi(name: str, role: str, index: int | None, gpus: int, size: int) -> dict[str, Any]:
    """A pod of an MPIJob as mpi-operator v2 labels it (job-role, replica-index on workers)."""
    pod = gpu_pod(name, gpus, group="mpi", size=size, gated=True)
    pod["metadata"]["labels"] |= {
        KUBEFLOW_JOB_ROLE: role,
        "training.kubeflow.org/job-name": "mpi",
        "training.kubeflow.org/operator-name": "mpi-operator",
    }
    if index is not None:
        pod["metadata"]["labels"][KUBEFLOW_REPLICA_INDEX] = str(index)
    return pod


def test_mpijob_launcher_without_gpus_takes_no_rank_and_workers_keep_their_index() -> None:
    api, placer = setup(reverse_leaves(16))
    arrive(api, placer, mpi("mpi-launcher", "launcher", None, 0, 9))
    for i in range(8):
        arrive(api, placer, mpi(f"mpi-worker-{i}", "worker", i, 8, 9))
    pods = {name: p for (_, name), p in api.pods.items()}
    assert not any(p["spec"].get("schedulingGates") for p in pods.values())
    assert RANK not in pods["mpi-launcher"]["metadata"]["annotations"]
    ranks = {n: int(p["metadata"]["annotations"][RANK]) for n, p in pods.items() if "worker" in n}
    assert ranks == {f"mpi-worker-{i}": i for i in range(8)}  # mpirun's host order
    words = [
        m for name, reason, m in api.events if reason == "GroupPlaced" and name == "mpi-launcher"
    ]
    assert words and words[0].endswith("no rank (an MPI launcher without GPUs)")


def test_mpijob_launcher_with_gpus_is_rank_0() -> None:
    api, placer = setup([node(i) for i in range(16)])
    arrive(api, placer, mpi("mpi-launcher", "launcher", None, 8, 8))
    for i in range(7):
        arrive(api, placer, mpi(f"mpi-worker-{i}", "worker", i, 8, 8))
    got = placed(api)
    assert got["mpi-launcher"][0] == "0"
    assert {n: int(r) for n, (r, _) in got.items() if "worker" in n} == {
        f"mpi-worker-{i}": i + 1 for i in range(7)
    }


def test_a_group_in_a_leaf_uses_the_fewest_nvlink_domains() -> None:
    # One leaf of four NVL72 racks with 12, 5, 9 and 18 free trays. 20 pods of 4 GPUs: name order
    # took racks 0, 1 and 2; two racks hold them, and racks 0 + 2 (21 free) are the tightest two.
    used = ((0, range(6)), (1, range(13)), (2, range(9)))
    busy = {tray_name(r, t): 4 for r, trays in used for t in trays}
    api, placer = setup(racks_under_leaves(4, racks_per_leaf=4), busy)
    for i in range(20):
        pod = gpu_pod(f"w-{i:02d}", 4, group="moe", size=20, level="leaf", gated=True)
        arrive(api, placer, pod)
    got = placed(api, "gpufabric.io/nvlink-domain")
    assert len(got) == 20
    by_rank = {int(r): d for r, d in got.values()}
    assert [by_rank[r] for r in range(20)] == [domain(0)] * 12 + [domain(2)] * 8


def test_the_event_names_the_level_when_a_pair_is_named_after_its_first_leaf() -> None:
    nodes = [node(i) for i in range(8)]
    for n in nodes:  # pair values spelled like their first leaf, as some sources name them
        labels = n["metadata"]["labels"]
        labels["gpufabric.io/leaf-pair"] = "leaf-0"
    api, placer = setup(nodes)
    for i in range(8):
        arrive(api, placer, gpu_pod(f"w-{i}", 8, group="g", size=8, gated=True))
    words = {m.split(";")[0] for _, reason, m in api.events if reason == "GroupPlaced"}
    assert "group g placed in leaf-pair=leaf-0, rank 0 in leaf leaf-0" in words
    assert "group g placed in leaf-pair=leaf-0, rank 4 in leaf leaf-1" in words


def lows(*holds: int, whole: tuple[int, ...] = ()) -> list[Low]:
    """Lowest domains leaf-0.. that take `holds` 8-GPU pods, the ones in `whole` wholly free."""
    return [Low(("leaf", f"leaf-{i}"), (), h, 8 * h, i in whole) for i, h in enumerate(holds)]


def names(chosen: tuple[Low, ...] | None) -> set[str]:
    return {d.name[1] for d in chosen or ()}


def test_choose_lows_fewest_then_tightest_then_fewest_whole_domains_broken() -> None:
    assert names(choose_lows(lows(4, 3, 3, 2, whole=(0,)), 6)) == {"leaf-1", "leaf-2"}
    assert names(choose_lows(lows(4, 3, 1, 2, whole=(0,)), 3)) == {"leaf-1"}  # one fits: tightest
    assert names(choose_lows(lows(3, 2, 3, 1), 7)) == {"leaf-0", "leaf-2", "leaf-3"}
    assert choose_lows(lows(1, 1), 3) is None


def test_the_greedy_for_large_choices_still_uses_the_fewest_domains() -> None:
    rng = random.Random(5)
    for _ in range(200):
        domains = lows(*(rng.randint(0, 6) for _ in range(rng.randint(2, 12))))
        need = rng.randint(1, sum(d.holds for d in domains) or 1)
        exact = choose_lows(domains, need)
        greedy = choose_lows(domains, need, budget=0)
        if exact is None:
            assert greedy is None
            continue
        assert greedy is not None and len(greedy) == len(exact)
        assert sum(d.holds for d in greedy) >= need


def test_a_recreated_launcher_without_gpus_is_placed_again_without_a_rank() -> None:
    api, placer = setup([node(i) for i in range(16)])
    arrive(api, placer, mpi("mpi-launcher", "launcher", None, 0, 9))
    for i in range(8):
        arrive(api, placer, mpi(f"mpi-worker-{i}", "worker", i, 8, 9))
    feed_back(api, placer)
    gone = api.pods.pop(("team-a", "mpi-launcher"))
    placer.pod_event("DELETED", gone)
    placer.reconcile()
    again = mpi("mpi-launcher-2", "launcher", None, 0, 9)
    arrive(api, placer, again)
    pod = api.get("mpi-launcher-2")
    assert pod["spec"]["schedulingGates"] == []
    assert RANK not in pod["metadata"]["annotations"]
    assert pod["metadata"]["annotations"]["gpufabric.io/placement"] == "leaf-pair=pair-0"
    assert not [r for _, r, _ in api.events if r == "GroupInvalid"]


def test_a_group_of_pods_without_gpus_is_placed() -> None:
    # every member the same shape with 0 GPUs: counting whole-pod slots would divide by zero
    api, placer = setup([node(i) for i in range(8)])
    for i in range(3):
        arrive(api, placer, gpu_pod(f"cpu-{i}", 0, group="cpu", size=3, gated=True))
    assert sorted(placed(api, "gpufabric.io/leaf")) == ["cpu-0", "cpu-1", "cpu-2"]


def test_a_recreated_worker_keeps_rank_index_plus_1_while_its_master_is_gone_too() -> None:
    api, placer = setup([node(i) for i in range(16)])
    for pod in [kubeflow("job-master-0", "master", 0)] + [
        kubeflow(f"job-worker-{i}", "worker", i) for i in range(7)
    ]:
        arrive(api, placer, pod)
    feed_back(api, placer)
    for name in ("job-master-0", "job-worker-2"):  # both lost; the worker comes back first
        placer.pod_event("DELETED", api.pods.pop(("team-a", name)))
    placer.reconcile()
    arrive(api, placer, kubeflow("job-worker-2", "worker", 2, uid="uid-again"))
    assert api.get("job-worker-2")["metadata"]["annotations"][RANK] == "3"
    assert not [r for _, r, _ in api.events if r == "GroupInvalid"]

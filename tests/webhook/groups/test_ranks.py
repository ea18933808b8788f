"""Ranks from indexes and places (pure): who sits where, which index is bad, where a lost rank
belongs."""

from __future__ import annotations

from webhook.groups.decision.ranks import Slot, homes, lowest, seat
from webhook.groups.model.indexes import (
    COMPLETION_INDEX,
    JOBSET_JOB_INDEX,
    JOBSET_REPLICAS,
    KUBEFLOW_JOB_ROLE,
    KUBEFLOW_REPLICA_INDEX,
    KUBEFLOW_REPLICA_TYPE,
    Ident,
    ident_of,
    resolve,
)
from webhook.groups.model.names import LEVELS


def test_lowest_domain_is_the_first_level_a_node_has() -> None:
    def where(**domains: str) -> tuple[str | None, ...]:
        return tuple(domains.get(lv.replace("-", "_")) for lv in LEVELS)

    assert lowest(where(leaf_pair="pair-1", spine="s0")) == ("leaf-pair", "pair-1")
    assert lowest(where(leaf="leaf-3", leaf_pair="pair-1")) == ("leaf", "leaf-3")
    assert lowest(where()) is None


def test_plain_members_take_ranks_in_fabric_order_consecutive_per_domain() -> None:
    # pack put b,d on leaf 1 and a,c on leaf 0 (order key: leaf, then node)
    slots = [Slot("a", "s", "n2"), Slot("b", "s", "n5"), Slot("c", "s", "n1"), Slot("d", "s", "n6")]
    order = {"n1": (0, 1), "n2": (0, 2), "n5": (1, 5), "n6": (1, 6)}
    got = seat(slots, order, {})
    # members in name order take the seats in fabric order: a->n1 (c's slot), b->n2 (a's) ...
    assert got == {"a": (0, "c"), "b": (1, "a"), "c": (2, "b"), "d": (3, "d")}


def test_indexed_members_keep_their_index_and_sit_in_that_seat() -> None:
    slots = [Slot(m, "s", n) for m, n in (("x", "n1"), ("y", "n2"), ("z", "n5"), ("w", "n6"))]
    order = {"n1": 0, "n2": 1, "n5": 2, "n6": 3}
    got = seat(slots, order, {"x": 3, "y": 0, "z": 2, "w": 1})
    assert got == {"y": (0, "x"), "w": (1, "y"), "z": (2, "z"), "x": (3, "w")}


def test_members_of_different_shapes_never_swap_seats() -> None:
    slots = [Slot("big", "8gpu", "n1"), Slot("small", "4gpu", "n2")]
    got = seat(slots, {"n1": 0, "n2": 1}, {"big": 1, "small": 0})
    assert got == {"big": (1, "big"), "small": (0, "small")}  # indexes kept, seats kept


def test_a_lost_rank_belongs_beside_its_ring_neighbours() -> None:
    a, b = ("leaf", "a"), ("leaf", "b")
    held = {0: a, 1: a, 3: a, 4: b, 6: b}
    assert homes(2, held) == (a,)
    assert homes(5, held) == (b,)
    assert homes(7, held) == (b, a)  # the ring wraps: rank 7 sits between 6 and 0
    held.pop(3)
    assert homes(3, held) == (a, b)  # at the edge: either side
    assert homes(0, {}) == ()


def test_indexes_from_each_workload_kind() -> None:
    assert ident_of({}, {COMPLETION_INDEX: "5"}).index == 5
    assert ident_of({"apps.kubernetes.io/pod-index": "2"}, {}).index == 2
    worker = {KUBEFLOW_REPLICA_INDEX: "1", KUBEFLOW_REPLICA_TYPE: "worker"}
    assert ident_of(worker, {}).index == 1
    master = {KUBEFLOW_REPLICA_INDEX: "0", KUBEFLOW_REPLICA_TYPE: "master"}
    assert ident_of(master, {}).index is None  # would collide with worker 0
    assert ident_of({}, {COMPLETION_INDEX: "²"}).bad  # isdigit() says yes, int() would raise
    # JobSet: 3 jobs of 2 pods, group of 6: job 2, completion 1 -> rank 5
    members = [
        (
            f"p{j}{c}",
            ident_of({JOBSET_JOB_INDEX: str(j), JOBSET_REPLICAS: "3"}, {COMPLETION_INDEX: str(c)}),
        )
        for j in range(3)
        for c in range(2)
    ]
    got = resolve(6, members)
    assert (
        got.problems == ()
        and got.ranks["p21"] == 5
        and sorted(got.ranks.values()) == list(range(6))
    )


def test_bad_indexes_are_named() -> None:
    members = [(f"ns/p{i}", ident_of({}, {COMPLETION_INDEX: str(i % 3)})) for i in range(4)]
    got = resolve(4, members)
    assert got.problems == ("index 0 is held by more than one pod: ns/p0, ns/p3",)
    got = resolve(2, members[:3])
    assert got.problems == (f"ns/p2: index 2 ({COMPLETION_INDEX}) is not below the group size 2",)
    jobset = [
        (f"j{j}", ident_of({JOBSET_JOB_INDEX: str(j), JOBSET_REPLICAS: "3"}, {})) for j in range(3)
    ]
    assert "not a multiple of the JobSet's 3 jobs" in resolve(4, jobset).problems[0]


def test_a_jobset_group_counts_jobs_in_its_replicated_job_or_across_the_jobset() -> None:
    def pod(rjob: str, job: int, jobs: int, gjob: int, c: int) -> Ident:
        labels = {
            "jobset.sigs.k8s.io/replicatedjob-name": rjob,
            JOBSET_JOB_INDEX: str(job),
            JOBSET_REPLICAS: str(jobs),
            "jobset.sigs.k8s.io/job-global-index": str(gjob),
            "jobset.sigs.k8s.io/global-replicas": "3",
        }
        return ident_of(labels, {COMPLETION_INDEX: str(c)})

    # a driver Job (global 0) and two worker Jobs (global 1, 2): a group of the workers only
    workers = [(f"w{j}{c}", pod("workers", j, 2, j + 1, c)) for j in range(2) for c in range(2)]
    got = resolve(4, workers)
    assert got.problems == () and got.ranks == {"w00": 0, "w01": 1, "w10": 2, "w11": 3}
    # a group of all three Jobs (2 pods each): job-index repeats, the global index does not
    every = [(f"d{c}", pod("driver", 0, 1, 0, c)) for c in range(2)] + [
        (f"w{j}{c}", pod("workers", j, 2, j + 1, c)) for j in range(2) for c in range(2)
    ]
    got = resolve(6, every)
    assert got.problems == ()
    assert got.ranks == {"d0": 0, "d1": 1, "w00": 2, "w01": 3, "w10": 4, "w11": 5}


def kf(kind: str, index: int | None = None, role: str = "") -> Ident:
    labels = {KUBEFLOW_REPLICA_TYPE: kind} if kind else {}
    if index is not None:
        labels[KUBEFLOW_REPLICA_INDEX] = str(index)
    if role:
        labels[KUBEFLOW_JOB_ROLE] = role
    return ident_of(labels, {})


def test_the_workloads_coordinator_is_rank_0_and_kubeflow_workers_follow_it() -> None:
    # PyTorchJob (training operator): master rank 0, worker i rank i+1, as its RANK variable
    pytorch = [("m", kf("master", 0, "master"))] + [(f"w{i}", kf("worker", i)) for i in range(3)]
    got = resolve(4, pytorch)
    assert got.problems == () and got.ranks == {"m": 0, "w0": 1, "w1": 2, "w2": 3}
    # workers alone (no master in the group): their index, as before
    assert resolve(3, pytorch[1:]).ranks == {"w0": 0, "w1": 1, "w2": 2}
    # TFJob: the chief leads; a parameter server has no index of its own
    tf = [("c", kf("chief", 0, "master")), ("ps", kf("ps", 0)), ("w0", kf("worker", 0))]
    assert resolve(3, tf).ranks == {"c": 0, "w0": 1}
    # MPIJob (mpi-operator v2 labels only job-role): a launcher without GPUs takes no rank
    launcher = ("l", kf("", role="launcher"))
    mpi = [launcher] + [(f"w{i}", kf("", i, "worker")) for i in range(2)]
    got = resolve(3, mpi, {"l": 0, "w0": 8, "w1": 8})
    assert got.ranks == {"w0": 0, "w1": 1} and got.unranked == {"l"}
    # ... and with GPUs it is rank 0 (runLauncherAsWorker lists it first in the hostfile)
    got = resolve(3, mpi, {"l": 8, "w0": 8, "w1": 8})
    assert got.ranks == {"l": 0, "w0": 1, "w1": 2} and got.unranked == frozenset()
    two = resolve(4, [*pytorch[:3], ("m2", kf("master", 1, "master"))])
    assert two.problems[0] == "more than one coordinator (Kubeflow master or launcher): m, m2"


def test_a_jobset_coordinator_named_in_its_spec_is_rank_0() -> None:
    def pod(job: int, c: int) -> Ident:
        labels = {
            "jobset.sigs.k8s.io/jobset-name": "js",
            "jobset.sigs.k8s.io/replicatedjob-name": "workers",
            JOBSET_JOB_INDEX: str(job),
            JOBSET_REPLICAS: "2",
            "jobset.sigs.k8s.io/coordinator": "js-workers-1-0.js",
        }
        return ident_of(labels, {COMPLETION_INDEX: str(c)})

    got = resolve(4, [(f"p{j}{c}", pod(j, c)) for j in range(2) for c in range(2)])
    assert got.problems == ()
    assert got.ranks == {"p10": 0, "p00": 1, "p01": 2, "p11": 3}

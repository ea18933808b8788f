"""The exports in the cluster, against a fake API server that answers like the real one: writes to
reach a steady state, none in it, ours replaced or deleted, others' never touched, kinds the
cluster does not serve reported and picked up once their CRD appears."""

from __future__ import annotations

from tests.webhook.export.fabrics import UUID, fabric, nvlink
from tests.webhook.export.fake_api import FakeSchedulerApi
from webhook.export.controller import CONDITION, Exporter
from webhook.export.kinds import KINDS
from webhook.export.model import MANAGED_BY
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, Spine

KUEUE, KAI, VOLCANO = KINDS["kueue"], KINDS["kai"], KINDS["volcano"]
ALL = [
    ("kueue.x-k8s.io", "topologies", ()),
    ("kai.scheduler", "topologies", ()),
    ("topology.volcano.sh", "hypernodes", ()),
]


class Harness:
    def __init__(
        self, api: FakeSchedulerApi, targets: tuple[str, ...] = ("kueue", "kai", "volcano")
    ) -> None:
        self.api = api
        self.pos = Positions(fabric())
        self.now = 0.0
        self.conditions: dict[str, dict[str, str]] = {}
        self.domains: dict[str, str] = {}  # node -> NVLink domain, as the labeler's fabric has it
        self.exporter = Exporter(
            api,
            [KINDS[t] for t in targets],
            lambda: self.pos,
            lambda kind, new: self.conditions.__setitem__(kind, dict(new)),
            lambda: self.domains,
            resync=300,
            recheck=30,
            clock=lambda: self.now,
        )
        self.exporter.listed("statuses")
        self.exporter.listed("nodes")

    def sync(self, advance: float = 1.0) -> int:
        self.now += advance
        return self.exporter.sync()

    @property
    def condition(self) -> dict[str, str]:
        return self.conditions[CONDITION]


def test_converges_in_one_write_per_object_and_writes_nothing_in_steady_state() -> None:
    h = Harness(FakeSchedulerApi(*ALL))
    h.domains = nvlink()
    first = h.sync()
    objects = sum(len(h.api.stored(k)) for k in (KUEUE, KAI, VOLCANO))
    assert (
        objects == 2 + 2 + len(h.api.stored(VOLCANO)) and len(h.api.stored(VOLCANO)) == 22
    )  # 7 + 6 + 4 + 3 + 2 by tier
    assert first == objects == len(h.api.requests)  # one apply each
    assert h.condition["status"] == "True" and h.condition["reason"] == "Exported"
    assert h.sync() == 0
    assert h.sync(advance=301) == 0  # the periodic relist finds everything equal
    h.domains = dict(nvlink())  # the same domains, derived again
    assert h.sync(advance=301) == 0
    assert all(MANAGED_BY in o["metadata"]["labels"] for o in h.api.stored(VOLCANO).values())


def test_a_fabric_change_writes_only_what_differs_and_deletes_ours_that_are_gone() -> None:
    h = Harness(FakeSchedulerApi(*ALL), ("volcano",))
    h.sync()
    before = dict(h.api.stored(VOLCANO))
    spines = fabric().spines
    b = Spine(spines[1].id, spines[1].switches, spines[1].leaves[:1])  # leaf b1 goes away
    h.pos = Positions(Fabric("test", (spines[0], b)))
    h.api.requests.clear()
    writes = h.sync()
    gone = set(before) - set(h.api.stored(VOLCANO))
    assert gone == {"leaf-b1"}
    # b0's pair HyperNode loses its member leaf-b1: one apply; leaf-b1: one delete.
    assert sorted(h.api.requests) == [
        ("apply", "hypernodes", "leaf-pair-b0"),
        ("delete", "hypernodes", "leaf-b1"),
    ]
    assert writes == 2 and h.sync() == 0


def test_objects_that_are_not_ours_are_never_touched() -> None:
    api = FakeSchedulerApi(*ALL)
    theirs = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "gpufabric"},  # the name we want, made by someone else
        "spec": {"levels": [{"nodeLabel": "example.com/rack"}]},
    }
    other = {**theirs, "metadata": {"name": "cluster-topology"}}
    api.put(KAI, theirs)
    api.put(KAI, other)
    h = Harness(api, ("kai",))
    h.sync()
    assert api.stored(KAI)["gpufabric"] == theirs and api.stored(KAI)["cluster-topology"] == other
    assert ("apply", "topologies", "gpufabric") not in api.requests
    assert h.condition["status"] == "False" and "gpufabric exists without" in h.condition["message"]


def test_kind_not_served_is_a_condition_and_is_picked_up_when_its_crd_appears() -> None:
    api = FakeSchedulerApi(ALL[0], ALL[1])
    h = Harness(api)
    h.sync()
    assert h.condition == {
        "status": "False",
        "reason": "APINotServed",
        "message": "the cluster does not serve HyperNode.topology.volcano.sh",
    }
    assert len(api.stored(KUEUE)) == 1 and not api.stored(VOLCANO)
    api.install("topology.volcano.sh", "hypernodes")
    assert h.sync() == 0  # not looked at again before the recheck interval
    assert h.sync(advance=30) == len(api.stored(VOLCANO)) > 0
    assert h.condition["status"] == "True"


def test_kueue_v1beta1_only_cluster_gets_v1beta1() -> None:
    api = FakeSchedulerApi(("kueue.x-k8s.io", "topologies", ("v1beta1",)))
    h = Harness(api, ("kueue",))
    h.sync()
    assert api.stored(KUEUE)["gpufabric"]["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def test_kueue_0_13_cluster_gets_v1alpha1() -> None:
    api = FakeSchedulerApi()
    api.install("kueue.x-k8s.io", "topologies", crd_file="kueue-0.13-topology-crd-v1alpha1.yaml")
    h = Harness(api, ("kueue",))
    h.domains = nvlink()
    h.sync()
    stored = api.stored(KUEUE)
    assert sorted(stored) == ["gpufabric", "gpufabric-nvlink"]  # applied through its schema
    assert {o["apiVersion"] for o in stored.values()} == {"kueue.x-k8s.io/v1alpha1"}
    assert h.condition["status"] == "True" and h.sync(advance=300) == 0


def test_topology_whose_levels_change_is_deleted_and_created_again() -> None:
    api = FakeSchedulerApi(*ALL)
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "gpufabric", "labels": {MANAGED_BY: "gpufabric"}},
        "spec": {
            "levels": [{"nodeLabel": "gpufabric.io/leaf"}, {"nodeLabel": "kubernetes.io/hostname"}]
        },
    }
    api.apply(KUEUE, "v1beta2", old)
    api.requests.clear()
    h = Harness(api, ("kueue", "kai"))
    assert h.sync() == 1 + 2  # kueue: delete + create; kai: create
    assert api.requests[:2] == [
        ("delete", "topologies", "gpufabric"),
        ("apply", "topologies", "gpufabric"),
    ]
    assert len(api.stored(KUEUE)["gpufabric"]["spec"]["levels"]) == 5
    # An NVLink domain appears: a second Topology, the first one untouched.
    api.requests.clear()
    h.domains = {"gpu-a0-01": f"{UUID}.3"}
    assert h.sync() == 2 and {r[2] for r in api.requests} == {"gpufabric-nvlink"}
    # ... and goes away: ours deleted.
    h.domains = {}
    assert h.sync() == 2 and "gpufabric-nvlink" not in api.stored(KUEUE)


def test_a_fabric_that_places_no_node_keeps_the_last_good_objects() -> None:
    h = Harness(FakeSchedulerApi(*ALL))
    h.sync()
    before = {k.target: dict(h.api.stored(k)) for k in (KUEUE, KAI, VOLCANO)}
    h.pos = Positions(Fabric("none"))
    h.api.requests.clear()
    assert h.sync() == 0 and h.sync(advance=301) == 0 and h.api.requests == []
    assert {k.target: dict(h.api.stored(k)) for k in (KUEUE, KAI, VOLCANO)} == before
    assert h.condition["reason"] == "NothingPlaced"


def test_schema_error_is_a_condition_not_a_crash_loop() -> None:
    """An older Volcano whose HyperNode has no tierName: the apply is HTTP 500, as the real
    server answers; the other kinds still export; the kind is tried again later."""
    api = FakeSchedulerApi(*ALL)
    del api.crds[("topology.volcano.sh", "hypernodes")]["v1alpha1"]["properties"]["spec"][
        "properties"
    ]["tierName"]
    h = Harness(api)
    h.sync()
    assert h.condition["reason"] == "ExportFailed"
    assert (
        "HTTP 500" in h.condition["message"]
        and "tierName: field not declared" in h.condition["message"]
    )
    assert len(api.stored(KUEUE)) == 1 and len(api.stored(KAI)) == 1
    n = len(api.requests)
    assert h.sync() == 0 and len(api.requests) == n  # backs off until the recheck
    h.sync(advance=30)
    assert len(api.requests) == n + 1


def test_a_new_leader_term_looks_at_everything_at_once() -> None:
    import threading

    h = Harness(FakeSchedulerApi(*ALL), ("kai",))
    h.sync()
    del h.api.stored(KAI)["gpufabric"]  # somebody deleted it while another replica led
    assert h.sync() == 0  # within the resync period nothing looks
    ended = threading.Event()
    ended.set()
    h.exporter.run(ended)  # a new term (ended at once: no round run here)
    assert h.sync() == 1 and "gpufabric" in h.api.stored(KAI)

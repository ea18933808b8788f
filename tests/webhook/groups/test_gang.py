"""Native gangs (PodGroup gpufabric-<group>), nominatedNodeName in the placer's view, and the
partly-bound watch, one behaviour at a time (bursts: test_gang_burst.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import openapi
from tests.webhook.groups.burst_world import GangApi, admitted, member
from tests.webhook.groups.fabric import fabric, gpu_pod
from webhook.groups.admission.admit import admit_group
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.extensions.gang.admit import gang_ops
from webhook.groups.extensions.gang.names import podgroup_name
from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.gang.podgroups import pod_group
from webhook.groups.extensions.partly.bound import PartlyBound
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer
from webhook.groups.placer.slim import slim_pod

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "schedulers"


def paths(obj: Any, at: str = "") -> set[str]:
    """Every path to a leaf (list items as [])."""
    if isinstance(obj, dict):
        out = set()
        for k, v in obj.items():
            out |= paths(v, f"{at}.{k}")
        return out
    if isinstance(obj, list):
        return set().union(*(paths(v, f"{at}[]") for v in obj)) if obj else {at}
    return {at}


def fixture(name: str) -> Any:
    return yaml.safe_load((FIXTURES / name).read_text())


# -- what gpufabric writes is what the Kubernetes release serving that version reads -------------
# kube-apiserver 1.36.2's own OpenAPI schemas (tests/fixtures/schedulers/PROVENANCE.md)
PODGROUP_1_36 = FIXTURES / "k8s-1.36-openapi-scheduling-v1alpha2-podgroup.json"
SCHEDULING_GROUP_1_36 = FIXTURES / "k8s-1.36-openapi-core-v1-podschedulinggroup.json"


def podgroup_1_36() -> dict[str, Any]:
    return pod_group("ns", "gpufabric-g", "g", 4, ("batch/v1", "Job", "g", "uid-1"), "v1alpha2")


def test_the_podgroup_and_the_pods_field_are_what_kube_apiserver_1_36_accepts() -> None:
    made = podgroup_1_36()
    schema = openapi.load(PODGROUP_1_36)
    assert openapi.problems(made, schema, "io.k8s.api.scheduling.v1alpha2.PodGroup") == []
    assert made["apiVersion"] == "scheduling.k8s.io/v1alpha2" and made["kind"] == "PodGroup"
    assert made["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "disruptionMode": "PodGroup",
    }
    pod = admitted(member("g", 0, 4), native=True)
    named = pod["spec"]["schedulingGroup"]
    assert named == {"podGroupName": "gpufabric-g"}
    schema = openapi.load(SCHEDULING_GROUP_1_36)
    assert openapi.problems(named, schema, "io.k8s.api.core.v1.PodSchedulingGroup") == []


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        (
            lambda pg: pg["spec"]["schedulingPolicy"]["gang"].pop("minCount"),
            "'minCount' is a required",
        ),
        (lambda pg: pg["spec"].pop("schedulingPolicy"), "'schedulingPolicy' is a required"),
        (
            lambda pg: pg["spec"]["schedulingPolicy"].update(basic={}),
            "exactly one of ['basic', 'gang']",
        ),
        (lambda pg: pg["spec"]["schedulingPolicy"].pop("gang"), "exactly one of ['basic', 'gang']"),
        (lambda pg: pg["spec"].update(minCount=4), ".spec.minCount: unknown field"),
        (
            lambda pg: pg["spec"]["schedulingPolicy"]["gang"].update(minCount="4"),
            "not of type 'integer'",
        ),
        (lambda pg: pg["metadata"]["ownerReferences"][0].pop("uid"), "'uid' is a required"),
    ],
    ids=[
        "no-minCount",
        "no-policy",
        "two-policies",
        "empty-policy",
        "unknown",
        "type",
        "owner-uid",
    ],
)
def test_a_podgroup_kube_apiserver_1_36_refuses_fails_the_schema_check(
    broken: Callable[[dict[str, Any]], object], said: str
) -> None:
    """Each body the 1.36.2 API server refused (create --dry-run=server --validate=strict: Required
    value, must specify exactly one of `basic`, `gang`, strict decoding error, cannot unmarshal),
    this check refuses too: a PodGroup we build wrong fails here, not only on a live cluster."""
    made = podgroup_1_36()
    broken(made)
    found = openapi.problems(
        made, openapi.load(PODGROUP_1_36), "io.k8s.api.scheduling.v1alpha2.PodGroup"
    )
    assert [p for p in found if said in p], found


def test_the_podgroup_of_1_37_uses_the_field_names_of_v1beta1() -> None:
    """No OpenAPI schema of v1beta1 is at hand (Kubernetes 1.37's is not in ../shared/reference):
    its paths and values are checked against kubernetes/api's round-trip fixture."""
    made = pod_group("ns", "gpufabric-g", "g", 4, ("batch/v1", "Job", "g", "uid-1"), "v1beta1")
    assert paths(made) <= paths(fixture("k8s-v1beta1-podgroup-roundtrip.yaml")) | {
        ".metadata.labels.gpufabric.io/group",
        ".metadata.labels.app.kubernetes.io/managed-by",
    } - {".metadata.labels.labelsKey"}
    assert made["apiVersion"] == "scheduling.k8s.io/v1beta1" and made["kind"] == "PodGroup"
    assert made["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "disruptionMode": {"all": {}},
    }


# -- admission ---------------------------------------------------------------------------------
def test_a_member_names_its_groups_podgroup_only_where_podgroups_are_served() -> None:
    pod = member("g", 0, 4)
    served = admit_group(pod, "CREATE", native_gang=True).ops
    assert {
        "op": "add",
        "path": "/spec/schedulingGroup",
        "value": {"podGroupName": "gpufabric-g"},
    } in served
    assert not [o for o in admit_group(pod, "CREATE").ops if "schedulingGroup" in o["path"]]
    # without a placer nothing would make the PodGroup: nothing is named
    ops = admit_group(pod, "CREATE", placer=False, native_gang=True).ops
    assert not [o for o in ops if "schedulingGroup" in o["path"]]


@pytest.mark.parametrize(
    ("spec", "group", "ops"),
    [
        ({"schedulingGroup": {"podGroupName": "mine"}}, "g", []),  # the user's own: kept
        ({"schedulingGroup": {"podGroupName": "gpufabric-g"}}, "g", []),  # reinvocation
        (
            {"schedulingGroup": {}},
            "g",
            [{"op": "add", "path": "/spec/schedulingGroup/podGroupName", "value": "gpufabric-g"}],
        ),
        ({}, "Upper_Case", []),  # a label value that makes no object name: no native gang
    ],
    ids=["users-own", "reinvoked", "empty-group", "invalid-name"],
)
def test_gang_ops(spec: dict[str, Any], group: str, ops: list[dict[str, Any]]) -> None:
    assert gang_ops({"spec": spec}, group) == ops


def test_podgroup_names() -> None:
    assert podgroup_name("llama-70b.run1") == "gpufabric-llama-70b.run1"
    assert podgroup_name("Llama") is None
    assert podgroup_name("a_b") is None


def test_slim_keeps_what_the_watch_and_the_view_read() -> None:
    pod = member("g", 0, 4)
    pod["spec"]["schedulingGroup"] = {"podGroupName": "gpufabric-g"}
    pod["status"] = {
        "phase": "Pending",
        "nominatedNodeName": "node-0003",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/8 nodes are available"},
            {"type": "Other", "status": "True"},
        ],
    }
    slim = slim_pod(pod)
    assert slim["spec"]["schedulingGroup"] == {"podGroupName": "gpufabric-g"}
    assert slim["status"]["nominatedNodeName"] == "node-0003"
    assert [c["type"] for c in slim["status"]["conditions"]] == ["PodScheduled"]


# -- the placer makes the PodGroup before the first gate goes, deletes it after the last pod ---
def native_placer(served: bool = True) -> tuple[GangApi, Placer]:
    api = GangApi()
    gang = NativeGang(api)
    gang.book.set_served("v1alpha2" if served else "")
    placer = Placer(
        api, clock=lambda: api.now, extensions=Extensions(gang=gang, partly=PartlyBound(api))
    )
    placer.nodes_listed(fabric(16))
    placer.pods_listed([])
    return api, placer


def arrive(api: GangApi, placer: Placer, pod: dict[str, Any]) -> None:
    placer.pod_event("ADDED", api.create(pod))
    placer.reconcile()


def test_the_podgroup_exists_before_any_member_is_ungated_and_goes_after_the_last() -> None:
    api, placer = native_placer()
    for i in range(4):
        arrive(api, placer, admitted(member("g", i, 4), native=True))
    assert api.log[0] == ("podgroup", "gpufabric-g")
    assert [k for k, _ in api.log[1:]] == ["patch"] * 4
    (pg,) = api.podgroups.values()
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert pg["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "g", "uid": "job-g"}
    ]
    for obj in list(api.pods.values())[:3]:
        placer.pod_event("DELETED", obj)
        placer.reconcile()
        assert api.podgroups  # members left: kept
    placer.pod_event("DELETED", list(api.pods.values())[3])
    placer.reconcile()
    assert not api.podgroups and api.log[-1] == ("podgroup-deleted", "gpufabric-g")


def test_in_the_cluster_the_sweeps_come_at_most_every_tick_not_at_every_pod_event() -> None:
    """run_placer's Placer ticks its extensions at most every TICK_EVERY seconds: each tick
    looks at every group they follow, and a burst brings a reconcile for almost every pod event.
    The PodGroup of a group whose last pod went is deleted at the next tick, not the next event."""
    from webhook.groups.placer.placer import TICK_EVERY

    api, _ = native_placer()
    gang = NativeGang(api)
    gang.book.set_served("v1alpha2")
    placer = Placer(
        api, clock=lambda: api.now, extensions=Extensions(gang=gang), tick_every=TICK_EVERY
    )
    placer.nodes_listed(fabric(16))
    placer.pods_listed([])
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    assert api.podgroups
    for obj in list(api.pods.values()):
        placer.pod_event("DELETED", obj)
    placer.reconcile()  # the same moment as the last tick: no sweep yet
    assert api.podgroups
    api.now += TICK_EVERY
    placer.reconcile()
    assert not api.podgroups and api.log[-1] == ("podgroup-deleted", "gpufabric-g")


def test_each_member_of_a_native_gang_is_told_its_node_before_its_gate_goes() -> None:
    """status.nominatedNodeName = the node the placer promised the member, one a member; every
    nomination of the group before its first patch (kube-scheduler must see a member's node
    before it can schedule it, and the patches go together)."""
    api, placer = native_placer()
    for i in range(4):
        arrive(api, placer, admitted(member("g", i, 4), native=True))
    assert len(api.patches) == 4 and len(api.nominations) == 4
    for name, node in api.nominations:
        uid = api.get(name, "burst")["metadata"]["uid"]
        assert placer.view.promised[uid][0] == node
    kinds = [kind for kind, _ in api.order]
    assert kinds == ["nominate"] * 4 + ["patch"] * 4
    assert len({node for _, node in api.nominations}) == 4  # one node a member


def test_no_member_is_nominated_where_kube_scheduler_runs_no_gang() -> None:
    """Outside a gang no member waits at Permit, where kube-scheduler writes the status a
    nomination saves it: the write would buy nothing."""
    api, placer = native_placer(served=False)
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    plain_api, plain = native_placer()
    for i in range(2):
        arrive(plain_api, plain, admitted(member("h", i, 2), native=False))
    assert len(api.patches) == 2 and len(plain_api.patches) == 2
    assert api.nominations == [] and plain_api.nominations == []


def test_members_naming_our_podgroup_are_placed_without_one_where_none_is_served() -> None:
    """kube-scheduler gates on no PodGroup where the cluster serves none (the feature turned
    off after they were admitted): they must not wait for good."""
    api, placer = native_placer(served=False)
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    assert len(api.patches) == 2 and not api.podgroups


def test_members_naming_our_podgroup_wait_only_while_whether_it_is_served_is_unknown() -> None:
    api, placer = native_placer()
    placer.ext.gang.book.served = None  # no PodGroup list answered yet
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    assert api.patches == [] and "waiting for the first list" in placer.waiting[("burst", "g")]
    placer.ext.gang.book.set_served("v1beta1")  # 1.37
    placer.retry_all()
    placer.reconcile()
    assert len(api.patches) == 2
    (pg,) = api.podgroups.values()
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"


def test_a_group_naming_the_users_podgroup_gets_none_of_ours() -> None:
    api, placer = native_placer()
    for i in range(2):
        pod = member("g", i, 2)
        pod["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
        arrive(api, placer, admitted(pod, native=True))
    assert len(api.patches) == 2 and not api.podgroups


# -- nominatedNodeName -------------------------------------------------------------------------
def test_a_nomination_takes_its_room_and_replaces_the_placers_own_promise() -> None:
    view = CapacityView()
    view.replace_nodes(fabric(2))
    view.promise("p", "node-0000", 8)
    assert (view.free("node-0000"), view.free("node-0001")) == (0, 8)
    view.put_pod("p", "", 8, False, nominated="node-0001")  # one pod, one place
    assert (view.free("node-0000"), view.free("node-0001")) == (8, 0)
    view.put_pod("p", "", 8, False)  # nomination cleared: the promise counts again
    assert (view.free("node-0000"), view.free("node-0001")) == (0, 8)
    view.put_pod("q", "", 4, False, nominated="node-0001")
    view.put_pod("q", "node-0001", 4, True)  # bound where nominated: counted once
    assert view.free("node-0001") == 4
    view.delete_pod("q")
    view.delete_pod("p")
    assert (view.free("node-0000"), view.free("node-0001")) == (8, 8)


def test_a_nomination_on_a_node_promised_to_another_member_moves_that_promise() -> None:
    # kube-scheduler nominates a gang member waiting at Permit on any node of its domain: the
    # node the placer had kept for a sibling. Counted as it was, that node held 16 of 8 GPUs
    # (shown as full) and the member's own node looked free: a gang was ungated into a full
    # leaf (bench/bind_bench.py, 15 of 16 placed).
    view = CapacityView()
    view.replace_nodes(fabric(4))
    view.promise("a", "node-0000", 8)
    view.promise("b", "node-0001", 8)
    view.put_pod("a", "", 8, False, nominated="node-0001")
    assert (view.free("node-0000"), view.free("node-0001")) == (0, 0)
    assert view.promised["b"][0] == "node-0000"
    view.put_pod("a", "", 8, False)  # the nomination cleared: each pod counted once still
    assert (view.free("node-0000"), view.free("node-0001")) == (0, 0)
    assert (view.free("node-0002"), view.free("node-0003")) == (8, 8)
    view.put_pod("b", "node-0001", 8, True)
    view.put_pod("a", "node-0000", 8, True)
    assert [view.free(f"node-{i:04d}") for i in range(4)] == [0, 0, 8, 8]


def test_a_group_is_not_ungated_into_room_the_scheduler_keeps_for_a_nominated_pod() -> None:
    api, placer = native_placer(served=False)
    for i in range(16):  # everything busy but node-0001 and leaf-1 (nodes 4-7)
        if i != 1 and not 4 <= i <= 7:
            placer.pod_event(
                "ADDED", api.create(gpu_pod(f"busy-{i}", 8, node_name=f"node-{i:04d}"))
            )
    pending = gpu_pod("preemptor", 8, namespace="other")
    pending["status"]["nominatedNodeName"] = "node-0005"
    placer.pod_event("ADDED", api.create(pending))
    for i in range(4):
        arrive(api, placer, admitted(member("h", i, 4, level="leaf"), native=False))
    assert api.patches == []  # leaf-1 has room for 3: the fourth node is kept for the preemptor
    assert ("burst", "h") in placer.waiting
    pending = api.get("preemptor", "other")
    pending["spec"]["nodeName"] = "node-0001"  # bound elsewhere after all: its nomination ends
    pending["status"] = {"phase": "Running"}
    placer.pod_event("MODIFIED", pending)
    placer.reconcile()
    assert len(api.patches) == 4
    assert (
        api.get("h-0", "burst")["metadata"]["annotations"]["gpufabric.io/placement"]
        == "leaf=leaf-1"
    )


# -- the partly-bound watch ----------------------------------------------------------------------
class Recorded:
    def __init__(self) -> None:
        self.gauge: list[int] = []
        self.bound: list[float] = []

    def partly_bound(self, groups: int) -> None:
        self.gauge.append(groups)

    def all_bound(self, seconds: float) -> None:
        self.bound.append(seconds)


def watched(job: bool) -> tuple[GangApi, Placer, Recorded]:
    api = GangApi()
    metrics = Recorded()
    gang = NativeGang(api)
    placer = Placer(
        api,
        clock=lambda: api.now,
        extensions=Extensions(gang=gang, partly=PartlyBound(api, metrics)),
    )
    placer.nodes_listed(fabric(16))
    placer.pods_listed([])
    for i in range(4):
        arrive(api, placer, admitted(member("g", i, 4, level="leaf", job=job), native=False))
    return api, placer, metrics


def bind(api: GangApi, placer: Placer, name: str, node: str) -> None:
    pod = api.pods[("burst", name)]
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    placer.pod_event("MODIFIED", pod)


def unschedulable(api: GangApi, placer: Placer, name: str) -> None:
    pod = api.pods[("burst", name)]
    text = "0/16 nodes are available: 12 node(s) didn't match Pod's node affinity/selector, 4 Insufficient nvidia.com/gpu."
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": text}
        ],
    }
    placer.pod_event("MODIFIED", pod)


def no_room_again(
    guard: Callable[[GangApi, Placer], None] = lambda api, placer: None,
) -> tuple[GangApi, Placer, Recorded]:
    """A gang of 4 in leaf-0 with 3 members bound (then `guard`: the budgets a test adds), another
    pod on the fourth node; at 60 s the unbound member is evicted, and comes back as g-3x to find
    leaf-0 full: gated, the gang due for release at 75 s (RELEASE_AFTER)."""
    api, placer, metrics = watched(job=True)
    for i in range(3):
        bind(api, placer, f"g-{i}", f"node-000{i}")
    guard(api, placer)
    placer.pod_event("ADDED", api.create(gpu_pod("other", 8, namespace="x", node_name="node-0003")))
    api.now = 60.0
    placer.reconcile()
    for p in api.gone:
        placer.pod_event("DELETED", p)
    api.gone = []
    again = member("g", 3, 4, level="leaf")
    again["metadata"] |= {"name": "g-3x", "uid": "uid-g-3x"}
    arrive(api, placer, admitted(again, native=False))
    return api, placer, metrics


def test_members_left_unbound_past_the_bound_are_reported_and_evicted_to_come_back() -> None:
    api, placer, metrics = watched(job=True)
    for i in range(3):
        bind(api, placer, f"g-{i}", f"node-000{i}")
    unschedulable(api, placer, "g-3")
    api.now = 59.0
    placer.reconcile()
    assert (
        not [e for e in api.events if e[1] == "GroupPartlyBound"]
        and ("evict", "g-3") not in api.log
    )
    api.now = 60.0
    placer.reconcile()
    (event,) = [e for e in api.events if e[1] == "GroupPartlyBound"]
    assert event[0] == "g-3" and "3 of 4 members bound" in event[2]
    assert "4 Insufficient nvidia.com/gpu" in event[2] and "Job g" in event[2]
    assert ("evict", "g-3") in api.log and ("burst", "g-3") not in api.pods
    assert metrics.gauge == [1]
    # the Job makes it again: gated, then seated inside the group's leaf and ungated
    for p in api.gone:
        placer.pod_event("DELETED", p)
    placer.reconcile()
    again = member("g", 3, 4, level="leaf")
    again["metadata"] |= {"name": "g-3x", "uid": "uid-g-3x"}
    arrive(api, placer, admitted(again, native=False))
    new = api.get("g-3x", "burst")
    assert not new["spec"]["schedulingGates"]
    assert new["metadata"]["annotations"]["gpufabric.io/placement"] == "leaf=leaf-0"
    bind(api, placer, "g-3x", "node-0003")
    api.now = 61.5
    placer.reconcile()
    assert metrics.bound == [pytest.approx(1.5)]  # from its (latest) ungating to all bound
    assert metrics.gauge == [1, 0]


def test_a_gang_whose_evicted_member_finds_no_room_again_is_released_whole() -> None:
    api, placer, metrics = no_room_again()
    assert api.get("g-3x", "burst")["spec"]["schedulingGates"]  # leaf-0 is full
    api.now = 74.0  # the placer has said for 14 s that g-3x finds no room in leaf-0
    placer.reconcile()
    assert [n for k, n in api.log if k == "evict"] == ["g-3"]
    api.now = 75.0  # RELEASE_AFTER
    placer.reconcile()
    assert sorted(n for k, n in api.log if k == "evict") == ["g-0", "g-1", "g-2", "g-3"]
    told = [t for n, r, t in api.events if r == "GroupPartlyBound" and n == "g-0"]
    assert told and "released whole" in told[0] and "leaf=leaf-0" in told[0]
    assert metrics.gauge == [1]  # partly bound from 60 s to the release
    for p in api.gone:  # the Job makes them again: the gang is placed anew, all of it
        placer.pod_event("DELETED", p)
        again = member("g", int(p["metadata"]["name"][2]), 4, level="leaf")
        again["metadata"] |= {
            "name": f"{p['metadata']['name']}y",
            "uid": f"{p['metadata']['uid']}y",
        }
        arrive(api, placer, admitted(again, native=False))
    pods = [api.get(f"g-{i}y", "burst") for i in range(3)] + [api.get("g-3x", "burst")]
    assert not any(p["spec"]["schedulingGates"] for p in pods)
    assert {p["metadata"]["annotations"]["gpufabric.io/placement"] for p in pods} == {"leaf=leaf-1"}


def test_a_bare_pod_is_only_reported_once() -> None:
    api, placer, metrics = watched(job=False)
    for i in range(3):
        bind(api, placer, f"g-{i}", f"node-000{i}")
    for t in (60.0, 70.0, 200.0):
        api.now = t
        placer.reconcile()
    (event,) = [e for e in api.events if e[1] == "GroupPartlyBound"]
    assert "a bare pod" in event[2] and "no PodScheduled message yet" in event[2]
    assert ("burst", "g-3") in api.pods and not [k for k, _ in api.log if k == "evict"]
    assert metrics.gauge == [1]


def test_a_gang_nothing_of_which_is_bound_is_not_partly_bound_but_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It holds no node: nothing is evicted or told as partly bound, but past the bound the
    placer's log says once that none bound, with kube-scheduler's word (a kube-scheduler that
    holds a deleted pod on its nodes leaves such a gang so for good: docs/usage.md)."""
    api, placer, metrics = watched(job=True)
    unschedulable(api, placer, "g-0")
    api.now = 59.0
    placer.reconcile()
    assert not [r for r in caplog.records if "none of its members bound" in r.getMessage()]
    api.now = 500.0
    placer.reconcile()
    placer.reconcile()
    assert not [e for e in api.events if e[1] == "GroupPartlyBound"] and metrics.gauge == []
    (said,) = [r for r in caplog.records if "none of its members bound" in r.getMessage()]
    assert said.levelname == "WARNING" and said.__dict__["group"] == "burst/g"
    assert said.__dict__["members"] == 4 and said.__dict__["seconds"] == 500
    assert "4 Insufficient nvidia.com/gpu" in said.__dict__["scheduler"]


def test_a_release_a_budget_refuses_on_its_last_member_evicts_none_until_it_allows() -> None:
    def guard_the_last_bound_member(api: GangApi, _: Placer) -> None:
        api.pods[("burst", "g-2")]["metadata"].setdefault("labels", {})["app"] = "train"
        api.add_pdb("train", {"app": "train"}, 0, namespace="burst")

    api, placer, _ = no_room_again(guard_the_last_bound_member)  # g-3 was Pending: not held
    api.now = 75.0  # RELEASE_AFTER: the release is asked as dry runs first
    placer.reconcile()
    assert [n for k, n in api.log if k == "evict"] == ["g-3"]  # none of the bound ones went
    assert ("g-2", 429) in api.dry_runs and api.evictions == [("g-3", 201)]
    assert not [t for _, r, t in api.events if r == "GroupPartlyBound" and "released" in t]
    api.pdbs["train"]["status"]["disruptionsAllowed"] = 3  # the budget allows it now
    api.now = 89.0
    placer.reconcile()
    assert [n for k, n in api.log if k == "evict"] == ["g-3"]  # asked again only after the bound
    api.now = 90.0
    placer.reconcile()
    assert sorted(n for k, n in api.log if k == "evict") == ["g-0", "g-1", "g-2", "g-3"]

"""Native gangs as installed (issue 37), on the real control plane with the webhook running as its
ServiceAccount: with GenericWorkload and GangScheduling on, a group's members name PodGroup
gpufabric-<group>, which the placer makes (in the version the API server serves) before it lifts
the gate, and kube-scheduler binds them all together; with them off, the same group binds without
one. Members admitted before PodGroups were known served (they name none, and never will) still
all bind; a PodGroup of the group's name being deleted, held while pods name it, does not keep
the next Job of that name waiting."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import jsonpatch
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests import openapi, reference
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.pods import PAUSE, create, group_annotations, pod, wait_bound
from tests.e2e.waits import wait_until
from webhook.groups.admission.admit import admit_group

PODGROUPS = ("scheduling.k8s.io", "v1alpha2", "podgroups")  # what Kubernetes 1.36 serves
MANAGED = {"app.kubernetes.io/managed-by": "gpufabric-placer"}
# (fixture, what the API server serves it at, its root schema): the unit tests' schemas
SCHEMAS = [
    (
        "k8s-1.36-openapi-scheduling-v1alpha2-podgroup.json",
        "/openapi/v3/apis/scheduling.k8s.io/v1alpha2",
        "io.k8s.api.scheduling.v1alpha2.PodGroup",
    ),
    (
        "k8s-1.36-openapi-core-v1-podschedulinggroup.json",
        "/openapi/v3/api/v1",
        "io.k8s.api.core.v1.PodSchedulingGroup",
    ),
]


def podgroup(env: Env, ns: str, name: str) -> dict[str, Any] | None:
    group, version, plural = PODGROUPS
    custom = client.CustomObjectsApi(env.admin)
    try:
        found: dict[str, Any] = custom.get_namespaced_custom_object(
            group, version, ns, plural, name
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return found


def named(pods: list[Any]) -> list[str]:
    """The PodGroup each pod names ("" for none), in pod order."""
    return [
        (p.spec.scheduling_group.pod_group_name if p.spec.scheduling_group else "") for p in pods
    ]


def members(
    group: str, size: int, first: int = 0, count: int | None = None
) -> list[dict[str, Any]]:
    annotations = group_annotations(group, size, group_level="leaf")
    return [pod(f"{group}-{i}", 8, annotations) for i in range(first, first + (count or size))]


@pytest.mark.parametrize("cluster_env", ["gang", "plain"], indirect=True)
def test_a_group_binds_whole_with_and_without_native_gangs(
    cluster_env: Env, ns: str, fleet: Fleet, request: pytest.FixtureRequest
) -> None:
    gang = request.node.callspec.params["cluster_env"] == "gang"
    layout = fleet.hgx_leaves(leaves=2, per_leaf=2)
    create(cluster_env.core, ns, members("g", 2))
    bound = wait_bound(cluster_env.core, ns, 2)
    assert {p.spec.node_name for p in bound} in ({*nodes} for nodes in layout.values())
    made = podgroup(cluster_env, ns, "gpufabric-g") if gang else None
    if gang:
        assert named(bound) == ["gpufabric-g"] * 2
        assert made is not None and made["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
        assert made["metadata"]["labels"].items() >= MANAGED.items()
    else:
        assert named(bound) == ["", ""]  # none served: nothing named, nothing waits for one


def placers_nomination(obj: Any) -> str:
    """The pod's status.nominatedNodeName where the placer wrote it (its field manager owns the
    field: kube-scheduler sets it too, for members waiting at Permit), else ''."""
    node = obj.status.nominated_node_name if obj.status else None
    for entry in obj.metadata.managed_fields or []:
        ours = entry.manager == "gpufabric-placer" and entry.subresource == "status"
        if ours and "f:nominatedNodeName" in json.dumps(entry.fields_v1 or {}):
            return str(node or "")
    return ""


@pytest.mark.parametrize("cluster_env", ["gang", "plain"], indirect=True)
def test_each_member_of_a_gang_is_nominated_to_its_node_before_its_gate_goes(
    cluster_env: Env, ns: str, fleet: Fleet, request: pytest.FixtureRequest
) -> None:
    """As installed (the placer's RBAC and the policy gpufabric-placer-pod-status): each member
    of a native gang gets status.nominatedNodeName from the placer, a node of the group's
    domain, one a member, before its gate goes (a watch sees every change in order; the
    scheduler clears the field once bound). Which node each binds on stays kube-scheduler's:
    a member it tried alone before its siblings were ungated has its nomination cleared with
    that failure, and a pod-group cycle scores every node. Where no gang runs (PodGroups not
    served) the placer nominates nothing."""
    gang = request.node.callspec.params["cluster_env"] == "gang"
    fleet.hgx_leaves(leaves=2, per_leaf=4)
    core = cluster_env.core
    nominated: dict[str, str] = {}  # the placer's first nomination each pod showed
    early: set[str] = set()  # pods nominated while still gated
    done = threading.Event()
    since = core.list_namespaced_pod(ns).metadata.resource_version

    def follow() -> None:  # every change of every pod, in order, from before the first create
        stream = watch.Watch().stream(
            core.list_namespaced_pod, ns, resource_version=since, timeout_seconds=60
        )
        for event in stream:
            obj = event["object"]
            name = obj.metadata.name
            node = "" if name in nominated or obj.spec.node_name else placers_nomination(obj)
            if node:
                nominated[name] = node
                if any(g.name == "gpufabric.io/group" for g in obj.spec.scheduling_gates or []):
                    early.add(name)
            if done.is_set():
                return

    threading.Thread(target=follow, daemon=True).start()
    create(core, ns, members("n", 4))
    bound = wait_bound(core, ns, 4)
    done.set()
    if not gang:
        assert nominated == {}
        return
    wait_until(lambda: len(nominated) == 4, 10, f"the placer's nominations seen: {nominated}")
    assert early == set(nominated)
    assert sorted(nominated.values()) == sorted(p.spec.node_name for p in bound)


@pytest.mark.parametrize("cluster_env", ["gang"], indirect=True)
def test_members_admitted_before_podgroups_were_known_served_all_bind(
    cluster_env: Env, ns: str, fleet: Fleet
) -> None:
    """Two members as the webhook admitted them while it did not know PodGroups were served
    (gated and labelled, naming none; created past the webhook here), two admitted since
    (naming gpufabric-g). kube-scheduler waits for minCount pods that name the group: a gang of
    4 would never enter its queue."""
    fleet.hgx_leaves(leaves=1, per_leaf=4)
    core = cluster_env.core
    early = [
        jsonpatch.apply_patch(p, admit_group(p, "CREATE", native_gang=False).ops)
        for p in members("g", 4, count=2)
    ]
    core.patch_namespace(ns, {"metadata": {"labels": {"gpufabric.io/system": "e2e"}}})
    try:  # the webhook's namespaceSelector skips the install namespace's label
        create(core, ns, [copy.deepcopy(p) for p in early])
    finally:
        core.patch_namespace(ns, {"metadata": {"labels": {"gpufabric.io/system": None}}})
    create(core, ns, members("g", 4, first=2, count=2))
    bound = sorted(wait_bound(core, ns, 4, timeout=50), key=lambda p: p.metadata.name)
    assert named(bound) == ["", "", "gpufabric-g", "gpufabric-g"]
    made = podgroup(cluster_env, ns, "gpufabric-g")
    assert made is not None and made["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2


@pytest.mark.parametrize("cluster_env", ["gang"], indirect=True)
def test_a_podgroup_being_deleted_does_not_hold_the_next_job_of_its_name(
    cluster_env: Env, ns: str, fleet: Fleet
) -> None:
    """PodGroup gpufabric-train left from an earlier group of that name: the placer deletes it
    (no pod of the group left), and the podgroup-protection finalizer the API server gave it
    holds it while any pod names it (kube-controller-manager's controller lifts it once none
    does). A Job of the same name made meanwhile names it too, so it stays for as long as the
    Job runs: waiting for it to go would wait for good, and kube-scheduler binds by it all the
    same. The pod that names it when the placer deletes it is one of no group here (the race
    of a real Job's pods with the delete cannot be timed)."""
    layout = fleet.hgx_leaves(leaves=1, per_leaf=2)
    group, version, plural = PODGROUPS
    custom = client.CustomObjectsApi(cluster_env.admin)
    holder = {  # no gpufabric annotation: the webhook never sees it; already on a node
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "holder"},
        "spec": {
            "containers": [{"name": "main", "image": PAUSE}],
            "nodeName": layout["leaf-0"][0],
            "schedulingGroup": {"podGroupName": "gpufabric-train"},
        },
    }
    create(cluster_env.core, ns, [holder])
    stale = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {
            "name": "gpufabric-train",
            "labels": {"gpufabric.io/group": "train", **MANAGED},
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    old: Any = custom.create_namespaced_custom_object(group, version, ns, plural, stale)
    assert "scheduling.k8s.io/podgroup-protection" in old["metadata"]["finalizers"]
    wait_until(
        lambda: (
            (podgroup(cluster_env, ns, "gpufabric-train") or {})
            .get("metadata", {})
            .get("deletionTimestamp")
        ),
        30,
        "the placer's sweep deleting PodGroup gpufabric-train",
    )
    template = pod("train", 8, group_annotations("train", 2, group_level="leaf"))
    template["spec"]["restartPolicy"] = "Never"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }
    client.BatchV1Api(cluster_env.admin).create_namespaced_job(ns, job)
    bound = wait_bound(cluster_env.core, ns, 2, selector="job-name=train", timeout=50)
    assert named(bound) == ["gpufabric-train"] * 2
    held: Any = podgroup(cluster_env, ns, "gpufabric-train")
    assert held["metadata"]["uid"] == old["metadata"]["uid"]  # the one held, still there


@pytest.mark.parametrize("cluster_env", ["gang"], indirect=True)
@pytest.mark.parametrize(("fixture", "served_at", "root"), SCHEMAS, ids=["podgroup", "pod"])
def test_the_schemas_the_unit_tests_check_against_are_the_ones_this_server_serves(
    cluster_env: Env, fixture: str, served_at: str, root: str
) -> None:
    """tests/webhook/groups/test_gang.py checks what the placer writes against these fixtures
    (tests/fixtures/schedulers/PROVENANCE.md): cut the same way from the live API server, they
    are equal, or the fixtures are stale."""
    served = json.loads(cluster_env.cluster.kubectl("get", "--raw", served_at))
    kept = openapi.load(reference.FIXTURES / "schedulers" / fixture)
    assert openapi.closure(served, root) == kept

"""Native gangs against what the real API server and kube-scheduler do (issue 37): every member
of a group gets the same admission answer; a group whose members disagree nonetheless binds
whole; its PodGroup is adopted only by owner UID and made again when lost; a member the
scheduler preempts for is not stuck; a release counts budgets over the whole gang."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from tests.webhook.groups.burst_world import GangApi, admitted, member
from tests.webhook.groups.test_gang import (
    arrive,
    bind,
    native_placer,
    no_room_again,
    unschedulable,
    watched,
)
from tests.webhook.helpers import golden_cache, pod, review
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.groups.extensions.gang.podgroups import pod_group
from webhook.groups.framework.owned import Found, verdict
from webhook.groups.placer.placer import Placer

GROUP = {"gpufabric.io/group": "g", "gpufabric.io/group-size": "2"}
KEY = ("burst", "g")


# -- admission: one answer for every member -------------------------------------------------------
@pytest.mark.parametrize(
    ("served", "code", "named"),
    [(None, 503, False), (True, 0, True), (False, 0, False)],
    ids=["unknown-retry", "served", "unserved"],
)
def test_admission_asks_a_member_to_retry_while_podgroups_are_unknown(
    served: bool | None, code: int, named: bool
) -> None:
    settings = Settings(native_gang=lambda: served)
    answer = admit(review(pod(GROUP))["request"], golden_cache(), settings)
    response = answer.response
    assert response["allowed"] is (code == 0)
    if code:
        assert response["status"]["code"] == 503
        assert "retry in a few seconds" in response["status"]["message"]
        return
    ops = json.loads(base64.b64decode(str(response.get("patch", ""))) or "[]")
    assert any(o["path"].startswith("/spec/schedulingGroup") for o in ops) is named


def test_a_member_naming_a_podgroup_of_its_own_is_not_held_while_unknown() -> None:
    settings = Settings(native_gang=lambda: None)
    mine = pod(GROUP, schedulingGroup={"podGroupName": "mine"})
    assert admit(review(mine)["request"], golden_cache(), settings).response["allowed"]
    no_placer = Settings(native_gang=lambda: None, placer=False)  # nothing named, nothing held
    assert admit(review(pod(GROUP))["request"], golden_cache(), no_placer).response["allowed"]


# -- members that disagree -------------------------------------------------------------------------
def test_a_group_whose_members_disagree_gets_a_gang_of_those_that_name_it() -> None:
    """Two members admitted before PodGroups were known served name none: kube-scheduler counts
    only the two that do, so a gang of 4 would never enter its queue."""
    api, placer = native_placer()
    for i in range(4):
        arrive(api, placer, admitted(member("g", i, 4), native=i >= 2))
    (pg,) = api.podgroups.values()
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert len(api.patches) == 4  # all ungated


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"], ids=["1.36", "1.37"])
def test_a_gang_larger_than_its_naming_members_shrinks_where_it_may(version: str) -> None:
    """A PodGroup cannot be made anew while pods name it (kube-controller-manager's
    podgroup-protection finalizer holds it): v1beta1's minCount is mutable and shrinks to the
    members that name it; v1alpha2's is not, so the group waits and says what to do."""
    api, placer = native_placer()
    placer.ext.gang.book.set_served(version)
    old = pod_group("burst", "gpufabric-g", "g", 4, ("batch/v1", "Job", "g", "job-g"), version)
    placer.ext.gang.book.event("ADDED", api.create_owned("burst", old))
    for i in range(4):
        arrive(api, placer, admitted(member("g", i, 4), native=i >= 1))
    pg = api.podgroups[("burst", "gpufabric-g")]
    assert ("podgroup-deleted", "gpufabric-g") not in api.log
    if version == "v1beta1":
        assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3 and len(api.patches) == 4
        return
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4 and api.patches == []
    assert "a gang of 4, more than the 3 members" in placer.waiting[KEY]


# -- owned by UID ------------------------------------------------------------------------------------
JOB = ("batch/v1", "Job", "g", "job-g")


@pytest.mark.parametrize(
    ("found", "owner", "want"),
    [
        (None, JOB, "make"),
        (Found("u", "g", "job-g"), JOB, "keep"),
        (Found("u", "g", "job-old"), JOB, "earlier"),  # a Job of the same name, made again
        (Found("u", "g", ""), JOB, "earlier"),
        (Found("u", "g", ""), None, "keep"),  # bare pods: an object that names no owner
        (Found("u", "g", "job-g"), None, "earlier"),
        (Found("u", None, "job-g"), JOB, "foreign"),  # not labelled ours: a user's
        (Found("u", "other", "job-g"), JOB, "foreign"),
        (Found("u", "g", "job-g", deleting=True), JOB, "deleting"),
    ],
)
def test_an_owned_object_is_adopted_only_by_owner_uid(
    found: Found | None, owner: tuple[str, str, str, str] | None, want: str
) -> None:
    assert verdict(found, "g", owner) == want


@pytest.mark.parametrize(
    "earlier", [("batch/v1", "Job", "g", "job-old"), None], ids=["job", "none"]
)
def test_a_podgroup_of_an_earlier_owner_is_adopted_by_this_one(
    earlier: tuple[str, str, str, str] | None,
) -> None:
    """Its earlier Job's deletion would take it from the group (the garbage collector follows
    the ownerReference): it is made to name the members' Job, on the condition of its UID."""
    api, placer = native_placer()
    old = pod_group("burst", "gpufabric-g", "g", 2, earlier, "v1alpha2")
    made = api.create_owned("burst", old)
    placer.ext.gang.book.event("ADDED", made)
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    pg = api.podgroups[("burst", "gpufabric-g")]
    assert pg["metadata"]["uid"] == made["metadata"]["uid"]  # the same object, adopted
    assert pg["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "g", "uid": "job-g"}
    ]
    assert api.log[-3:] == [("podgroup-patched", "gpufabric-g"), ("patch", "g-0"), ("patch", "g-1")]
    assert placer.ext.gang.book.by_name[("burst", "gpufabric-g")].owner_uid == "job-g"


def test_a_podgroup_being_deleted_serves_until_no_pod_names_it() -> None:
    """The garbage collector deleted it with its earlier Job; the protection finalizer keeps it
    while the new members name it, and kube-scheduler uses it: no wait for it to go."""
    api, placer = native_placer()
    old = pod_group("burst", "gpufabric-g", "g", 2, ("batch/v1", "Job", "g", "job-old"), "v1alpha2")
    made = api.create_owned("burst", old)
    made["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    placer.ext.gang.book.event("MODIFIED", made)
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    assert len(api.patches) == 2 and ("podgroup-patched", "gpufabric-g") not in api.log


def test_a_podgroup_that_is_not_ours_is_left_alone_and_said() -> None:
    api, placer = native_placer()
    api.podgroups[("burst", "gpufabric-g")] = {
        "metadata": {"name": "gpufabric-g", "namespace": "burst", "uid": "users"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 9}}},
    }
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    assert api.patches == [] and "is not this group's" in placer.waiting[KEY]
    assert api.podgroups[("burst", "gpufabric-g")]["metadata"]["uid"] == "users"


def test_a_podgroup_lost_while_members_wait_for_it_is_made_again() -> None:
    api, placer = native_placer()
    for i in range(2):
        arrive(api, placer, admitted(member("g", i, 2), native=True))
    (made,) = api.podgroups.values()
    del api.podgroups[("burst", "gpufabric-g")]  # kubectl delete, or the garbage collector
    placer.ext.gang.book.event("DELETED", made)
    placer.reconcile()
    (again,) = api.podgroups.values()
    assert again["metadata"]["uid"] != made["metadata"]["uid"]
    assert again["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    bind(api, placer, "g-0", "node-0000")
    bind(api, placer, "g-1", "node-0001")
    del api.podgroups[("burst", "gpufabric-g")]
    placer.ext.gang.book.event("DELETED", again)
    api.now = 100.0
    placer.reconcile()
    assert not api.podgroups  # all bound: nothing waits for it (a replacement's ensure makes it)


# -- nominated members ---------------------------------------------------------------------------
def test_a_member_the_scheduler_preempts_for_is_not_stuck() -> None:
    api, placer, metrics = watched(job=True)
    for i in range(3):
        bind(api, placer, f"g-{i}", f"node-000{i}")
    unschedulable(api, placer, "g-3")
    nominated = api.pods[("burst", "g-3")]
    nominated["status"]["nominatedNodeName"] = "node-0003"  # victims there are terminating
    placer.pod_event("MODIFIED", nominated)
    for t in (60.0, 120.0, 300.0):
        api.now = t
        placer.reconcile()
    assert not [e for e in api.events if e[1] == "GroupPartlyBound"]
    assert not [k for k, _ in api.log if k == "evict"] and metrics.gauge == []
    del nominated["status"]["nominatedNodeName"]  # the scheduler gave up on it
    placer.pod_event("MODIFIED", nominated)
    api.now = 359.0  # the bound counts from the last time it was nominated
    placer.reconcile()
    assert not [k for k, _ in api.log if k == "evict"]
    api.now = 360.0
    placer.reconcile()
    assert [n for k, n in api.log if k == "evict"] == ["g-3"]


# -- a release counts budgets over the whole gang --------------------------------------------------
def release_pending(budget_allows: int) -> tuple[GangApi, Placer]:
    """A gang of 4, 3 bound and Running under one budget, whose evicted 4th member came back and
    finds no room: due for release at 75 s."""

    def budget(api: GangApi, placer: Placer) -> None:
        pdb = api.add_pdb("train", {"gpufabric.io/group": "g"}, budget_allows, namespace="burst")
        placer.budgets_listed([pdb])

    api, placer, _ = no_room_again(budget)
    return api, placer


def test_a_release_one_budget_cannot_allow_whole_evicts_none() -> None:
    """Each dry run alone passes a budget allowing 1 of 3; the second real eviction would get
    429 and leave the gang half evicted. Counted over the release, none goes."""
    api, placer = release_pending(budget_allows=1)
    api.now = 75.0
    placer.reconcile()
    assert [n for k, n in api.log if k == "evict"] == ["g-3"]  # only the unbound one, at 60 s
    assert api.dry_runs == [] and api.evictions == [("g-3", 201)]
    pdb = copy.deepcopy(api.pdbs["train"])
    pdb["status"]["disruptionsAllowed"] = 3
    api.pdbs["train"] = pdb
    placer.budget_event("MODIFIED", pdb)
    api.now = 135.0  # asked again after the bound
    placer.reconcile()
    assert sorted(n for k, n in api.log if k == "evict") == ["g-0", "g-1", "g-2", "g-3"]
    # what the release spent is counted until the watch says so: nothing left for another plan
    assert placer.ext.preempt.budgets.by_namespace["burst"]["train"].allowed == 0

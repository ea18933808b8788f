"""The group's ComputeDomain on the lifecycle of the placer's owned objects (framework/lifecycle.py), as the
PodGroup has it: adopted only by the members' controller's UID, made again when lost while its
placed members live, let go when it is being deleted and none of the group holds its channel."""

from __future__ import annotations

from typing import Any

from tests.nvl72 import domain, racks_under_leaves, tray_name
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.imex_world import JOB, FakeDomains, arrive, imex_setup, member, settle
from webhook.groups.extensions.imex.domains import compute_domain
from webhook.groups.extensions.imex.names import FINALIZER
from webhook.groups.placer.placer import Placer

EARLIER = ("batch/v1", "Job", "train", "uid-job-train-before")  # the Job of that name before
AGAIN = ("batch/v1", "Job", "train", "uid-job-train-again")  # the Job made again
KEY = ("team-a", "moe")


def references(owner: tuple[str, str, str, str]) -> list[dict[str, str]]:
    return [dict(zip(("apiVersion", "kind", "name", "uid"), owner, strict=True))]


def verbs(domains: FakeDomains) -> list[str]:
    return [verb for verb, _, _ in domains.log]


def earlier_domain(domains: FakeDomains, placer: Placer) -> dict[str, Any]:
    made = dict(domains.create_owned("team-a", compute_domain("team-a", "moe", EARLIER, 2)))
    placer.ext.imex.book.event("ADDED", made)
    domains.log.clear()
    return made


def test_an_earlier_controllers_compute_domain_is_adopted_not_taken_as_it_is() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    made = earlier_domain(domains, placer)
    arrive(api, placer, [member(i, 2) for i in range(2)])
    assert verbs(domains) == ["patch"]  # neither made anew nor kept naming the earlier Job
    cd = domains.objects[KEY]
    assert cd["metadata"]["uid"] == made["metadata"]["uid"]
    assert cd["metadata"]["ownerReferences"] == references(JOB)
    assert placer.ext.imex.book.by_name[KEY].owner_uid == JOB[3]
    assert len(api.patches) == 2  # its template is there: the members are ungated


def test_an_adoption_the_api_server_refuses_leaves_the_group_waiting_with_its_words() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    made = earlier_domain(domains, placer)
    domains.objects[KEY]["metadata"]["uid"] = "cd-uid-other"  # made again since it was listed
    arrive(api, placer, [member(i, 2) for i in range(2)])
    assert api.patches == []
    why = placer.waiting[KEY]
    assert "adoption of ComputeDomain team-a/moe" in why and "409" in why, why
    assert domains.objects[KEY]["metadata"]["ownerReferences"] == references(EARLIER)
    assert made["metadata"]["uid"] != domains.objects[KEY]["metadata"]["uid"]


def test_a_lost_compute_domain_is_made_again_while_its_placed_members_live() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    arrive(api, placer, [member(i, 2) for i in range(2)])
    first = domains.objects.pop(KEY)  # its finalizer taken off by hand, and deleted
    placer.ext.imex.book.event("DELETED", first)
    placer.reconcile()
    again = domains.objects[KEY]
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["metadata"]["ownerReferences"] == references(JOB)
    assert again["metadata"]["finalizers"] == [FINALIZER]
    assert domains.nodes["moe"] == 2
    assert verbs(domains) == ["create", "create"]
    for name in ("w-00", "w-01"):  # and it goes with the group's last member, as before
        pod = api.pods.pop(("team-a", name))
        placer.pod_event("DELETED", pod)
        placer.reconcile()
    assert KEY not in domains.objects
    assert verbs(domains)[2:] == ["release", "delete"]


def terminating(api: FakeApi, placer: Placer, name: str) -> None:
    pod = api.pods[("team-a", name)]
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    placer.pod_event("MODIFIED", pod)


def test_one_being_deleted_is_held_while_members_run_and_let_go_for_the_next_job() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    arrive(api, placer, [member(i, 2) for i in range(2)])
    first = domains.objects[KEY]
    for i, name in enumerate(("w-00", "w-01")):  # bound, running
        pod = api.pods[("team-a", name)]
        pod["spec"]["nodeName"] = placer.view.promised[f"uid-team-a-w-0{i}"][0]
        pod["status"]["phase"] = "Running"
        placer.pod_event("MODIFIED", pod)
    # the Job deleted: the garbage collector deletes its ComputeDomain; the finalizer holds it
    domains.delete_owned("team-a", "moe", first["metadata"]["uid"], "v1beta1")
    placer.ext.imex.book.event("MODIFIED", domains.objects[KEY])
    for name in ("w-00", "w-01"):
        terminating(api, placer, name)
    # the Job made again under the same name while its old pods still terminate
    arrive(api, placer, [member(i, 2, owner=AGAIN) for i in (2, 3)])
    assert "release" not in verbs(domains)  # the terminating members still use it
    assert "ComputeDomain moe is being deleted" in placer.waiting[KEY]
    for name in ("w-00", "w-01"):
        pod = api.pods.pop(("team-a", name))
        placer.pod_event("DELETED", pod)
        placer.reconcile()
    assert verbs(domains)[-1] == "release" and KEY not in domains.objects  # let go: gone
    placer.ext.imex.book.event("DELETED", first)
    # NVIDIA's controller deletes its channel template; the template watch retries the groups
    rct = {"metadata": {"namespace": "team-a", "name": "moe-imex-channel"}}
    placer.ext.imex.templates.event("DELETED", rct)
    placer.retry_all()
    settle(placer)
    again = domains.objects[KEY]
    assert again["metadata"]["ownerReferences"] == references(AGAIN)
    assert verbs(domains)[-1] == "create"
    assert {p[0] for p in api.patches[-2:]} == {"w-02", "w-03"}  # the new members ungated


def test_explain_counts_the_channels_bound_members_hold_before_the_driver_labels_them() -> None:
    from webhook.groups.placer.explain import group_section

    nodes = racks_under_leaves(1)  # one NVLink domain of 18 trays
    bound = []
    for t in range(8):  # another group's members hold 8 trays' channels; no label written yet
        pod = member(10 + t, 8, group="other", node_name=tray_name(0, t), phase="Running")
        pod["spec"].pop("schedulingGates", None)
        bound.append(pod)
    lines = group_section(member(0, 12), nodes, bound)
    assert lines[3] == "  NVLink domains that hold it one member a node now: 0 of 1"
    lines = group_section(member(0, 10), nodes, bound)  # the 10 trays left hold 10
    assert lines[3] == f"  NVLink domains that hold it one member a node now: 1 of 1 ({domain(0)})"


def test_a_refused_create_made_with_the_writes_is_told_to_the_group_and_not_asked_again() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(2))
    domains.refuse_create = 403
    arrive(api, placer, [member(i, 2) for i in range(2)])
    assert verbs(domains) == ["refused"] and api.patches == []  # asked with the writes: logged
    placer.retry_all()  # the next try (the periodic retry): made on the group's own path
    placer.reconcile()
    assert verbs(domains) == ["refused", "refused"]
    told = [text for _, why, text in api.events if why == "GroupWriteRefused"]
    assert told and "create of ComputeDomain team-a/moe (HTTP 403)" in told[0]
    for _ in range(3):  # waits out its backoff: not asked again meanwhile
        placer.retry_all()
        placer.reconcile()
    assert verbs(domains) == ["refused", "refused"] and api.patches == []

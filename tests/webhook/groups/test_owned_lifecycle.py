"""The one lifecycle of the objects a group owns (framework/lifecycle.py over
framework/ownedkube.py), run for both kinds alike against an API server stand-in that answers as
kube-apiserver does (owned_server.py): made before the group is ungated, kept while ours by the
owner's UID and adopted otherwise, made again when lost, deleted (the placer's finalizer off
first) after the last member; and the API server's 403/404/409/422 mapped the same way for a
PodGroup and a ComputeDomain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.nvl72 import racks_under_leaves
from tests.webhook.groups.burst_world import admitted
from tests.webhook.groups.burst_world import member as gang_member
from tests.webhook.groups.imex_world import arrive as imex_arrive
from tests.webhook.groups.imex_world import imex_setup
from tests.webhook.groups.imex_world import member as imex_member
from tests.webhook.groups.owned_server import OwnedServer
from tests.webhook.groups.test_gang import arrive as gang_arrive
from tests.webhook.groups.test_gang import native_placer
from webhook.groups.extensions.gang.podgroups import Book as PodGroups
from webhook.groups.extensions.gang.podgroups import pod_group
from webhook.groups.extensions.imex.domains import Book as Domains
from webhook.groups.extensions.imex.domains import compute_domain
from webhook.groups.extensions.imex.names import FINALIZER
from webhook.groups.framework import owned
from webhook.groups.framework.lifecycle import Lifecycle
from webhook.groups.framework.ownedkube import KubeOwnedApi
from webhook.groups.framework.refusals import Rejected
from webhook.groups.model.pods import Owner

JOB = ("batch/v1", "Job", "g", "uid-job-g")
EARLIER = ("batch/v1", "Job", "g", "uid-job-g-before")  # the Job of that name before
KEY = ("ns", "g")


@dataclass(frozen=True)
class Case:
    book: Callable[[], owned.Book[Any]]
    name: str  # the object of group g
    body: Callable[[Owner | None], dict[str, Any]]


CASES = [
    pytest.param(
        Case(
            PodGroups, "gpufabric-g", lambda o: pod_group("ns", "gpufabric-g", "g", 2, o, "v1beta1")
        ),
        id="PodGroup",
    ),
    pytest.param(Case(Domains, "g", lambda o: compute_domain("ns", "g", o, 2)), id="ComputeDomain"),
]


def lifecycle(case: Case) -> tuple[Lifecycle[Any], OwnedServer]:
    book = case.book()
    book.set_served(book.kind.versions[0])
    kube = KubeOwnedApi(client.ApiClient(), book.kind)
    server = OwnedServer()
    kube.objects = server  # type: ignore[assignment]
    return Lifecycle(book, kube), server


def own(life: Lifecycle[Any], case: Case, owner: Owner | None = JOB) -> Any:
    return life.own(KEY, case.name, owner, lambda: case.body(owner))


def stored(life: Lifecycle[Any], server: OwnedServer, name: str) -> dict[str, Any]:
    return server.objects[(life.kind.plural, "ns", name)]


@pytest.mark.parametrize("case", CASES)
def test_made_once_then_kept_while_ours_by_the_owners_uid(case: Case) -> None:
    life, server = lifecycle(case)
    made = own(life, case)
    assert not isinstance(made, str) and made.found == owned.Found("uid-1", "g", JOB[3])
    meta = stored(life, server, case.name)["metadata"]
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpufabric-placer"
    assert meta["ownerReferences"][0]["uid"] == JOB[3]
    assert own(life, case) == made and server.calls == [("create", case.name)]


@pytest.mark.parametrize("case", CASES)
def test_an_earlier_owners_object_is_adopted_and_a_users_left_alone(case: Case) -> None:
    life, server = lifecycle(case)
    server.create_namespaced_custom_object("", "", "ns", life.kind.plural, case.body(EARLIER))
    life.book.listed([stored(life, server, case.name)])
    adopted = own(life, case)
    assert not isinstance(adopted, str) and adopted.found.uid == "uid-1"  # the same object
    assert stored(life, server, case.name)["metadata"]["ownerReferences"][0]["uid"] == JOB[3]
    assert [v for v, _ in server.calls] == ["create", "patch"]  # (the first: the earlier one)
    users = case.body(JOB)
    users["metadata"] = {"name": case.name, "namespace": "ns"}  # not labelled ours
    server.objects.clear()
    server.create_namespaced_custom_object("", "", "ns", life.kind.plural, users)
    life.book.listed([stored(life, server, case.name)])
    why = own(life, case)
    assert isinstance(why, str) and "is not this group's" in why
    # the watch of PodGroups keeps only ours: a create answered 409 reads the user's back
    tried = ["create", "get"] if life.kind.only_ours else []
    assert [v for v, _ in server.calls][3:] == tried  # (the third: the user's, by the test)
    assert "ownerReferences" not in stored(life, server, case.name)["metadata"]


@pytest.mark.parametrize("case", CASES)
def test_a_create_that_finds_one_there_judges_the_one_read_back(case: Case) -> None:
    """The book had not seen it yet (409 AlreadyExists): an earlier owner's is adopted."""
    life, server = lifecycle(case)
    server.create_namespaced_custom_object("", "", "ns", life.kind.plural, case.body(EARLIER))
    adopted = own(life, case)
    assert not isinstance(adopted, str) and adopted.found.owner_uid == JOB[3]
    assert [v for v, _ in server.calls] == ["create", "create", "get", "patch"]


@pytest.mark.parametrize("case", CASES)
def test_a_lost_object_is_made_again_and_one_there_is_left(case: Case) -> None:
    life, server = lifecycle(case)
    first = own(life, case)
    lost = server.objects.pop((life.kind.plural, "ns", case.name))  # kubectl delete
    life.book.event("DELETED", lost)
    life.again(KEY, case.name, lambda: own(life, case))
    again = life.book.by_name[("ns", case.name)]
    assert again.found.uid != first.found.uid and again.found.owner_uid == JOB[3]
    life.again(KEY, case.name, lambda: pytest.fail("there: not made again"))
    server.refuse["create"] = (500, "etcd timeout")  # lost again, and the create fails
    life.book.event("DELETED", server.objects.pop((life.kind.plural, "ns", case.name)))
    life.again(KEY, case.name, lambda: own(life, case))  # logged, asked again later
    assert ("ns", case.name) not in life.book.by_name


@pytest.mark.parametrize("case", CASES)
def test_deleted_after_the_last_member_its_finalizer_off_first(case: Case) -> None:
    life, server = lifecycle(case)
    own(life, case)
    assert life.sweep({KEY}) == [] and [v for v, _ in server.calls] == ["create"]
    gone = life.sweep(set())
    assert [r.name for r in gone] == [case.name]
    assert (life.kind.plural, "ns", case.name) not in server.objects
    verbs = [v for v, _ in server.calls][1:]
    assert verbs == (["patch", "delete"] if life.kind.finalizer else ["delete"])
    assert life.book.by_name[("ns", case.name)].found.deleting
    life.sweep(set())  # until the watch says it is gone: not deleted twice
    assert [v for v, _ in server.calls][1:] == verbs


@pytest.mark.parametrize("case", CASES)
def test_one_being_deleted_is_let_go_only_where_none_of_the_group_uses_it(case: Case) -> None:
    """The members' controller deleted and made again: the garbage collector deletes the
    object; a finalizer holds it (the placer's on a ComputeDomain, kube-controller-manager's
    podgroup-protection on a PodGroup)."""
    life, server = lifecycle(case)
    own(life, case)
    held = stored(life, server, case.name)
    held["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    life.book.event("MODIFIED", held)
    life.sweep({KEY}, in_use=lambda _: True)  # its members still run under it
    assert server.calls == [("create", case.name)]
    life.sweep({KEY}, in_use=lambda _: False)
    if life.kind.finalizer:  # released: gone, made anew for the next members once the watch says
        assert server.calls[-1][0] == "patch" and not server.objects
        assert "is being deleted" in own(life, case)
    else:  # a PodGroup serves while deleted: neither waited for nor made anew
        assert len(server.calls) == 1 and not isinstance(own(life, case), str)


@pytest.mark.parametrize("case", CASES)
def test_a_sweep_told_what_changed_looks_there_and_at_what_it_left(case: Case) -> None:
    """A sweep given the groups whose pods changed looks at their objects, at those whose
    object changed and at those it left, not at every object of the kind (8,192 PodGroups: 20
    ms a tick); a delete that failed is asked again at the next sweep, told of nothing."""
    life, server = lifecycle(case)
    own(life, case)
    assert life.sweep({KEY}, changed=()) == []  # the first after the kind's list: every one
    assert life.sweep(set(), changed=()) == []  # its group gone, but not said: not looked at
    assert [v for v, _ in server.calls] == ["create"]
    server.refuse["delete"] = (500, "etcd timeout")  # answered once
    gone = life.sweep(set(), changed={KEY})
    assert [r.name for r in gone] == [case.name]
    assert not life.book.by_name[("ns", case.name)].found.deleting
    assert [r.name for r in life.sweep(set(), changed=())] == [case.name]  # asked again
    assert life.book.by_name[("ns", case.name)].found.deleting
    assert [v for v, _ in server.calls].count("delete") == 2


# -- one error mapping for every kind --------------------------------------------------------------
FORBIDDEN = 'is forbidden: User "system:serviceaccount:gpufabric-system:gpufabric-webhook"'
VAP = "is forbidden: ValidatingAdmissionPolicy 'x' with binding 'x' denied request: no"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    ("verb", "code", "message"),
    [
        ("create", 403, FORBIDDEN),  # RBAC
        ("create", 404, 'namespaces "ns" not found'),  # its namespace is gone
        ("create", 422, VAP),  # a ValidatingAdmissionPolicy (422, though it says forbidden)
        ("patch", 403, FORBIDDEN),
        ("patch", 404, "not found"),  # gone since it was listed
        ("patch", 409, "Precondition failed: UID in precondition"),  # made again since
        ("patch", 422, "Invalid value"),
    ],
)
def test_a_refusal_is_rejected_with_the_api_servers_words(
    case: Case, verb: str, code: int, message: str
) -> None:
    life, server = lifecycle(case)
    if verb == "patch":  # an adoption
        server.create_namespaced_custom_object("", "", "ns", life.kind.plural, case.body(EARLIER))
        life.book.listed([stored(life, server, case.name)])
    server.refuse[verb] = (code, message)
    with pytest.raises(Rejected) as refused:
        own(life, case)
    err = refused.value
    assert (err.write, err.code) == (f"{life.kind.plural}/{verb}", code)
    assert message in err.message and not err.message.startswith("HTTP")
    kind = life.kind.kind
    what = f"create of {kind} ns/{case.name}" if verb == "create" else f"adoption of {kind}"
    assert err.what.startswith(what)


@pytest.mark.parametrize("case", CASES)
def test_a_server_error_is_raised_as_it_is_and_a_gone_delete_is_done(case: Case) -> None:
    life, server = lifecycle(case)
    server.refuse["create"] = (500, "etcd timeout")
    with pytest.raises(ApiException) as failed:
        own(life, case)
    assert failed.value.status == 500  # logged by the placer, asked again at the next reconcile
    made = own(life, case)
    server.objects.clear()  # gone (404) meanwhile, then another of the name (409): both done
    kube = life.api
    assert isinstance(kube, KubeOwnedApi)
    kube.delete_owned("ns", case.name, made.found.uid, life.book.version)
    server.create_namespaced_custom_object("", "", "ns", life.kind.plural, case.body(JOB))
    kube.delete_owned("ns", case.name, made.found.uid, life.book.version)
    server.refuse["delete"] = (403, FORBIDDEN)
    with pytest.raises(Rejected):
        kube.delete_owned("ns", case.name, "uid-2", life.book.version)


def test_a_finalizer_is_released_only_while_it_is_there_on_that_object() -> None:
    case = CASES[1].values[0]
    assert isinstance(case, Case)
    life, server = lifecycle(case)
    made = own(life, case)
    kube = life.api
    assert isinstance(kube, KubeOwnedApi)
    with pytest.raises(Rejected) as refused:  # another object of the name now: the test fails
        kube.release_owned("ns", "g", "uid-other", "v1beta1", 0)
    assert refused.value.code == 422
    assert stored(life, server, "g")["metadata"]["finalizers"] == [FINALIZER]
    kube.release_owned("ns", "g", made.found.uid, "v1beta1", 0)
    assert stored(life, server, "g")["metadata"]["finalizers"] == []
    server.objects.clear()
    kube.release_owned("ns", "g", made.found.uid, "v1beta1", 0)  # gone (404): done


# -- made before the group is ungated, by the placer, both kinds ----------------------------------
def gang_world() -> tuple[Callable[[int], None], Callable[[], tuple[int, int]]]:
    """(add member i, (members ungated when the PodGroup was made, members ungated now))"""
    api, placer = native_placer()

    def add(i: int) -> None:
        gang_arrive(api, placer, admitted(gang_member("g", i, 2), native=True))

    def seen() -> tuple[int, int]:
        verbs = [verb for verb, _ in api.log]
        return verbs[: verbs.index("podgroup")].count("patch"), len(api.patches)

    return add, seen


def imex_world() -> tuple[Callable[[int], None], Callable[[], tuple[int, int]]]:
    api, domains, placer = imex_setup(racks_under_leaves(1))

    def add(i: int) -> None:
        imex_arrive(api, placer, [imex_member(i, 2)])

    def seen() -> tuple[int, int]:
        ((verb, _, patched),) = domains.log
        assert verb == "create"
        return patched, len(api.patches)

    return add, seen


@pytest.mark.parametrize("world", [gang_world, imex_world], ids=["PodGroup", "ComputeDomain"])
def test_the_object_is_made_before_the_first_member_is_ungated(
    world: Callable[[], tuple[Callable[[int], None], Callable[[], tuple[int, int]]]],
) -> None:
    add, seen = world()
    add(0)
    add(1)
    assert seen() == (0, 2)

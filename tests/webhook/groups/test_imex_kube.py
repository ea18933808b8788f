"""KubeOwnedApi (the ComputeDomain kind) against both ComputeDomain CRDs in use: the driver from v0.4.0 (numNodes optional,
default 0) takes the object without numNodes; v25.3-v25.12 require numNodes, refuse it with 422
as kube-apiserver does, and get numNodes = the group's node count on a second try (and on every
later create)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.webhook.groups.imex_world import CRD, CRD_V25, problems
from webhook.groups.extensions.imex.domains import compute_domain
from webhook.groups.extensions.imex.names import (
    COMPUTE_DOMAINS,
    FINALIZER,
    NODE_LABEL,
    TEMPLATE_TARGET,
)
from webhook.groups.extensions.imex.templates import Templates
from webhook.groups.framework.owned import adoption
from webhook.groups.framework.ownedkube import KubeOwnedApi
from webhook.groups.framework.refusals import Rejected


class Server:
    """create_namespaced_custom_object of an API server serving one CRD version."""

    def __init__(self, crd: str) -> None:
        self.crd, self.sent = crd, list[dict[str, Any]]()

    def create_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, body: Any, **kw: Any
    ) -> Any:
        self.sent.append(body)
        wrong = problems(body, self.crd)
        if wrong:
            name = body["metadata"]["name"]
            status = {
                "kind": "Status",
                "status": "Failure",
                "reason": "Invalid",
                "code": 422,
                "message": f'ComputeDomain.resource.nvidia.com "{name}" is invalid: {wrong}',
            }
            err = ApiException(status=422, reason="Unprocessable Entity")
            err.body = json.dumps(status)
            raise err
        return {**body, "metadata": {**body["metadata"], "uid": f"uid-{len(self.sent)}"}}


def api(crd: str) -> tuple[KubeOwnedApi, Server]:
    kube = KubeOwnedApi(client.ApiClient(), COMPUTE_DOMAINS)
    server = Server(crd)
    kube.objects = server  # type: ignore[assignment]
    return kube, server


def test_a_driver_from_v0_4_takes_the_compute_domain_without_num_nodes() -> None:
    kube, server = api(CRD)
    made = kube.create_owned("team-a", compute_domain("team-a", "moe", None, 8))
    assert made["metadata"]["uid"] == "uid-1" and len(server.sent) == 1
    assert "numNodes" not in server.sent[0]["spec"]


def test_a_driver_that_requires_num_nodes_gets_the_groups_node_count_from_the_second_try() -> None:
    # v25.3 (and v25.8+ with IMEXDaemonsWithDNSNames=false): the IMEX daemons wait for numNodes
    # peers, so 0 would never form the IMEX domain; the group's node count does.
    kube, server = api(CRD_V25)
    kube.create_owned("team-a", compute_domain("team-a", "moe", None, 8))
    assert [b["spec"].get("numNodes") for b in server.sent] == [None, 8]
    assert problems(server.sent[1], CRD_V25) == []
    kube.create_owned("team-a", compute_domain("team-a", "other", None, 3))
    assert len(server.sent) == 3 and server.sent[2]["spec"]["numNodes"] == 3


def test_any_other_refusal_is_rejected_for_the_next_reconcile() -> None:
    kube, server = api(CRD)
    body = compute_domain("team-a", "moe", None)
    body["spec"] = {"channel": {}}  # no template: 422 without numNodes in it
    with pytest.raises(Rejected) as refused:
        kube.create_owned("team-a", body)
    assert len(server.sent) == 1
    err = refused.value  # what the placer logs and tells: the API server's words
    assert (err.write, err.code) == ("computedomains/create", 422)
    assert err.what == "create of ComputeDomain team-a/moe"
    assert err.message and not err.message.startswith("HTTP")


class Patches:
    """patch_namespaced_custom_object as kube-apiserver answers a JSON patch: a failed test 422."""

    def __init__(self, finalizers: list[str], uid: str = "uid-1") -> None:
        self.obj = {"metadata": {"uid": uid, "finalizers": finalizers}}
        self.sent: list[tuple[Any, str]] = []

    def patch_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: Any, **kw: Any
    ) -> Any:
        self.sent.append((body, kw["_content_type"]))
        for op in body:
            keys = op["path"].strip("/").split("/")
            at: Any = self.obj
            for k in keys[:-1]:
                at = at[k]
            last: Any = int(keys[-1]) if isinstance(at, list) else keys[-1]
            if op["op"] == "test" and (
                (isinstance(at, list) and last >= len(at)) or at[last] != op["value"]
            ):
                raise ApiException(status=422, reason="the test failed")
            if op["op"] == "remove":
                del at[last]
        return self.obj


def test_the_finalizer_is_removed_only_where_it_still_is_on_that_object() -> None:
    kube = KubeOwnedApi(client.ApiClient(), COMPUTE_DOMAINS)
    server = Patches(["resource.nvidia.com/computeDomain", FINALIZER])
    kube.objects = server  # type: ignore[assignment]
    kube.release_owned("team-a", "moe", "uid-1", "v1beta1", 1)
    assert server.obj["metadata"]["finalizers"] == ["resource.nvidia.com/computeDomain"]
    assert server.sent[0][1] == "application/json-patch+json"
    with pytest.raises(Rejected):  # moved (the driver removed its own first): asked again later
        kube.release_owned("team-a", "moe", "uid-1", "v1beta1", 1)
    server = Patches([FINALIZER], uid="uid-2")  # another object of the name now
    kube.objects = server  # type: ignore[assignment]
    with pytest.raises(Rejected):
        kube.release_owned("team-a", "moe", "uid-1", "v1beta1", 0)
    assert server.obj["metadata"]["finalizers"] == [FINALIZER]


def test_templates_count_only_the_controllers_for_that_compute_domain() -> None:
    book = Templates()
    assert not book.ready("team-a", "moe-imex-channel", "cd-1")  # not listed yet
    made = {"metadata": {"namespace": "team-a", "name": "moe-imex-channel"}}
    made["metadata"]["labels"] = {NODE_LABEL: "cd-1", TEMPLATE_TARGET: "Workload"}
    book.listed([made])
    assert book.ready("team-a", "moe-imex-channel", "cd-1")
    assert not book.ready("team-a", "moe-imex-channel", "cd-2")  # an earlier one's
    book.event("MODIFIED", {**made, "metadata": {**made["metadata"], "deletionTimestamp": "t"}})
    assert not book.ready("team-a", "moe-imex-channel", "cd-1")  # going with its domain
    book.event("ADDED", made)
    book.event("DELETED", made)
    assert book.of == {}
    book.set_served(False)  # resource.k8s.io/v1 not served: nothing to wait for
    assert book.ready("team-a", "moe-imex-channel", "")


class MergePatches:
    """patch_namespaced_custom_object as kube-apiserver answers a merge patch that names
    metadata.uid: 409 Conflict where the object of the name is another one now."""

    def __init__(self, uid: str) -> None:
        self.uid, self.sent = uid, list[tuple[Any, str]]()

    def patch_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: Any, **kw: Any
    ) -> Any:
        self.sent.append((body, kw["_content_type"]))
        if body["metadata"]["uid"] != self.uid:
            status = {"kind": "Status", "code": 409, "reason": "Conflict", "message": "uid"}
            err = ApiException(status=409, reason="Conflict")
            err.body = json.dumps(status)
            raise err
        return {"metadata": {"name": name, **body["metadata"]}}


def test_an_adoption_is_a_merge_patch_of_that_object_only() -> None:
    kube = KubeOwnedApi(client.ApiClient(), COMPUTE_DOMAINS)
    server = MergePatches("uid-1")
    kube.objects = server  # type: ignore[assignment]
    job = ("batch/v1", "Job", "train", "uid-job")
    patched = kube.patch_owned("team-a", "moe", "v1beta1", adoption("uid-1", job))
    assert patched["metadata"]["ownerReferences"][0]["uid"] == "uid-job"
    assert server.sent[0][1] == "application/merge-patch+json"
    with pytest.raises(Rejected) as refused:  # made again since: asked again later
        kube.patch_owned("team-a", "moe", "v1beta1", adoption("uid-0", job))
    err = refused.value
    assert (err.write, err.code) == ("computedomains/patch", 409)
    assert err.what == "adoption of ComputeDomain team-a/moe"

"""KubeDomainApi against both ComputeDomain CRDs in use: the driver from v0.4.0 (numNodes optional,
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
from webhook.groups.imex.domains import compute_domain
from webhook.groups.imex.kube import KubeDomainApi
from webhook.groups.placer import Rejected


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


def api(crd: str) -> tuple[KubeDomainApi, Server]:
    kube = KubeDomainApi(client.ApiClient())
    server = Server(crd)
    kube.objects = server  # type: ignore[assignment]
    return kube, server


def test_a_driver_from_v0_4_takes_the_compute_domain_without_num_nodes() -> None:
    kube, server = api(CRD)
    made = kube.create_domain("team-a", compute_domain("team-a", "moe", None), 8)
    assert made["metadata"]["uid"] == "uid-1" and len(server.sent) == 1
    assert "numNodes" not in server.sent[0]["spec"]


def test_a_driver_that_requires_num_nodes_gets_the_groups_node_count_from_the_second_try() -> None:
    # v25.3 (and v25.8+ with IMEXDaemonsWithDNSNames=false): the IMEX daemons wait for numNodes
    # peers, so 0 would never form the IMEX domain; the group's node count does.
    kube, server = api(CRD_V25)
    kube.create_domain("team-a", compute_domain("team-a", "moe", None), 8)
    assert [b["spec"].get("numNodes") for b in server.sent] == [None, 8]
    assert problems(server.sent[1], CRD_V25) == []
    kube.create_domain("team-a", compute_domain("team-a", "other", None), 3)
    assert len(server.sent) == 3 and server.sent[2]["spec"]["numNodes"] == 3


def test_any_other_refusal_is_rejected_for_the_next_reconcile() -> None:
    kube, server = api(CRD)
    body = compute_domain("team-a", "moe", None)
    body["spec"] = {"channel": {}}  # no template: 422 without numNodes in it
    with pytest.raises(Rejected):
        kube.create_domain("team-a", body, 2)
    assert len(server.sent) == 1

"""The ComputeDomain watch and the NVLink domain sizes as serve wires them for admission: a cluster
without the driver (HTTP 404) is known as such and asked again later, without a failing watch; a
list that answers makes it served; the Node feed counts the nodes of each NVLink domain."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.nvl72 import domain, racks_under_leaves
from webhook.fleet.cache import FabricCache
from webhook.groups.extensions.imex.domains import Book
from webhook.groups.extensions.imex.inject import ImexState
from webhook.groups.extensions.imex.names import COMPUTE_DOMAINS
from webhook.groups.extensions.imex.nodes import DomainSizes
from webhook.groups.framework import ownedkube
from webhook.kube.watch import Gone, Obj, one_page
from webhook.server.metrics import WebhookMetrics
from webhook.wiring import Serving, add_cache_watches, add_imex_watch

CD = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "moe", "namespace": "team-a", "uid": "cd-1", "resourceVersion": "7"},
    "spec": {"channel": {"resourceClaimTemplate": {"name": "moe-imex-channel"}}},
}


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


class FakeObjects:
    """CustomObjectsApi's list call: 404 while `served` is False, else one page of `items`."""

    served = False
    items: list[dict[str, Any]] = []

    def __init__(self, api_client: Any = None) -> None:
        pass

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
        assert (group, version, plural) == ("resource.nvidia.com", "v1beta1", "computedomains")
        if not FakeObjects.served:
            raise ApiException(status=404, reason="Not Found")
        return Response({"metadata": {"resourceVersion": "9"}, "items": FakeObjects.items})


def test_a_cluster_without_the_driver_is_unserved_then_served_once_it_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)  # as ownedkube.py calls it
    monkeypatch.setattr(FakeObjects, "served", False)
    monkeypatch.setattr(FakeObjects, "items", [])
    said: list[str] = []
    lister, watcher = ownedkube.owned_list_watch(
        client.ApiClient(), COMPUTE_DOMAINS, said.append, recheck=0
    )
    pages = list(lister())
    assert [p.items for p in pages] == [[]] and said == [""]
    with pytest.raises(Gone):  # asked again after `recheck`, as a relist: no failing watch
        list(watcher(""))
    FakeObjects.served, FakeObjects.items = True, [CD]
    pages = list(lister())
    assert [p.items for p in pages] == [[CD]] and said == ["", "v1beta1"]


def test_serve_feeds_admission_the_domains_and_the_nvlink_domain_sizes() -> None:
    s = Serving(argparse.Namespace(), None, FabricCache(), WebhookMetrics())
    add_cache_watches(s)
    sizes = DomainSizes()
    state = ImexState(Book(), sizes.largest)
    add_imex_watch(s, state, sizes)
    watch = next(w for w in s.watches if w.name == "computedomains")
    one_page(watch.on_list, [CD])
    assert state.book.served and state.book.declaring("team-a", ["moe-imex-channel"])
    watch.on_event("DELETED", CD)
    assert state.book.declaring("team-a", ["moe-imex-channel"]) is None
    nodes = racks_under_leaves(2)
    nodes[0]["metadata"]["labels"].pop("gpufabric.io/nvlink-domain")  # a tray still forming
    one_page(s.nodes, list[Obj](nodes))
    assert state.largest_domain_nodes() == 18 and sizes.count[domain(0)] == 17
    for n in nodes[18:27]:
        s.nodes.event("DELETED", n)
    assert state.largest_domain_nodes() == 17 and sizes.count[domain(1)] == 9

"""The PodGroup watch as serve wires it: a cluster that does not serve PodGroups (HTTP 404) is
known as such and asked again later, without a failing watch; once the list answers, admission
names each member's PodGroup."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.webhook.groups.burst_world import member
from webhook.fleet.cache import FabricCache
from webhook.groups.admit import admit_group
from webhook.groups.gang import kube
from webhook.groups.gang.podgroups import Book
from webhook.groups.spines import SpineSizes
from webhook.kube.watch import Gone, listed
from webhook.serve import admission_settings
from webhook.server.metrics import WebhookMetrics
from webhook.wiring import Serving, add_gang_watch

OURS = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {
        "name": "gpufabric-g",
        "namespace": "burst",
        "uid": "pg-1",
        "labels": {"gpufabric.io/group": "g", "app.kubernetes.io/managed-by": "gpufabric-placer"},
    },
    "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
}


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body).encode()


class FakeObjects:
    """CustomObjectsApi's list call: 404 while `served` is False, else one page of `items`."""

    served = False
    items: list[dict[str, Any]] = []
    asked: list[str] = []

    def __init__(self, api_client: Any = None) -> None:
        pass

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
        assert (group, version, plural) == ("scheduling.k8s.io", "v1alpha2", "podgroups")
        FakeObjects.asked.append(kw.get("label_selector", ""))
        if not FakeObjects.served:
            raise ApiException(status=404, reason="Not Found")
        return Response({"metadata": {"resourceVersion": "9"}, "items": FakeObjects.items})


def test_podgroups_unserved_then_served_reach_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)  # as gang/kube.py calls it
    monkeypatch.setattr(FakeObjects, "served", False)
    monkeypatch.setattr(FakeObjects, "items", [])
    monkeypatch.setattr(FakeObjects, "asked", [])
    monkeypatch.setattr(kube, "RECHECK", 0.0)
    s = Serving(argparse.Namespace(), client.ApiClient(), FabricCache(), WebhookMetrics())
    book = Book()
    add_gang_watch(s, book)
    (watch,) = s.watches
    args = argparse.Namespace(inject_nccl_tuning=False, no_nccl_ib_hca=False, placer=True)
    settings = admission_settings(args, None, FabricCache(), SpineSizes(), None, book)
    assert settings.native_gang is not None

    def names_podgroup() -> bool:
        ops = admit_group(member("g", 0, 4), "CREATE", native_gang=settings.native_gang()).ops
        return any(o["path"].startswith("/spec/schedulingGroup") for o in ops)

    assert book.served is None and not names_podgroup()  # not known yet: nothing named
    listed(watch.lister, watch.on_list)
    assert book.served is False and not names_podgroup()
    with pytest.raises(Gone):  # asked again after RECHECK, as a relist: no failing watch
        list(watch.watcher(""))
    FakeObjects.served, FakeObjects.items = True, [OURS]
    listed(watch.lister, watch.on_list)
    assert book.served is True and names_podgroup()
    assert list(book.by_name) == [("burst", "gpufabric-g")]
    assert set(FakeObjects.asked) == {"app.kubernetes.io/managed-by=gpufabric-placer"}


def test_the_podgroup_watch_asks_only_for_ours_and_knows_an_unserved_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook.kube.watch import Gone

    asked: list[dict[str, Any]] = []
    state = {"served": False}
    pg = {"metadata": {"name": "gpufabric-train", "namespace": "team-a", "uid": "pg-1"}}

    class Response:
        data = json.dumps({"metadata": {"resourceVersion": "9"}, "items": [pg]}).encode()

    class FakeObjects:
        def __init__(self, api_client: Any = None) -> None:
            pass

        def list_cluster_custom_object(self, *kind: str, **kw: Any) -> Any:
            asked.append({"kind": kind, "labelSelector": kw.get("label_selector")})
            if not state["served"]:
                raise ApiException(status=404, reason="Not Found")
            return Response()

    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)
    said: list[bool] = []
    lister, watcher = kube.podgroup_list_watch(client.ApiClient(), said.append, recheck=0)
    assert [p.items for p in lister()] == [[]] and said == [False]
    with pytest.raises(Gone):  # a relist after `recheck`: no failing watch
        list(watcher(""))
    state["served"] = True
    assert [p.items for p in lister()] == [[pg]] and said == [False, True]
    assert asked[0] == {
        "kind": ("scheduling.k8s.io", "v1alpha2", "podgroups"),
        "labelSelector": "app.kubernetes.io/managed-by=gpufabric-placer",
    }

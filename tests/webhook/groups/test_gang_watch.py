"""The PodGroup watch as serve wires it: a cluster that does not serve PodGroups (HTTP 404 from
every version) is known as such and asked again later, without a failing watch; once a list
answers, in the newest version served (1.37: v1beta1, 1.36: v1alpha2), admission names each
member's PodGroup; before any list answered, it asks members to retry."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.webhook.groups.burst_world import member
from webhook.fleet.cache import FabricCache
from webhook.groups.admission.admit import admit_group
from webhook.groups.admission.spines import SpineSizes
from webhook.groups.extensions.gang.names import PODGROUPS
from webhook.groups.extensions.gang.podgroups import Book
from webhook.groups.framework import ownedkube
from webhook.groups.framework.ownedkube import KubeOwnedApi
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
    """CustomObjectsApi's list call: one page of `items` in the version `served`, 404 in any
    other ("": none)."""

    served = ""
    items: list[dict[str, Any]] = []
    asked: list[str] = []

    def __init__(self, api_client: Any = None) -> None:
        pass

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
        assert (group, plural) == ("scheduling.k8s.io", "podgroups")
        FakeObjects.asked.append(f"{version} {kw.get('label_selector', '')}")
        if version != FakeObjects.served:
            raise ApiException(status=404, reason="Not Found")
        return Response({"metadata": {"resourceVersion": "9"}, "items": FakeObjects.items})


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"], ids=["1.36", "1.37"])
def test_podgroups_unserved_then_served_reach_admission(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)  # as ownedkube.py calls it
    monkeypatch.setattr(FakeObjects, "served", "")
    monkeypatch.setattr(FakeObjects, "items", [])
    monkeypatch.setattr(FakeObjects, "asked", [])
    monkeypatch.setattr(ownedkube, "RECHECK", 0.0)
    s = Serving(argparse.Namespace(), client.ApiClient(), FabricCache(), WebhookMetrics())
    book = Book()
    add_gang_watch(s, book)
    (watch,) = s.watches
    args = argparse.Namespace(inject_nccl_tuning=False, no_nccl_ib_hca=False, placer=True)
    settings = admission_settings(args, None, FabricCache(), SpineSizes(), None, book)
    assert settings.native_gang is not None

    def admitted() -> tuple[bool, str]:
        """(whether the member names its PodGroup, why it must retry)"""
        assert settings.native_gang is not None
        a = admit_group(member("g", 0, 4), "CREATE", native_gang=settings.native_gang())
        return any(o["path"].startswith("/spec/schedulingGroup") for o in a.ops), a.retry

    named, retry = admitted()  # not known yet: nothing decided, the client comes again
    assert book.served is None and not named and "retry in a few seconds" in retry
    listed(watch.lister, watch.on_list)  # 404 from every version: an empty list, unserved
    assert book.served is False and not book.by_name and admitted() == (False, "")
    with pytest.raises(Gone):  # asked again after RECHECK, as a relist: no failing watch
        list(watch.watcher(""))
    FakeObjects.served, FakeObjects.items = version, [OURS | {"apiVersion": version}]
    FakeObjects.asked = []
    listed(watch.lister, watch.on_list)
    assert book.served is True and book.version == version and admitted() == (True, "")
    assert list(book.by_name) == [("burst", "gpufabric-g")]
    tried = ["v1beta1"] if version == "v1beta1" else ["v1beta1", "v1alpha2"]  # newest first
    assert FakeObjects.asked == [
        f"{v} app.kubernetes.io/managed-by=gpufabric-placer" for v in tried
    ]


def test_the_placers_podgroup_writes_as_the_api_server_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A create of a name that exists (409) reads that object back for the placer to judge;
    a refusal (4xx) is the placer's Rejected with the API server's words; a patch is a merge
    patch in the version served."""
    from webhook.groups.framework.refusals import Rejected

    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    theirs = {"metadata": {"name": "gpufabric-g", "namespace": "ns", "uid": "users"}}

    class FakeObjects:
        def __init__(self, api_client: Any = None) -> None:
            pass

        def create_namespaced_custom_object(self, *args: Any, **kw: Any) -> Any:
            calls.append(("create", args, kw))
            if args[3] == "podgroups" and args[2] == "taken":
                raise ApiException(status=409, reason="Conflict")
            refused = ApiException(status=422, reason="Unprocessable Entity")
            refused.body = json.dumps({"message": "spec.schedulingPolicy: Required value"})
            raise refused

        def get_namespaced_custom_object(self, *args: Any, **kw: Any) -> Any:
            calls.append(("get", args, kw))
            return theirs

        def patch_namespaced_custom_object(self, *args: Any, **kw: Any) -> Any:
            calls.append(("patch", args, kw))
            return {"metadata": {"name": args[4]}}

    monkeypatch.setattr(client, "CustomObjectsApi", FakeObjects)

    api = KubeOwnedApi(client.ApiClient(), PODGROUPS)
    body = {"apiVersion": "scheduling.k8s.io/v1beta1", "metadata": {"name": "gpufabric-g"}}
    assert api.create_owned("taken", body) == theirs
    assert calls[-1][1] == ("scheduling.k8s.io", "v1beta1", "taken", "podgroups", "gpufabric-g")
    with pytest.raises(Rejected) as refused:
        api.create_owned("ns", body)
    assert refused.value.code == 422 and "Required value" in refused.value.message
    api.patch_owned("ns", "gpufabric-g", "v1alpha2", {"metadata": {"uid": "u"}})
    _, args, kw = calls[-1]
    assert args[:5] == ("scheduling.k8s.io", "v1alpha2", "ns", "podgroups", "gpufabric-g")
    assert kw["_content_type"] == "application/merge-patch+json"

"""The NoNVLinkDomain Event as it goes to the API server: where `kubectl describe node` finds it
(namespace default, involvedObject kind Node with the node's name as uid, as the kubelet writes)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from webhook.labeler.kube import KubeNodeApi


class Sent(Exception):
    pass


class Recording(client.ApiClient):  # type: ignore[misc]
    """Stops at the HTTP call, keeping what would have been sent."""

    def __init__(self) -> None:
        super().__init__(client.Configuration(host="https://api.test"))
        self.calls: list[tuple[str, str, Any]] = []

    def call_api(
        self, method: str, url: str, header_params: Any = None, body: Any = None, *_: Any, **__: Any
    ) -> Any:
        self.calls.append((method, url, body))
        raise Sent


def test_event_on_the_node_in_namespace_default() -> None:
    api = Recording()
    with pytest.raises(Sent):
        KubeNodeApi(api).event("nvl00-c01", "NoNVLinkDomain", "no gpufabric.io/nvlink-domain label")
    ((method, url, body),) = api.calls
    assert (method, url) == ("POST", "https://api.test/api/v1/namespaces/default/events")
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "nvl00-c01",
        "uid": "nvl00-c01",
    }
    assert body["metadata"]["namespace"] == "default"
    assert (body["type"], body["reason"]) == ("Warning", "NoNVLinkDomain")
    assert body["source"] == {"component": "gpufabric-labeler"}

"""The labeler's refused label applies (webhook/labeler/kube.py): a node deleted before its labels
were applied is a node gone, said at INFO, not a refusal; a real refusal is one line with the API
server's own words, never the HTTP headers an ApiException prints. Seen in the e2e tier: every
node deleted while a topology change was being applied logged a WARNING with headers."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.webhook.labeler.test_labeler import H100, status
from tests.webhook.node_fakes import NodeServer
from webhook.labeler.kube import KubeNodeApi
from webhook.labeler.nodes import Labeler, LabelRejected, NodeGone

FORBIDDEN = {
    "kind": "Status",
    "message": 'nodes "gpu-1" is forbidden: User "system:serviceaccount:gpufabric-system:'
    'gpufabric-webhook" cannot create resource "nodes" in API group "" at the cluster scope',
}


def refusal(code: int, body: dict[str, Any]) -> ApiException:
    err = ApiException(status=code, reason="Forbidden")
    err.body = json.dumps(body)
    err.headers = {"Audit-Id": "0000", "Content-Type": "application/json"}
    return err


class Refusing:
    """The Node resource whose apply the API server refuses with `err`."""

    def __init__(self, err: ApiException) -> None:
        self.err = err

    def server_side_apply(self, **_: Any) -> None:
        raise self.err


class NodeGets(client.ApiClient):  # type: ignore[misc]
    """Answers GET of a node: 404 when `exists` is False, else the node."""

    def __init__(self, exists: bool) -> None:
        super().__init__(client.Configuration(host="https://api.test"))
        self.exists = exists

    def call_api(self, method: str, url: str, *_: Any, **__: Any) -> Any:
        assert (method, url) == ("GET", "https://api.test/api/v1/nodes/gpu-1")
        if not self.exists:
            raise ApiException(status=404, reason="Not Found")
        return client.V1Node(metadata=client.V1ObjectMeta(name="gpu-1"))


def api(exists: bool, err: ApiException) -> KubeNodeApi:
    made = KubeNodeApi(NodeGets(exists))
    made._nodes = Refusing(err)  # no discovery: the resource is the refusing one
    return made


@pytest.mark.parametrize("code", [403, 404])
def test_a_node_deleted_before_the_apply_is_gone_not_refused(code: int) -> None:
    with pytest.raises(NodeGone):
        api(False, refusal(code, FORBIDDEN)).apply_labels("gpu-1", {"gpufabric.io/leaf": "a"})


def test_a_refusal_of_an_existing_node_says_the_api_servers_words_on_one_line() -> None:
    with pytest.raises(LabelRejected) as refused:
        api(True, refusal(403, FORBIDDEN)).apply_labels("gpu-1", {"gpufabric.io/leaf": "a"})
    assert not isinstance(refused.value, NodeGone)
    assert str(refused.value) == f"gpu-1: HTTP 403: {FORBIDDEN['message']}"


def test_an_invalid_label_is_refused_without_asking_whether_the_node_exists() -> None:
    invalid = {"kind": "Status", "message": 'Node "gpu-1" is invalid: metadata.labels: Invalid'}
    with pytest.raises(LabelRejected) as refused:
        # NodeGets(False) would make it "gone" if it were asked: 422 never asks.
        api(False, refusal(422, invalid)).apply_labels("gpu-1", {"gpufabric.io/leaf": "a b"})
    assert not isinstance(refused.value, NodeGone)
    assert "Invalid" in str(refused.value) and "Audit-Id" not in str(refused.value)


def test_the_labeler_says_a_gone_node_at_info_and_counts_it_no_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = NodeServer({"gpu-1": {}})
    outcomes: list[str] = []
    labeler = Labeler(server, extra=lambda n: {"gpufabric.io/leaf": "a"}, observe=outcomes.append)
    labeler.statuses_listed([status("gpu-1", H100)])
    labeler.nodes_listed(server.list_objects())
    del server.nodes["gpu-1"]  # deleted before the labeler's apply; its watch event not yet in
    labeler.resync_all()
    with caplog.at_level(logging.INFO, logger="webhook.labeler.nodes"):
        labeler.drain()
    assert outcomes == ["no-node"]
    gone = [
        r for r in caplog.records if r.getMessage() == "node gone before its labels were applied"
    ]
    assert [r.levelno for r in gone] == [logging.INFO]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

"""The labeler against a recorded sequence of watch events, including a 410 Gone relist."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from tests.webhook.helpers import golden_statuses
from webhook.labeler import Labeler
from webhook.watch import Gone, ListWatch

STATUSES = dict(golden_statuses())


class FakeNodes:
    """Behaves like SSA with one field manager: applying a set replaces what that manager owned."""

    def __init__(self, nodes: dict[str, dict[str, str]]) -> None:
        self.labels = nodes
        self.owned: dict[str, set[str]] = {n: set() for n in nodes}
        self.applies: list[tuple[str, dict[str, str]]] = []

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        return self.labels.get(name)

    def apply_labels(self, name: str, labels: Mapping[str, str]) -> None:
        self.applies.append((name, dict(labels)))
        current = self.labels[name]
        for key in self.owned[name] - set(labels):
            current.pop(key, None)
        current.update(labels)
        self.owned[name] = set(labels)


def obj(name: str, status: dict[str, Any] | None, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "status": status}


def test_labeler_follows_add_modify_delete_and_leaves_other_labels() -> None:
    nodes = FakeNodes({"gpu-1": {"kubernetes.io/hostname": "gpu-1", "team": "a"}})
    labeler = Labeler(nodes)
    h100 = STATUSES["hgx-h100"]
    degraded = STATUSES["hgx-roce-degraded"]
    assert labeler.handle({"type": "ADDED", "object": obj("gpu-1", h100, "1")}) == "applied"
    assert (
        nodes.labels["gpu-1"]["gpufabric.io/rdma-ports"] == "8"
    )  # eight rails; the 100G front-end port does not count
    assert labeler.handle({"type": "MODIFIED", "object": obj("gpu-1", h100, "2")}) == "unchanged"
    assert labeler.handle({"type": "MODIFIED", "object": obj("gpu-1", degraded, "3")}) == "applied"
    assert nodes.labels["gpu-1"]["gpufabric.io/fabric-health"] == "degraded"
    assert labeler.handle({"type": "DELETED", "object": obj("gpu-1", degraded, "4")}) == "removed"
    assert nodes.labels["gpu-1"] == {"kubernetes.io/hostname": "gpu-1", "team": "a"}
    assert labeler.handle({"type": "BOOKMARK", "object": obj("gpu-1", None, "5")}) == "ignored"
    assert labeler.handle({"type": "ADDED", "object": obj("ghost", h100, "6")}) == "no-node"
    assert len(nodes.applies) == 3


def test_list_watch_relists_after_410_and_resumes_from_resource_version() -> None:
    nodes = FakeNodes({"gpu-1": {}, "gpu-2": {}})
    labeler = Labeler(nodes)
    stop = threading.Event()
    lists = [
        ([obj("gpu-1", STATUSES["hgx-h100"], "10")], "10"),
        ([obj("gpu-1", STATUSES["hgx-h100"], "10"), obj("gpu-2", STATUSES["aws-p4d"], "30")], "30"),
    ]
    watched_from: list[str] = []

    def lister() -> tuple[list[Any], str]:
        return lists.pop(0) if lists else ([], "99")

    def watcher(version: str) -> Iterable[Mapping[str, Any]]:
        watched_from.append(version)
        if version == "10":
            yield {"type": "MODIFIED", "object": obj("gpu-1", STATUSES["hgx-roce-degraded"], "11")}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
            return
        if version == "12":
            raise Gone()
        stop.set()
        yield from ()

    lw = ListWatch(
        "t",
        lister,
        watcher,
        on_list=lambda items: [labeler.sync(o["metadata"]["name"], o["status"]) for o in items],
        on_event=lambda kind, o: labeler.handle({"type": kind, "object": o}),
    )
    lw.run(stop)
    assert watched_from == ["10", "12", "30"]
    assert lw.relists == 2
    assert nodes.labels["gpu-1"]["gpufabric.io/fabric-health"] == "ok"  # relist restored truth
    assert nodes.labels["gpu-2"]["gpufabric.io/gpu-count"] == "8"


def test_list_watch_backs_off_when_the_api_server_is_down() -> None:
    stop = threading.Event()
    calls = []

    def lister() -> tuple[list[Any], str]:
        calls.append(1)
        if len(calls) >= 3:
            stop.set()
        raise ConnectionRefusedError("connection refused")

    lw = ListWatch(
        "t",
        lister,
        lambda v: iter(()),
        on_list=lambda i: None,
        on_event=lambda k, o: None,
        backoff_base=0.001,
        backoff_cap=0.002,
    )
    lw.run(stop)
    assert lw.errors == 3

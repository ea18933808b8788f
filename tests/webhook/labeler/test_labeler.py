"""The labeler against fake Nodes that behave like SSA (tests/webhook/node_fakes.py), statuses
from the goldens, and recorded watch sequences (410 relist)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from tests import reference
from tests.webhook.helpers import golden_statuses
from tests.webhook.node_fakes import NodeServer
from webhook.kube.watch import Gone, ListWatch, Page, Paged
from webhook.labeler.nodes import Labeler, owned_labels

STATUSES = dict(golden_statuses())
H100, DEGRADED, P4D = STATUSES["hgx-h100"], STATUSES["hgx-roce-degraded"], STATUSES["aws-p4d"]


def status(name: str, st: dict[str, Any] | None, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "status": st}


def converge(labeler: Labeler, server: NodeServer) -> None:
    """Deliver the Node watch events our own applies caused, until nothing moves."""
    for _ in range(20):
        labeler.drain()
        events = server.pop_events()
        if not events:
            return
        for kind, obj in events:
            labeler.node_event(kind, obj)
    raise AssertionError("labels never settle")


def started(server: NodeServer, statuses: dict[str, Any], **kw: Any) -> Labeler:
    labeler = Labeler(server, **kw)
    labeler.statuses_listed(status(n, s) for n, s in statuses.items())
    labeler.nodes_listed(server.list_objects())
    server.pop_events()
    labeler.resync_all()
    converge(labeler, server)
    return labeler


def test_labels_follow_status_add_modify_delete_and_leave_other_labels() -> None:
    server = NodeServer({"gpu-1": {"kubernetes.io/hostname": "gpu-1", "team": "a"}})
    labeler = started(server, {})
    labeler.status_event("ADDED", status("gpu-1", H100))
    converge(labeler, server)
    # eight rails; the 100G front-end port does not count
    assert server.nodes["gpu-1"].labels["gpufabric.io/rdma-ports"] == "8"
    labeler.status_event("MODIFIED", status("gpu-1", H100, "2"))
    converge(labeler, server)
    assert len(server.requests) == 1
    labeler.status_event("MODIFIED", status("gpu-1", DEGRADED, "3"))
    converge(labeler, server)
    assert server.nodes["gpu-1"].labels["gpufabric.io/fabric-health"] == "degraded"
    labeler.status_event("DELETED", status("gpu-1", DEGRADED, "4"))
    converge(labeler, server)
    assert server.nodes["gpu-1"].labels == {"kubernetes.io/hostname": "gpu-1", "team": "a"}
    assert len(server.requests) == 3


def test_a_new_leader_writes_nothing_before_both_lists_arrived() -> None:
    server = NodeServer({"gpu-1": {}})
    started(server, {"gpu-1": H100})  # the previous leader labeled it
    sent = len(server.requests)
    fresh = Labeler(server)  # a new replica whose Node list comes before its status list
    fresh.nodes_listed(server.list_objects())
    fresh.resync_all()
    fresh.drain()
    assert len(server.requests) == sent  # it would have removed every status label
    fresh.statuses_listed([status("gpu-1", H100)])
    converge(fresh, server)
    assert len(server.requests) == sent and server.nodes["gpu-1"].labels["gpufabric.io/rdma"]


def test_steady_state_sends_nothing() -> None:
    server = NodeServer({"gpu-1": {}, "gpu-2": {}, "cpu-1": {}})
    labeler = started(server, {"gpu-1": H100, "gpu-2": P4D})
    assert len(server.requests) == 2
    server.requests.clear()
    for _ in range(5):  # kubelet updates, identical status re-lists, a fresh leader's resync
        server.touch("gpu-1")
        server.touch("cpu-1")
        labeler.status_event("MODIFIED", status("gpu-2", P4D, "9"))
        labeler.statuses_listed([status("gpu-1", H100), status("gpu-2", P4D)])
        labeler.nodes_listed(server.list_objects())
        labeler.resync_all()
        converge(labeler, server)
    assert server.requests == []


def test_a_node_deleted_and_created_again_gets_its_labels_back() -> None:
    """Issue 11: the old labeler reacted only to status events, so this node stayed bare."""
    server = NodeServer({"gpu-1": {"kubernetes.io/hostname": "gpu-1"}})
    labeler = started(server, {"gpu-1": H100})
    server.delete("gpu-1")
    converge(labeler, server)
    server.create("gpu-1", {"kubernetes.io/hostname": "gpu-1"})
    converge(labeler, server)  # one Node ADDED event, one apply
    assert server.nodes["gpu-1"].labels["gpufabric.io/gpu-count"] == "8"
    assert len(server.requests) == 2


def test_labels_removed_or_overwritten_by_someone_else_are_repaired() -> None:
    server = NodeServer({"gpu-1": {}})
    labeler = started(server, {"gpu-1": H100})
    server.label("gpu-1", "gpufabric.io/rdma", None)
    converge(labeler, server)
    assert server.nodes["gpu-1"].labels["gpufabric.io/rdma"] == "true"
    server.label("gpu-1", "gpufabric.io/gpu-count", "16")
    converge(labeler, server)
    assert server.nodes["gpu-1"].labels["gpufabric.io/gpu-count"] == "8"
    assert len(server.requests) == 3


def test_a_gpufabric_label_owned_by_someone_else_causes_no_write_loop() -> None:
    server = NodeServer({"gpu-1": {}})
    labeler = started(server, {"gpu-1": H100})
    server.label("gpu-1", "gpufabric.io/owner-note", "ops")  # not ours: SSA cannot remove it
    for _ in range(3):
        server.touch("gpu-1")
        converge(labeler, server)
    assert len(server.requests) == 1


def test_extra_labels_go_in_the_same_apply_and_resync_all_applies_only_changes() -> None:
    server = NodeServer({"gpu-1": {}, "gpu-2": {}, "cpu-1": {}})
    leaf = {"gpu-1": "leaf-a", "gpu-2": "leaf-b", "cpu-1": "leaf-a"}
    labeler = started(
        server, {"gpu-1": H100, "gpu-2": P4D}, extra=lambda n: {"gpufabric.io/leaf": leaf[n]}
    )
    assert len(server.requests) == 3  # one apply per node, status and network labels together
    assert server.nodes["gpu-1"].labels["gpufabric.io/leaf"] == "leaf-a"
    assert server.nodes["gpu-1"].labels["gpufabric.io/gpu-count"] == "8"
    assert server.nodes["cpu-1"].labels == {"gpufabric.io/leaf": "leaf-a"}
    server.requests.clear()
    leaf["gpu-2"] = "leaf-c"
    labeler.resync_all()
    converge(labeler, server)
    assert server.requests == [("gpu-2", {**server.nodes["gpu-2"].labels})]
    assert server.nodes["gpu-2"].labels["gpufabric.io/leaf"] == "leaf-c"


def test_no_apply_for_a_status_whose_node_does_not_exist() -> None:
    # An apply is an upsert: it would be a 403 for the labeler (k8s-wire nodes/08).
    server = NodeServer({"gpu-1": {}})
    outcomes: list[str] = []
    started(server, {"ghost": H100}, observe=outcomes.append)
    assert server.requests == []
    assert "no-node" in outcomes


def test_failed_applies_stay_marked_and_rejected_ones_are_not_retried() -> None:
    server = NodeServer({"gpu-1": {}, "gpu-2": {}})
    bad = {"gpufabric.io/leaf": "leaf a"}  # a space: 422 from the server
    labeler = Labeler(server, extra=lambda n: bad if n == "gpu-2" else {})
    labeler.statuses_listed([status("gpu-1", H100)])
    labeler.nodes_listed(server.list_objects())
    server.fail = 1
    assert labeler.drain() is True  # gpu-1 failed, stays marked
    converge(labeler, server)
    assert server.nodes["gpu-1"].labels["gpufabric.io/gpu-count"] == "8"
    sent = len(server.requests)
    converge(labeler, server)
    assert len(server.requests) == sent  # gpu-2's refused labels are not resent in a loop


def test_work_converges_on_start_and_writes_nothing_after_it_returns() -> None:
    server = NodeServer({"gpu-1": {}})
    applied = threading.Event()
    labeler = Labeler(server, observe=lambda o: applied.set(), idle_wait=0.01)
    labeler.statuses_listed([status("gpu-1", H100)])
    labeler.nodes_listed(server.list_objects())
    stop = threading.Event()
    worker = threading.Thread(target=labeler.work, args=(stop,))
    worker.start()
    assert applied.wait(10)
    stop.set()
    worker.join(10)
    assert not worker.is_alive()
    sent = len(server.requests)
    labeler.status_event("MODIFIED", status("gpu-1", DEGRADED))
    assert len(server.requests) == sent  # not leading: remembered, not written


def test_owned_labels_reads_the_captured_managed_fields() -> None:
    import json

    body = json.loads((reference.WIRE / "nodes" / "01-label-apply.json").read_text())["response"][
        "body"
    ]
    owned = owned_labels(body["metadata"])
    assert "kubernetes.io/hostname" not in owned
    assert owned["gpufabric.io/rdma-ports"] == "7" and len(owned) == 9


def test_list_watch_relists_after_410_and_resumes_from_resource_version() -> None:
    server = NodeServer({"gpu-1": {}, "gpu-2": {}})
    labeler = Labeler(server)
    labeler.nodes_listed(server.list_objects())
    stop = threading.Event()
    lists = [
        ([status("gpu-1", H100, "10")], "10"),
        ([status("gpu-1", H100, "10"), status("gpu-2", P4D, "30")], "30"),
    ]
    watched_from: list[str] = []

    def lister() -> list[Page]:
        items, version = lists.pop(0) if lists else ([], "99")
        return [Page(items, version)]

    def watcher(version: str) -> Iterable[Mapping[str, Any]]:
        watched_from.append(version)
        if version == "10":
            yield {"type": "MODIFIED", "object": status("gpu-1", DEGRADED, "11")}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
            return
        if version == "12":
            raise Gone()
        stop.set()
        yield from ()

    sink = Paged(labeler.statuses_start, labeler.statuses_page, labeler.statuses_done)
    lw = ListWatch("t", lister, watcher, sink, labeler.status_event)
    lw.run(stop)
    converge(labeler, server)
    assert watched_from == ["10", "12", "30"]
    assert lw.relists == 2
    assert server.nodes["gpu-1"].labels["gpufabric.io/fabric-health"] == "ok"  # relist: truth
    assert server.nodes["gpu-2"].labels["gpufabric.io/gpu-count"] == "8"


def test_work_before_the_lists_waits_instead_of_spinning_and_stops_promptly() -> None:
    server = NodeServer({"gpu-1": {}})
    failed = threading.Event()
    labeler = Labeler(
        server,
        idle_wait=0.01,
        retry_after=3600,
        observe=lambda o: failed.set() if o == "failed" else None,
    )
    labeler.statuses_listed([status("gpu-1", H100)])  # marked, but no Node list yet
    stop = threading.Event()
    rounds = []
    real_drain = labeler.drain

    def counting(stop: threading.Event | None = None) -> bool:
        rounds.append(1)
        if len(rounds) == 5:
            server.fail = 1  # the first apply after the Node list fails: a one-hour backoff
            labeler.nodes_listed(server.list_objects())
        return real_drain(stop)

    labeler.drain = counting  # type: ignore[method-assign]
    worker = threading.Thread(target=labeler.work, args=(stop,))
    worker.start()
    assert failed.wait(10)
    stop.set()  # during the backoff: the worker must not sit out the hour
    worker.join(5)
    assert not worker.is_alive()
    assert server.requests == [("gpu-1", server.requests[0][1])] and len(rounds) == 5

"""serve's assembly: one Node metadata watch and one GpuNodeStatus watch feed both the admission
cache and the labeler; each leader-elected worker has its own Lease. No API server is contacted
(clients are built lazily)."""

from __future__ import annotations

import argparse
from typing import Any

from tests.webhook.helpers import golden_statuses
from webhook.fleet.cache import FabricCache
from webhook.kube.watch import one_page
from webhook.server.metrics import WebhookMetrics
from webhook.wiring import Serving, add_cache_watches, add_labeler, add_network, add_placer

H100 = dict(golden_statuses())["hgx-h100"]


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"u-{name}", "labels": {}, "managedFields": []}}


def test_one_node_and_one_status_watch_feed_the_cache_and_the_labeler() -> None:
    s = Serving(argparse.Namespace(), None, FabricCache(), WebhookMetrics())
    add_cache_watches(s)
    add_labeler(s)
    add_network(s)  # nothing here may call the API server: serve starts while it is down
    add_placer(s)
    names = sorted(w.name for w in s.watches)
    assert names == [
        "gpuclaims",
        "gpunodestatuses",
        "nodes",
        "topology-configmap",
        "topology-parts",
    ]
    assert sorted(s.elected) == ["gpufabric-labeler", "gpufabric-placer"]
    one_page(s.statuses, [{"metadata": {"name": n}, "status": H100} for n in ("gpu-1", "gpu-2")])
    one_page(s.nodes, [node("gpu-1"), node("gpu-2")])
    assert sorted(s.cache.nodes) == ["gpu-1", "gpu-2"]
    s.nodes.event("DELETED", node("gpu-2"))
    assert sorted(s.cache.nodes) == ["gpu-1"]  # a deleted Node's status no longer counts
    s.nodes.event("ADDED", node("gpu-2"))
    assert sorted(s.cache.nodes) == ["gpu-1", "gpu-2"]
    # The labeler saw the same events: both nodes are marked for the leader's first pass.
    assert s.labeler is not None
    assert set(s.labeler._pending) == {"gpu-1", "gpu-2"}


def test_network_labels_ride_on_the_labeler_and_its_lease() -> None:
    from webhook.wiring import add_network

    s = Serving(argparse.Namespace(topology_labels=None), None, FabricCache(), WebhookMetrics())
    add_cache_watches(s)
    add_labeler(s)
    labeler_work = s.elected["gpufabric-labeler"]
    add_network(s)
    assert "topology-configmap" in [w.name for w in s.watches]
    assert (
        s.elected["gpufabric-labeler"] is not labeler_work
    )  # fabric loop runs under the same Lease
    conf = {
        "metadata": {"name": "gpufabric-topology"},
        "data": {"topology.conf": "SwitchName=s0 Nodes=gpu-1\n"},
    }
    watch = next(w for w in s.watches if w.name == "topology-configmap")
    one_page(watch.on_list, [conf])
    one_page(s.statuses, [{"metadata": {"name": "gpu-1"}, "status": H100}])
    one_page(s.nodes, [node("gpu-1")])
    extra = s.labeler.extra
    assert extra.__self__.refresh()[0]  # the FabricController behind the labeler's extra
    assert extra("gpu-1")["gpufabric.io/leaf"] == "s0"


def _args(**kw: Any) -> argparse.Namespace:
    base = {"inject_nccl_tuning": False, "no_nccl_ib_hca": False, "placer": False}
    return argparse.Namespace(**{**base, **kw})


def test_serve_gates_groups_only_when_it_runs_the_placer() -> None:
    from webhook.groups.admission.spines import SpineSizes
    from webhook.serve import admission_settings

    cache, spines = FabricCache(), SpineSizes()
    assert admission_settings(_args(placer=True), None, cache, spines).placer
    assert not admission_settings(_args(), None, cache, spines).placer


def test_the_node_watch_gives_the_cache_node_labels() -> None:
    # A pod's own nodeSelector narrows the nodes it is decided on (issue 17 item 1).
    s = Serving(argparse.Namespace(), None, FabricCache(), WebhookMetrics())
    add_cache_watches(s)
    one_page(s.statuses, [{"metadata": {"name": n}, "status": H100} for n in ("gpu-1", "gpu-2")])
    one, two = node("gpu-1"), node("gpu-2")
    one["metadata"]["labels"] = {"pool": "a"}
    one_page(s.nodes, [one, two])
    p = {"spec": {"nodeSelector": {"pool": "a"}}}
    assert [g.nodes for g in s.cache.fleet_for(p).groups()] == [("gpu-1",)]
    two["metadata"]["labels"] = {"pool": "a"}
    s.nodes.event("MODIFIED", two)
    assert [g.nodes for g in s.cache.fleet_for(p).groups()] == [("gpu-1", "gpu-2")]

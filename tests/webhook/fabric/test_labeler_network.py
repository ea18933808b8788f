"""Network labels through the real Labeler against the SSA-like fake Node server: one apply per
node with summary and network labels together, nothing in steady state, only changed nodes after a
topology edit, nothing at all after a bad edit."""

from __future__ import annotations

from tests.webhook.helpers import golden_statuses
from tests.webhook.node_fakes import NodeServer
from webhook.fabric.controller import FabricController
from webhook.fabric.levels import LEAF, LEAF_PAIR, SPINE
from webhook.labeler.nodes import Labeler

H100 = dict(golden_statuses())["hgx-h100"]
NODES = ["a1", "a2", "b1", "c1"]
CONF = "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b1\nSwitchName=s2 Nodes=c1\nSwitchName=top Switches=s[0-2]\n"


def _setup() -> tuple[NodeServer, FabricController, Labeler]:
    server = NodeServer({n: {"kubernetes.io/hostname": n} for n in NODES})
    fabric = FabricController()
    fabric.configmap({"topology.conf": CONF})
    fabric.refresh()
    labeler = Labeler(server, extra=fabric.labels_for_node)
    labeler.statuses_listed([{"metadata": {"name": n}, "status": H100} for n in NODES])
    labeler.nodes_listed(server.list_objects())
    labeler.drain()
    return server, fabric, labeler


def _relist(server: NodeServer, labeler: Labeler) -> None:
    labeler.statuses_listed([{"metadata": {"name": n}, "status": H100} for n in NODES])
    labeler.nodes_listed(server.list_objects())
    labeler.drain()


def test_one_apply_per_node_with_both_label_sets_then_nothing() -> None:
    server, _, labeler = _setup()
    assert sorted(name for name, _ in server.requests) == NODES
    a1 = server.nodes["a1"].labels
    assert a1[LEAF] == "s0" and a1[SPINE] == "top" and a1["gpufabric.io/gpu-count"] == "8"
    _relist(server, labeler)
    assert len(server.requests) == len(NODES)


def test_topology_edit_relabels_only_the_nodes_that_moved() -> None:
    server, fabric, labeler = _setup()
    # c1's leaf is renamed s2 -> s3: order s0, s1, s3 keeps everybody's slot, so only c1's leaf
    # and its pair (which starts at its leaf) change; a1, a2, b1 get no request.
    fabric.configmap(
        {"topology.conf": CONF.replace("SwitchName=s2 Nodes=c1", "SwitchName=s3 Nodes=c1")}
    )
    changed, _ = fabric.refresh()
    assert changed
    labeler.resync_all()
    labeler.drain()
    assert [name for name, _ in server.requests[len(NODES) :]] == ["c1"]
    assert server.nodes["c1"].labels[LEAF] == "s3" and server.nodes["c1"].labels[LEAF_PAIR] == "s3"


def test_bad_edit_writes_nothing_and_removal_clears_network_labels_only() -> None:
    server, fabric, labeler = _setup()
    fabric.configmap({"topology.conf": "SwitchName=s0 Nodes=a[1-\n"})
    changed, _ = fabric.refresh()
    assert not changed
    labeler.resync_all()
    labeler.drain()
    assert len(server.requests) == len(NODES)
    fabric.configmap(None)
    assert fabric.refresh()[0]
    labeler.resync_all()
    labeler.drain()
    a1 = server.nodes["a1"].labels
    assert LEAF not in a1 and a1["gpufabric.io/gpu-count"] == "8"

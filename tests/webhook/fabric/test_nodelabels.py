"""Existing node labels -> positions: AWS, OCI, GKE, topograph (three key generations), CoreWeave,
an explicit key list (Alibaba's ToR names that repeat under different aggregation switches)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.webhook.fabric.helpers import ref
from webhook.fabric.levels import LEAF, LEAF_PAIR, SPINE, Positions
from webhook.fabric.model import SourceError
from webhook.fabric.sources.nodelabels import from_labels


def test_aws_describe_instance_topology() -> None:
    # NetworkNodes[i] -> network-node-layer-(i+1), top first (cloud-provider-aws). Instances 1-2
    # share all three layers; instance 4 shares only layer 1 with them; instance 3 shares none.
    data = json.loads(ref("cloud/aws-describe-instance-topology.json"))
    nodes = {
        i["InstanceId"]: {
            f"topology.k8s.aws/network-node-layer-{n}": v
            for n, v in enumerate(i["NetworkNodes"], 1)
        }
        for i in data["Instances"]
    }
    pos = Positions(from_labels("aws", nodes))
    one, two = (
        pos.labels_for_node("i-1111111111example"),
        pos.labels_for_node("i-2222222222example"),
    )
    three, four = (
        pos.labels_for_node("i-3333333333example"),
        pos.labels_for_node("i-444444444example"),
    )
    assert one == two
    assert one[LEAF] == "nn-3333333333example" and one[SPINE] == "nn-2222222222example"
    assert four[LEAF] == "nn-1235301234example" and four[SPINE] == "nn-5434334334example"
    assert three[SPINE] == "nn-1211122211example"
    assert len({one[SPINE], three[SPINE], four[SPINE]}) == 3


def test_oci_labels() -> None:
    # local block = tier 0 (leaf), network block = tier 1 (spine), HPC island above; host_id is the host.
    labels = dict(line.split("=", 1) for line in ref("cloud/oci-oke-rdma-node-labels.txt").split())
    pos = Positions(from_labels("oci", {"n1": labels}))
    assert pos.labels_for_node("n1")[LEAF] == "4tjxbt4s6ua"
    assert pos.labels_for_node("n1")[SPINE] == "7xmzl4p4wba"


def test_gke_subblock_is_the_leaf_and_host_is_not_a_level() -> None:
    g = "cloud.google.com/gce-topology-"
    nodes = {"a": {f"{g}block": "b1", f"{g}subblock": "sb1", f"{g}host": "h1"}}
    assert Positions(from_labels("gke", nodes)).labels_for_node("a")[LEAF] == "sb1"


@pytest.mark.parametrize(
    "labels",
    [
        # v1.0.0 and later: tier-0 is the switch closest to the node.
        {
            "fabric.topograph.run/tier-0": "leaf7",
            "fabric.topograph.run/tier-1": "sp2",
            "fabric.topograph.run/tier-2": "core",
        },
        # the untagged Aug-2026 interim.
        {
            "network.topology.nvidia.com/tier-0": "leaf7",
            "network.topology.nvidia.com/tier-1": "sp2",
        },
        # v0.3.0-v0.5.0.
        {
            "network.topology.nvidia.com/leaf": "leaf7",
            "network.topology.nvidia.com/spine": "sp2",
            "network.topology.nvidia.com/core": "c",
        },
        # v0.1.0.
        {
            "network.topology.nvidia.com/block": "leaf7",
            "network.topology.nvidia.com/spine": "sp2",
            "network.topology.nvidia.com/datacenter": "d",
        },
    ],
)
def test_topograph_generations(labels: dict[str, str]) -> None:
    pos = Positions(from_labels("topograph", {"n1": labels, "n2": {"other": "x"}}))
    assert pos.labels_for_node("n1")[LEAF] == "leaf7"
    assert pos.labels_for_node("n1")[SPINE] == "sp2"
    assert pos.labels_for_node("n2") == {}


def test_coreweave_leafgroup() -> None:
    nodes = {
        "n1": {"backend.coreweave.cloud/leafgroup": "lg-3", "ib.coreweave.cloud/superpod": "sp1"}
    }
    assert Positions(from_labels("coreweave", nodes)).labels_for_node("n1")[LEAF] == "lg-3"


def test_explicit_keys_qualify_leaf_names_that_repeat() -> None:
    # Alibaba Lingjun: ASW names repeat under different PSWs (48 names for 119 ToRs), so a leaf is
    # the (PSW, ASW) pair; 847 hosts, 3 PSWs.
    rows = list(csv.DictReader(io.StringIO(ref("static/alibaba-lingjun-2023-topo.csv"))))
    nodes = {
        r["ip"][:12]: {"x.io/dsw": r["DSW"], "x.io/psw": r["PSW"], "x.io/asw": r["ASW"]}
        for r in rows
    }
    fabric = from_labels("x.io/dsw,x.io/psw,x.io/asw", nodes)
    assert len(rows) == 847 == len(fabric.nodes)
    assert len(fabric.leaves) == len({(r["DSW"], r["PSW"], r["ASW"]) for r in rows}) == 119
    assert len(fabric.spines) == 3
    pos = Positions(fabric)
    values = {pos.labels_for_node(n)[LEAF] for n in nodes}
    assert len(values) == 119
    pairs = {pos.labels_for_node(n)[LEAF_PAIR] for n in nodes}
    assert len(pairs) == sum((len(s.leaves) + 1) // 2 for s in fabric.spines)


def test_unknown_preset_is_bad_input() -> None:
    with pytest.raises(SourceError, match="aws, gke, oci"):
        from_labels("azure", {})

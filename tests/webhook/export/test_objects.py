"""The exported objects: valid under each scheduler's CRD schema, levels and tiers that follow
the labels, Volcano names valid and stable, NVLink only where a node has a domain."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from common import api
from tests.webhook.export.fabrics import (
    cel_failures,
    crd_schema,
    fabric,
    nodes,
    nvlink,
    positions,
)
from webhook.export import kai, kueue, volcano
from webhook.export.model import MANAGED_BY, build, dns_name
from webhook.fabric.levels import Positions

NETWORK = [
    "gpufabric.io/spine",
    "gpufabric.io/leaf-quad",
    "gpufabric.io/leaf-pair",
    "gpufabric.io/leaf",
]


def _levels(topology: dict[str, Any]) -> list[str]:
    return [lvl["nodeLabel"] for lvl in topology["spec"]["levels"]]


@pytest.mark.parametrize(
    ("crd", "version"),
    [
        ("kueue-topology-crd.yaml", "v1beta2"),  # Kueue 0.15 and later
        ("kueue-topology-crd.yaml", "v1beta1"),  # 0.14 (only this), 0.15-0.20 (deprecated)
        ("kueue-0.13-topology-crd-v1alpha1.yaml", "v1alpha1"),  # 0.9-0.13, Red Hat's 0.13
    ],
)
def test_kueue_topologies_validate_and_list_our_levels(crd: str, version: str) -> None:
    schema = crd_schema(crd, version)
    objs = kueue.topologies(build(positions(), nvlink()), version)
    assert [o["metadata"]["name"] for o in objs] == ["gpufabric", "gpufabric-nvlink"]
    for obj in objs:
        jsonschema.validate(obj, schema)
        assert cel_failures(obj, schema) == []
        assert obj["apiVersion"] == f"kueue.x-k8s.io/{version}"
        assert obj["metadata"]["labels"] == {MANAGED_BY: "gpufabric"}
    assert _levels(objs[0]) == [*NETWORK, "kubernetes.io/hostname"]
    assert _levels(objs[1]) == [*NETWORK, api.LABEL_NVLINK_DOMAIN, "kubernetes.io/hostname"]


def test_kai_topologies_validate_with_aliases() -> None:
    schema = crd_schema("kai-topology-crd.yaml", "v1alpha1")
    objs = kai.topologies(build(positions(), nvlink()))
    for obj in objs:
        jsonschema.validate(obj, schema)
    aliases = [lvl["alias"] for lvl in objs[1]["spec"]["levels"]]
    assert aliases == ["spine", "leaf-quad", "leaf-pair", "leaf", "nvlink-domain", "node"]
    assert _levels(objs[0])[-1] == "kubernetes.io/hostname"


def test_no_nvlink_domain_no_nvlink_topology_and_leaves_are_tier_one() -> None:
    model = build(positions(), {})
    assert [o["metadata"]["name"] for o in kueue.topologies(model)] == ["gpufabric"]
    assert [o["metadata"]["name"] for o in kai.topologies(model)] == ["gpufabric"]
    tier1 = [h for h in volcano.hypernodes(model) if h["spec"]["tier"] == 1]
    assert {h["spec"]["tierName"] for h in tier1} == {"leaf"}
    assert len(tier1) == 6  # the empty slot makes no HyperNode


def test_nothing_placed_exports_nothing() -> None:
    from webhook.fabric.model import Fabric

    model = build(Positions(Fabric("none")), nvlink())
    assert kueue.topologies(model) == kai.topologies(model) == volcano.hypernodes(model) == []


def _hypernodes() -> dict[str, dict[str, Any]]:
    return {h["metadata"]["name"]: h for h in volcano.hypernodes(build(positions(), nvlink()))}


def test_hypernodes_validate_and_form_one_tree_of_one_member_kind_per_tier() -> None:
    schema = crd_schema("volcano-hypernode-crd.yaml", "v1alpha1")
    hns = _hypernodes()
    parents: dict[str, list[str]] = {}
    for name, h in hns.items():
        jsonschema.validate(h, schema)
        kinds = {m["type"] for m in h["spec"]["members"]}
        assert kinds == ({"Node"} if h["spec"]["tier"] == 1 else {"HyperNode"}), name
        for m in h["spec"]["members"]:
            child = m["selector"]["exactMatch"]["name"]
            parents.setdefault(child, []).append(name)
            if m["type"] == "HyperNode":
                assert hns[child]["spec"]["tier"] == h["spec"]["tier"] - 1
    assert all(len(p) == 1 for p in parents.values())  # one parent each
    placed = positions().placed
    in_tier1 = [c for c, p in parents.items() if hns[p[0]]["spec"]["tier"] == 1]
    assert sorted(in_tier1) == sorted(placed)  # every placed node exactly once, by exact name
    assert {h["spec"]["tierName"] for h in hns.values()} == {
        "nvlink-domain",
        "leaf",
        "leaf-pair",
        "leaf-quad",
        "spine",
    }
    assert max(h["spec"]["tier"] for h in hns.values()) == 5


def test_hypernode_tiers_follow_the_labels() -> None:
    """The HyperNodes above a node are exactly its leaf, pair, quad and spine label values."""
    hns = _hypernodes()
    parent = {
        m["selector"]["exactMatch"]["name"]: name
        for name, h in hns.items()
        for m in h["spec"]["members"]
    }
    for node, labels in positions().placed.items():
        chain, up = [], parent[node]
        while up in parent:
            up = parent[up]
            chain.append(up)
        assert chain == [
            dns_name(f"leaf-{labels['gpufabric.io/leaf']}"),
            dns_name(f"leaf-pair-{labels['gpufabric.io/leaf-pair']}"),
            dns_name(f"leaf-quad-{labels['gpufabric.io/leaf-quad']}"),
            dns_name(f"spine-{labels['gpufabric.io/spine']}"),
        ], node


def test_nvlink_tier_groups_domains_and_the_rest_of_each_leaf() -> None:
    hns = _hypernodes()
    tier1 = {n: h for n, h in hns.items() if h["spec"]["tier"] == 1}
    members = {
        n: sorted(m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"])
        for n, h in tier1.items()
    }
    whole = next(n for n in members if n.endswith(".1"))
    assert members[whole] == list(nodes("gpu-a0", 4))
    # Domain 2 spans leaves a2 and A_3: one piece per leaf, each under its own leaf.
    pieces = [n for n in members if ".2-" in n]
    assert sorted(len(members[p]) for p in pieces) == [1, 3]
    # A_3's other node has no domain: a tier-1 group of its own leaf.
    rest = [n for n, m in members.items() if m == ["gpu-a3-02"]]
    assert len(rest) == 1 and rest[0].startswith("no-nvlink-a-3-")


def test_names_are_dns_1123_stable_and_distinct() -> None:
    names = list(_hypernodes())
    assert names == list(_hypernodes())  # same fabric, same names
    assert len(set(names)) == len(names)
    assert dns_name("leaf-A_3") != dns_name("leaf-a-3") and dns_name("leaf-a-3") == "leaf-a-3"
    assert dns_name("leaf-A_3") == dns_name("leaf-A_3")
    long = dns_name("spine-" + "x" * 80)
    assert len(long) <= 63 and long.startswith("spine-xxx")
    assert dns_name("...").startswith("x") and len(dns_name("-")) == 11
    assert "spine-a" not in names and any(n.startswith("spine-spine-a-") for n in names)
    assert fabric().spines[0].id == "Spine_A"

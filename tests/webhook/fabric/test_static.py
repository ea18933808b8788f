"""The static nodes.yaml map (format in docs/topology.md)."""

from __future__ import annotations

import pytest

from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import SourceError
from webhook.fabric.sources.formats import derive

MAP = """
spines:
  - name: spine-a
    leaves:
      - {name: leaf10, nodes: ["gpu-[001-002]"]}
      - {name: leaf2, nodes: [gpu-003]}
      - {name: leaf3, nodes: [gpu-004]}
  - name: spine-b
    leaves:
      - {name: leaf20, nodes: [gpu-101, gpu-102]}
"""


def test_file_order_is_adjacency_order() -> None:
    pos = Positions(derive(MAP))  # detected from content: spines/leaves
    a, b, c = (pos.labels_for_node(n) for n in ("gpu-001", "gpu-003", "gpu-004"))
    assert a[LEAF] == "spine-a.leaf10"
    assert a[LEAF_PAIR] == b[LEAF_PAIR] == "spine-a.leaf10" != c[LEAF_PAIR]
    assert a[LEAF_QUAD] == c[LEAF_QUAD] and a[SPINE] == "spine-a"
    assert pos.labels_for_node("gpu-101")[SPINE] == "spine-b"


def test_leaves_only_is_one_spine_domain() -> None:
    pos = Positions(derive("leaves:\n  - {name: tor1, nodes: [a]}\n  - {name: tor2, nodes: [b]}\n"))
    assert pos.labels_for_node("a")[SPINE] == pos.labels_for_node("b")[SPINE] == "spine"
    assert pos.labels_for_node("a")[LEAF] == "tor1"  # one spine: the name is unique already


TWO_T1 = """
spines:
  - name: spine-a
    leaves:
      - {name: t1, nodes: [a1]}
      - {name: t2, nodes: [a2]}
  - name: spine-b
    leaves:
      - {name: t1, nodes: [b1]}
"""


def test_same_leaf_name_under_two_spines_gets_two_values() -> None:
    pos = Positions(derive(TWO_T1))
    a1, b1 = pos.labels_for_node("a1"), pos.labels_for_node("b1")
    for key in (LEAF, LEAF_PAIR, LEAF_QUAD, SPINE):
        assert a1[key] != b1[key], key
    assert (a1[LEAF], b1[LEAF]) == ("spine-a.t1", "spine-b.t1")
    for key in (LEAF, LEAF_PAIR, LEAF_QUAD):  # each value is one domain, cluster-wide
        values = [d.value for d in pos.domains if d.level == key.split("/")[1]]
        assert len(values) == len(set(values)), key


def test_values_do_not_move_when_another_spine_changes() -> None:
    alone = Positions(derive(TWO_T1.split("  - name: spine-b")[0]))
    both = Positions(derive(TWO_T1))
    for node in ("a1", "a2"):
        assert alone.labels_for_node(node) == both.labels_for_node(node)


def test_node_under_two_same_named_leaves_is_not_placed() -> None:
    fabric = derive(TWO_T1.replace("[b1]", "[a1]"))
    assert [u.node for u in fabric.unplaced] == ["a1"]
    assert "spine-a.t1" in fabric.unplaced[0].reason and "spine-b.t1" in fabric.unplaced[0].reason
    assert Positions(fabric).labels_for_node("a1") == {}


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(SourceError, match="spine 'spine-a' appears twice"):
        derive(TWO_T1.replace("spine-b", "spine-a"), "nodes.yaml")
    with pytest.raises(SourceError, match=r"leaf 'spine-a\.t1' appears twice"):
        derive(TWO_T1.replace("t2", "t1"), "nodes.yaml")
    with pytest.raises(SourceError, match="leaf 'tor1' appears twice"):
        derive("leaves:\n  - {name: tor1, nodes: [a]}\n  - {name: tor1, nodes: [b]}\n")


def test_bad_map() -> None:
    with pytest.raises(SourceError, match="leaves\\[0\\] needs a `name`"):
        derive("leaves:\n  - nodes: [a]\n", "nodes.yaml")
    with pytest.raises(SourceError, match="line 3: not YAML"):
        derive("leaves:\n  - {name: [\n", "nodes.yaml")

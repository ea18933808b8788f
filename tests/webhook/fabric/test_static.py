"""The static nodes.yaml map (format in docs/topology.md)."""

from __future__ import annotations

import pytest

from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import SourceError
from webhook.fabric.source import derive

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
    assert a[LEAF] == "leaf10" and a[LEAF_PAIR] == b[LEAF_PAIR] == "leaf10" != c[LEAF_PAIR]
    assert a[LEAF_QUAD] == c[LEAF_QUAD] and a[SPINE] == "spine-a"
    assert pos.labels_for_node("gpu-101")[SPINE] == "spine-b"


def test_leaves_only_is_one_spine_domain() -> None:
    pos = Positions(derive("leaves:\n  - {name: tor1, nodes: [a]}\n  - {name: tor2, nodes: [b]}\n"))
    assert pos.labels_for_node("a")[SPINE] == pos.labels_for_node("b")[SPINE] == "spine"


def test_bad_map() -> None:
    with pytest.raises(SourceError, match="leaves\\[0\\] needs a `name`"):
        derive("leaves:\n  - nodes: [a]\n", "nodes.yaml")
    with pytest.raises(SourceError, match="line 3: not YAML"):
        derive("leaves:\n  - {name: [\n", "nodes.yaml")

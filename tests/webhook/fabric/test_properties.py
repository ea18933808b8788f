"""Properties over generated fat trees (2 and 3 tiers, rail-optimized and not)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.fabric_dump import FatTree
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, NETWORK_LABELS, SPINE, Positions
from webhook.fabric.names import is_label_value
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive

trees = st.builds(
    FatTree,
    sus=st.integers(1, 9),
    nodes_per_su=st.integers(1, 5),
    rails=st.sampled_from([1, 2, 4, 8]),
    spines=st.integers(1, 3),
    tiers=st.sampled_from([2, 3]),
    pod_size=st.integers(1, 3),
)


def _positions(tree: FatTree, names: list[str] | None = None) -> Positions:
    text, statuses = tree.render()
    chosen = names if names is not None else list(statuses)
    return Positions(
        derive(text, "ibnetdiscover", join.from_statuses((n, statuses[n]) for n in chosen))
    )


@settings(max_examples=40, deadline=None)
@given(trees)
def test_every_node_in_exactly_one_leaf_domain_and_levels_nest(tree: FatTree) -> None:
    pos = _positions(tree)
    fabric = pos.fabric
    assert sorted(fabric.nodes) == sorted(tree.node_names())  # each node once
    # One leaf domain per scalable unit: its rail leaves, and exactly its nodes.
    assert len(fabric.leaves) == tree.sus
    for leaf in fabric.leaves:
        assert len({n.split("-")[0] for n in leaf.nodes}) == 1
        assert len(leaf.switches) == tree.rails
    pods = (tree.sus + tree.pod_size - 1) // tree.pod_size
    assert len(fabric.spines) == (1 if tree.tiers == 2 else pods)
    # Nesting: same leaf -> same pair -> same quad -> same spine.
    parent: dict[tuple[str, str], str] = {}
    for node in tree.node_names():
        labels = pos.labels_for_node(node)
        assert set(labels) == set(NETWORK_LABELS)
        assert all(is_label_value(v) for v in labels.values())
        for lower, upper in ((LEAF, LEAF_PAIR), (LEAF_PAIR, LEAF_QUAD), (LEAF_QUAD, SPINE)):
            assert parent.setdefault((lower, labels[lower]), labels[upper]) == labels[upper]
    # Values are unique cluster-wide: one leaf value per scalable unit.
    by_leaf: dict[str, set[str]] = defaultdict(set)
    for node in tree.node_names():
        by_leaf[pos.labels_for_node(node)[LEAF]].add(node.split("-")[0])
    assert all(len(sus) == 1 for sus in by_leaf.values()) and len(by_leaf) == tree.sus


@settings(max_examples=30, deadline=None)
@given(trees, st.data())
def test_labels_stable_when_nodes_are_added(tree: FatTree, data: st.DataObject) -> None:
    every = tree.node_names()
    # Keep the first node of every SU (so no leaf domain disappears) plus a random subset.
    firsts = [n for n in every if n.endswith("-n1")]
    rest = data.draw(st.lists(st.sampled_from(every), unique=True))
    before = _positions(tree, sorted(set(firsts) | set(rest)))
    after = _positions(tree)
    for node in before.placed:
        assert after.labels_for_node(node) == before.labels_for_node(node)
    # A new scalable unit at the end does not move anybody either.
    grown = FatTree(
        tree.sus + 1, tree.nodes_per_su, tree.rails, tree.spines, tree.tiers, tree.pod_size
    )
    bigger = _positions(grown)
    for node in after.placed:
        assert bigger.labels_for_node(node) == after.labels_for_node(node)


def test_rail_swap_and_cross_su_miscable() -> None:
    # su1-n2's rail-3 HCA sits on su1's rail-4 leaf (a swap inside the SU); su2-n1's rail-1 HCA
    # is cabled to su3's rail-1 leaf. Still one leaf domain per SU; the miscabled node stays in su2
    # (7 of its 8 HCAs) and is reported.
    tree = FatTree(3, 4, swap={("su1-n2", 3): "su1-rail4", ("su2-n1", 1): "su3-rail1"})
    pos = _positions(tree)
    assert len(pos.fabric.leaves) == 3
    assert pos.labels_for_node("su2-n1")[LEAF] == pos.labels_for_node("su2-n2")[LEAF]
    assert pos.labels_for_node("su1-n2")[LEAF] == pos.labels_for_node("su1-n1")[LEAF]
    assert any(p.startswith("node su2-n1: HCAs on 2 leaf domains") for p in pos.fabric.problems)

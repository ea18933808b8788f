"""Fabric -> the four network labels of each node (DESIGN.md "Network position").

Adjacency follows the order of leaves inside their spine domain (the source's order: Slurm block
order, or natural sort of switch names): leaves i and j share a pair when i>>1 == j>>1 and a quad
when i>>2 == j>>2, like Slurm's BlockSizes levels. A pair or quad is named after its first leaf
slot, so its value stays put when a node (or a leaf at the end) is added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

from webhook.fabric.model import Fabric, Leaf
from webhook.fabric.names import label_value

LEAF = "gpufabric.io/leaf"
LEAF_PAIR = "gpufabric.io/leaf-pair"
LEAF_QUAD = "gpufabric.io/leaf-quad"
SPINE = "gpufabric.io/spine"
NETWORK_LABELS = (SPINE, LEAF_QUAD, LEAF_PAIR, LEAF)  # top level first, as Kueue lists them
LEVELS = {"leaf": LEAF, "leaf-pair": LEAF_PAIR, "leaf-quad": LEAF_QUAD, "spine": SPINE}


@dataclass(frozen=True, slots=True)
class Domain:
    level: str  # leaf | leaf-pair | leaf-quad | spine
    value: str  # the label value
    nodes: tuple[str, ...]
    leaves: tuple[str, ...]  # leaf ids inside (one for a leaf)


class Positions:
    """What each node is labelled with; answers the labeler's `extra(name)`."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._labels: dict[str, dict[str, str]] = {}
        self.domains: list[Domain] = []
        for spine in fabric.spines:
            spine_value = label_value(spine.id)
            slots = spine.leaves
            self.domains.append(Domain("spine", spine_value, _nodes(slots), _ids(slots)))
            for size, level in ((4, "leaf-quad"), (2, "leaf-pair")):
                for start in range(0, len(slots), size):
                    group = slots[start : start + size]
                    nodes = _nodes(group)
                    if nodes:
                        value = label_value(group[0].id)
                        self.domains.append(Domain(level, value, nodes, _ids(group)))
            for i, leaf in enumerate(slots):
                if not leaf.nodes:
                    continue
                labels = {
                    SPINE: spine_value,
                    LEAF_QUAD: label_value(slots[i & ~3].id),
                    LEAF_PAIR: label_value(slots[i & ~1].id),
                    LEAF: label_value(leaf.id),
                }
                self.domains.append(Domain("leaf", labels[LEAF], leaf.nodes, (leaf.id,)))
                for node in leaf.nodes:
                    self._labels[node] = labels

    def labels_for_node(self, name: str) -> Mapping[str, str]:
        return self._labels.get(name, {})

    @property
    def placed(self) -> Mapping[str, Mapping[str, str]]:
        return self._labels


def _nodes(leaves: Sequence[Leaf]) -> tuple[str, ...]:
    return tuple(chain.from_iterable(leaf.nodes for leaf in leaves))


def _ids(leaves: Sequence[Leaf]) -> tuple[str, ...]:
    return tuple(leaf.id for leaf in leaves)

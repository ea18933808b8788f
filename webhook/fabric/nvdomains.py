"""Which multi-node NVLink domains (GB200/GB300 NVL72) sit in which leaf domains. Pure.

An NVLink domain comes from the nodes (common.nvlink: their GPUs, else `nvidia.com/gpu.clique`),
not from the network source, so it need not nest: a rack whose trays hang off two leaf domains is
valid, and reported as spanning both. Nodes the network source does not place are listed under
their NVLink domain all the same, with no leaf.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from common import nvlink
from webhook.fabric.levels import LEAF, Positions
from webhook.fabric.model import Unplaced
from webhook.fabric.names import label_value


@dataclass(frozen=True, slots=True)
class NvlinkDomain:
    value: str  # the gpufabric.io/nvlink-domain label value
    nodes: tuple[str, ...]
    per_leaf: tuple[tuple[str, int], ...]  # (leaf domain label value, its nodes), fabric order

    @property
    def leaves(self) -> tuple[str, ...]:
        return tuple(leaf for leaf, _ in self.per_leaf)

    @property
    def spans(self) -> bool:
        return len(self.leaves) > 1


@dataclass(frozen=True, slots=True)
class NvlinkView:
    domains: tuple[NvlinkDomain, ...] = ()
    unknown: tuple[Unplaced, ...] = ()  # nodes whose GPUs disagree or are still forming


def nvlink_view(domains: Mapping[str, nvlink.Domain], positions: Positions) -> NvlinkView:
    """`domains`: node -> its resolved NVLink domain (nodes without one may be left out)."""
    order = {label_value(leaf.id): i for i, leaf in enumerate(positions.fabric.leaves)}
    members: dict[str, list[str]] = {}
    unknown = []
    for node in sorted(domains):
        d = domains[node]
        if d.value is not None:
            members.setdefault(d.value, []).append(node)
        elif d.reason:
            unknown.append(Unplaced(node, d.reason))
    out = []
    for value, nodes in members.items():
        counts = Counter(
            leaf for n in nodes if (leaf := positions.labels_for_node(n).get(LEAF)) is not None
        )
        ranked = sorted(counts.items(), key=lambda kv: order.get(kv[0], len(order)))
        out.append(NvlinkDomain(value, tuple(nodes), tuple(ranked)))
    # Fabric order: by the first leaf domain, domains outside the network model last.
    out.sort(
        key=lambda d: (order.get(d.leaves[0], len(order)) if d.leaves else len(order), d.value)
    )
    return NvlinkView(tuple(out), tuple(unknown))

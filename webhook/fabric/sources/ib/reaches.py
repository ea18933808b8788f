"""Each node's leaf switches and its HCAs on each, as columns: what the derive asks of them
(the kinds of leaf sets, and each node's leaf domain) answered a column at a time.

At 65,536 nodes a tuple, a set and a dict entry per node cost more than reading the dump;
here the per-node work is sorts and reductions, and Python touches a node only to name it
(or when its HCAs span leaf domains, which is rare and said in a problem).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]
# Two odd multipliers for the hashes of a leaf set (a clash is checked for, never trusted).
_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


@dataclass(frozen=True)
class Reaches:
    """Pairs (node, leaf switch) sorted by node then leaf name, with the node's HCAs on it.

    `starts` gives each node's first pair (and the end after the last); `node` its index in
    `node_names`; `leaf` a pair's leaf as its place in `leaves` (sorted names)."""

    node_names: list[str]
    leaves: list[str]
    node: I64
    starts: I64
    leaf: I64
    count: I64

    @classmethod
    def of(cls, node_names: list[str], leaves: list[str], pairs: I64, counts: I64) -> Reaches:
        """From unique sorted keys node << 32 | leaf and the HCAs of each."""
        node = pairs >> 32
        starts = np.flatnonzero(np.diff(node, prepend=-1))
        return cls(
            node_names,
            leaves,
            node[starts],
            np.append(starts, len(pairs)),
            pairs & 0xFFFFFFFF,
            counts,
        )

    def placed(self) -> list[str]:
        return [self.node_names[i] for i in self.node.tolist()]

    def kinds(self) -> Counter[tuple[str, ...]]:
        """Each set of leaves -> how many nodes reach exactly it (nodes of one scalable unit
        share one): grouped by two hashes of the set, each group checked leaf by leaf."""
        first, sizes = self.starts[:-1], np.diff(self.starts)
        if not len(first):
            return Counter()
        place = np.arange(len(self.leaf)) - np.repeat(first, sizes)  # a pair's place in its set
        hashes = []
        for multiplier in _MULTIPLIERS:
            powers = multiplier ** np.arange(int(sizes.max(initial=0)) + 1, dtype=np.uint64)
            terms = (self.leaf.astype(np.uint64) + np.uint64(1)) * powers[place]
            hashes.append(np.add.reduceat(terms, first))
        order = np.lexsort((hashes[1], hashes[0], sizes))
        same = (
            (sizes[order][1:] == sizes[order][:-1])
            & (hashes[0][order][1:] == hashes[0][order][:-1])
            & (hashes[1][order][1:] == hashes[1][order][:-1])
        )
        group_start = np.flatnonzero(np.concatenate(([True], ~same)))
        representative = np.empty(len(order), np.int64)
        runs = np.diff(np.append(group_start, len(order)))
        representative[order] = np.repeat(order[group_start], runs)
        # Each node's leaves, place by place, against its representative's.
        rep_pair = np.repeat(first[representative], sizes) + place
        if not (self.leaf == self.leaf[rep_pair]).all():  # two sets with equal hashes
            return Counter(self._set(i) for i in range(len(first)))
        members = np.bincount(representative, minlength=len(first))
        reps = np.flatnonzero(members)
        return Counter({self._set(int(r)): int(members[r]) for r in reps})

    def _set(self, i: int) -> tuple[str, ...]:
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        return tuple(self.leaves[r] for r in self.leaf[a:b].tolist())

    def domains(
        self, domain_of_leaf: I64, domains: list[str]
    ) -> tuple[dict[str, list[str]], list[tuple[str, dict[str, int]]]]:
        """Leaf domain -> the nodes all of whose HCAs are in it; and each node whose HCAs span
        domains, with its HCAs per domain."""
        pair_domain = domain_of_leaf[self.leaf]
        first = self.starts[:-1]
        if not len(first):
            return {}, []
        low = np.minimum.reduceat(pair_domain, first)
        high = np.maximum.reduceat(pair_domain, first)
        whole = np.flatnonzero(low == high)
        order = whole[np.argsort(low[whole], kind="stable")]
        cuts = np.flatnonzero(np.diff(low[order], prepend=-1))
        names = [self.node_names[i] for i in self.node[order].tolist()]
        members: dict[str, list[str]] = {}
        ends = [*cuts[1:].tolist(), len(order)]
        for a, b, d in zip(cuts.tolist(), ends, low[order[cuts]].tolist(), strict=True):
            members[domains[d]] = names[a:b]
        spread = []
        for i in np.flatnonzero(low != high).tolist():
            a, b = int(self.starts[i]), int(self.starts[i + 1])
            per: Counter[str] = Counter()
            for d, c in zip(pair_domain[a:b].tolist(), self.count[a:b].tolist(), strict=True):
                per[domains[d]] += c
            spread.append((self.node_names[int(self.node[i])], dict(per)))
        return members, spread

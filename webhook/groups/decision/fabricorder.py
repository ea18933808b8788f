"""Fabric order: every level's domains, and each domain's nodes, in the order that builds pairs
and quads (DESIGN.md "Ranks"). Each domain's nodes are kept in order per node event (one node
inserted or removed); a level's order of domains is sorted again only after its set of domains
changed, and only when asked for."""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from typing import Any

from webhook.groups.model.names import LEVELS, NETWORK_LEVELS, Level

LEAF = LEVELS.index(NETWORK_LEVELS[0])  # where the nesting network levels start in LEVELS
Where = tuple[str | None, ...]  # a node's domain per level (LEVELS order), None: no label
Index = dict[Level, tuple[tuple[str, tuple[str, ...]], ...]]
Nesting = dict[str, tuple[str | None, ...]]  # leaf -> its pair, quad, spine

_NUM = re.compile(r"(\d+)")


def fabric_order(value: str) -> tuple[tuple[int, str], ...]:
    """Natural order of domain names (leaf-2 before leaf-10): the fabric's own order."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in _NUM.split(value) if p)


def _by_name(name: str) -> tuple[tuple[tuple[int, str], ...], str]:
    return fabric_order(name), name


class FabricOrder:
    def __init__(self, where: Mapping[str, Where] | None = None) -> None:
        self.where: dict[str, Where] = dict(where or {})  # node -> its domain per level
        grouped: list[dict[str, list[str]]] = [{} for _ in LEVELS]
        for name in sorted(self.where, key=_by_name):
            for i, domain in enumerate(self.where[name]):
                if domain:
                    grouped[i].setdefault(domain, []).append(name)
        # domain -> its nodes in fabric order; its name's sort key
        self.domains = [{d: tuple(ns) for d, ns in level.items()} for level in grouped]
        self._keys = [{d: fabric_order(d) for d in level} for level in grouped]
        self._order: list[dict[str, int] | None] = [None for _ in LEVELS]
        self._first: dict[str, tuple[Any, ...]] = {}  # NVLink domain -> its first leaf's key
        self._index: Index | None = None
        self._up: tuple[Nesting | None] | None = None

    def put(self, name: str, where: Where | None) -> None:
        """The node's domains now (None: the node is gone)."""
        old = self.where.pop(name, None)
        if where is not None:
            self.where[name] = where
        if old == where:
            return
        self._index, self._up = None, None
        for i in range(len(LEVELS)):
            was, now = old[i] if old else None, where[i] if where else None
            if was == now:
                continue
            if i in (0, LEAF):  # NVLink domains follow the leaf domains their nodes are in
                self._order[0] = None
                for d in {old[0] if old else None, where[0] if where else None} - {None}:
                    self._first.pop(str(d), None)
            domains = self.domains[i]
            if was:
                domains[was] = tuple(n for n in domains[was] if n != name)
                if not domains[was]:
                    del domains[was], self._keys[i][was]
                    self._order[i] = None
            if now:
                if now not in domains:
                    domains[now], self._keys[i][now] = (), fabric_order(now)
                    self._order[i] = None
                members = domains[now]
                at = bisect.bisect(members, _by_name(name), key=_by_name)
                domains[now] = (*members[:at], name, *members[at:])

    def order(self, level: Level) -> dict[str, int]:
        """Domain -> its position: network levels by name; NVLink domains (named by UUID) by the
        first leaf domain that holds them, so they follow the fabric too."""
        i = LEVELS.index(level)
        got = self._order[i]
        if got is None:
            names = self._keys[i]
            keys: dict[str, tuple[Any, ...]] = {
                d: (self._first_leaf(d) if i == 0 else (), key, d) for d, key in names.items()
            }
            got = self._order[i] = {d: k for k, d in enumerate(sorted(keys, key=keys.__getitem__))}
        return got

    def _first_leaf(self, nvlink: str) -> tuple[Any, ...]:
        """Where the NVLink domain's first leaf domain sits in leaf order (as a sort key; after
        every leaf when none of its nodes has one), kept until its nodes change."""
        got = self._first.get(nvlink)
        if got is None:
            leaves = {self.where[n][LEAF] for n in self.domains[0][nvlink]} - {None}
            keys = [(0, self._keys[LEAF][str(leaf)], leaf) for leaf in leaves]
            got = self._first[nvlink] = min(keys, default=(1,))
        return got

    def nodes(self, level: Level, domain: str) -> tuple[str, ...]:
        """The domain's nodes in fabric order (natural order of their names)."""
        return self.domains[LEVELS.index(level)].get(domain, ())

    def index(self) -> Index:
        if self._index is None:
            self._index = {
                level: tuple((d, self.nodes(level, d)) for d in self.ordered(level))
                for level in LEVELS
            }
        return self._index

    def ordered(self, level: Level) -> list[str]:
        order = self.order(level)
        return sorted(order, key=order.__getitem__)

    def levels(self) -> tuple[Level, ...]:
        return tuple(level for i, level in enumerate(LEVELS) if self.domains[i])

    def nesting(self) -> Nesting | None:
        """leaf -> pair, quad, spine when every node of a leaf agrees on them and every node with
        a network label has a leaf (the network domains nest), else None."""
        if self._up is None:
            self._up = (nesting(self.where),)
        return self._up[0]


def nesting(where: Mapping[str, Where]) -> Nesting | None:
    up: Nesting | None = {}
    for w in where.values():
        net = w[LEAF:]
        if up is None:
            break
        if net[0] is None:
            up = None if any(net) else up
        elif up.setdefault(net[0], net[1:]) != net[1:]:
            up = None
    return up

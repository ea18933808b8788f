"""Fabric order: every level's domains, and each domain's nodes, in the order that builds pairs
and quads (DESIGN.md "Ranks"). Pure over each node's domain per level."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.groups.names import LEVELS, NETWORK_LEVELS, Level

LEAF = LEVELS.index(NETWORK_LEVELS[0])  # where the nesting network levels start in LEVELS
Where = tuple[str | None, ...]  # a node's domain per level (LEVELS order), None: no label
Index = dict[Level, tuple[tuple[str, tuple[str, ...]], ...]]
Nesting = dict[str, tuple[str | None, ...]]  # leaf -> its pair, quad, spine

_NUM = re.compile(r"(\d+)")


def fabric_order(value: str) -> tuple[tuple[int, str], ...]:
    """Natural order of domain names (leaf-2 before leaf-10): the fabric's own order."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in _NUM.split(value) if p)


def build(where: Mapping[str, Where]) -> tuple[Index, Nesting | None]:
    """Per level: (domain, its nodes) in fabric order (NVLink domains: in the order of the leaf
    domains that hold them); and leaf -> pair, quad, spine when every node of a leaf agrees on
    them and every node with a network label has a leaf (the network domains nest), else None."""
    built: list[dict[str, list[str]]] = [{} for _ in LEVELS]
    for name in sorted(where, key=fabric_order):
        for i, domain in enumerate(where[name]):
            if domain:
                built[i].setdefault(domain, []).append(name)
    rank = {leaf: i for i, leaf in enumerate(sorted(built[LEAF], key=fabric_order))}

    def key(i: int, domain: str, members: list[str]) -> tuple[int, Any]:
        """Network levels by name; NVLink domains (named by UUID) by the first leaf domain that
        holds them, so they follow the fabric too."""
        if i != 0:
            return 0, fabric_order(domain)
        at = (rank.get(where[n][LEAF] or "", len(rank)) for n in members)
        return min(at, default=len(rank)), fabric_order(domain)

    index = {
        level: tuple(
            (d, tuple(members))
            for _, d, members in sorted((key(i, d, m), d, m) for d, m in built[i].items())
        )
        for i, level in enumerate(LEVELS)
    }
    up: Nesting | None = {}
    for w in where.values():
        net = w[LEAF:]
        if up is None:
            break
        if net[0] is None:
            up = None if any(net) else up
        elif up.setdefault(net[0], net[1:]) != net[1:]:
            up = None
    return index, up

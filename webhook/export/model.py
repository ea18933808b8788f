"""The model every export reads: the placed nodes as a tree of domains in fabric order.

Built from `levels.Positions` (the object the labeler asks for each node's labels), grouping the
nodes by the very label values they carry, so an export cannot name a domain the labels do not.
Below each leaf domain sit the nodes' multi-node NVLink domains (`common.nvlink`) when any placed
node has one; the nodes of that leaf without one form a group of their own (Volcano wants every
tier to hold one kind of member). An NVLink domain that spans leaf domains is split per leaf (a
HyperNode has one parent). Pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from common import api
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions

HOSTNAME = "kubernetes.io/hostname"
NVLINK = "nvlink-domain"
NO_NVLINK = "no-nvlink"  # the group of a leaf's nodes that have no NVLink domain
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpufabric"  # "ours" means this label value
NAME = "gpufabric"  # the Kueue / KAI Topology over the network levels
NVLINK_NAME = "gpufabric-nvlink"  # ... and the one with the NVLink level, when a node has one
# Level name (Volcano tierName, Kueue/KAI alias) -> node label, top level first.
NETWORK = (("spine", SPINE), ("leaf-quad", LEAF_QUAD), ("leaf-pair", LEAF_PAIR), ("leaf", LEAF))

_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_NAME = 63  # a DNS-1123 label's length: also fits Slurm's 64-character switch names


def dns_name(raw: str) -> str:
    """`raw` when it is a lowercase DNS-1123 name of at most 63 characters; otherwise a readable
    lowercase prefix plus a hash of `raw`, so two raw names never share one (stable: same input,
    same name)."""
    if len(raw) <= _MAX_NAME and _DNS.match(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    parts = [p.strip("-") for p in re.sub(r"[^a-z0-9.]+", "-", raw.lower()).split(".")]
    prefix = ".".join(p for p in parts if p)[: _MAX_NAME - 11].strip(".-")
    return f"{prefix}-{digest}" if prefix else f"x{digest}"


@dataclass(frozen=True, slots=True)
class Domain:
    level: str  # nvlink-domain | no-nvlink | leaf | leaf-pair | leaf-quad | spine
    value: str  # the label value (no-nvlink: the leaf's)
    name: str  # object / switch name: `<level>-<value>` as a DNS-1123 name
    nodes: tuple[str, ...]  # every node inside, fabric order
    children: tuple[Domain, ...] = ()  # the domains one level down; none at the lowest


@dataclass(frozen=True, slots=True)
class Model:
    spines: tuple[Domain, ...]
    # Per spine domain, its leaf domains by slot (None: an empty slot that still counts for the
    # pair/quad alignment, as in the labels).
    slots: tuple[tuple[Domain | None, ...], ...]
    nvlink: bool  # some placed node has an NVLink domain

    @property
    def placed(self) -> bool:
        return bool(self.spines)

    def leaves(self) -> tuple[Domain, ...]:
        return tuple(leaf for row in self.slots for leaf in row if leaf is not None)


def name_for(level: str, value: str) -> str:
    return dns_name(f"{level}-{value}")


def build(positions: Positions, nvlink: Mapping[str, str] | None = None) -> Model:
    """The export model; `nvlink` maps node -> its NVLink domain value (absent: none)."""
    domains = nvlink or {}
    placed = positions.placed
    has_nvlink = any(domains.get(node) for node in placed)
    spanning = _spanning(positions, domains) if has_nvlink else frozenset()
    spines: list[Domain] = []
    slots: list[tuple[Domain | None, ...]] = []
    for spine in positions.fabric.spines:
        row: list[Domain | None] = []
        quads: dict[str, dict[str, list[Domain]]] = {}
        spine_value = ""
        for leaf in spine.leaves:
            if not leaf.nodes:
                row.append(None)
                continue
            labels = placed[leaf.nodes[0]]
            spine_value = labels[SPINE]
            value = labels[LEAF]
            children = _nvlink_groups(leaf.nodes, value, domains, spanning) if has_nvlink else ()
            domain = Domain("leaf", value, name_for("leaf", value), leaf.nodes, children)
            row.append(domain)
            quads.setdefault(labels[LEAF_QUAD], {}).setdefault(labels[LEAF_PAIR], []).append(domain)
        if not spine_value:
            continue
        quad_domains = []
        for quad, pairs in quads.items():
            pair_domains = tuple(_group("leaf-pair", pair, tuple(ls)) for pair, ls in pairs.items())
            quad_domains.append(_group("leaf-quad", quad, pair_domains))
        spines.append(_group("spine", spine_value, tuple(quad_domains)))
        slots.append(tuple(row))
    return Model(tuple(spines), tuple(slots), has_nvlink)


def _group(level: str, value: str, children: tuple[Domain, ...]) -> Domain:
    nodes = tuple(n for c in children for n in c.nodes)
    return Domain(level, value, name_for(level, value), nodes, children)


def _spanning(positions: Positions, domains: Mapping[str, str]) -> frozenset[str]:
    """NVLink domains whose nodes sit in more than one leaf domain."""
    leaf_of: dict[str, set[str]] = {}
    for node, labels in positions.placed.items():
        value = domains.get(node)
        if value:
            leaf_of.setdefault(value, set()).add(labels[LEAF])
    return frozenset(v for v, leaves in leaf_of.items() if len(leaves) > 1)


def _nvlink_groups(
    nodes: tuple[str, ...], leaf: str, domains: Mapping[str, str], spanning: frozenset[str]
) -> tuple[Domain, ...]:
    groups: dict[str, list[str]] = {}
    for node in nodes:
        groups.setdefault(domains.get(node) or "", []).append(node)
    out = []
    for value, members in groups.items():
        if not value:
            out.append(Domain(NO_NVLINK, leaf, name_for(NO_NVLINK, leaf), tuple(members)))
            continue
        raw = f"{NVLINK}-{value}" + (f"-{leaf}" if value in spanning else "")
        out.append(Domain(NVLINK, value, dns_name(raw), tuple(members)))
    return tuple(out)


def levels(nvlink: bool) -> list[tuple[str, str]]:
    """(level name, node label) top-down for a Topology: the network levels, the NVLink level
    when asked, the hostname last (Kueue and KAI accept it only there)."""
    out = list(NETWORK)
    if nvlink:
        out.append((NVLINK, api.LABEL_NVLINK_DOMAIN))
    return [*out, ("node", HOSTNAME)]


def metadata(name: str) -> dict[str, object]:
    return {"name": name, "labels": {MANAGED_BY: MANAGER}}


TOPOLOGY = "Topology"  # Kueue's and KAI's kind name alike


def topologies(
    model: Model, api_version: str, level: Callable[[str, str], dict[str, str]]
) -> list[dict[str, Any]]:
    """The `Topology` objects Kueue and KAI both read: `gpufabric` over the network levels, and
    `gpufabric-nvlink` when a node has an NVLink domain; `level(name, label)` is one entry of
    spec.levels in the scheduler's own shape. None while the fabric places no node."""
    if not model.placed:
        return []
    names = [(NAME, False)] + ([(NVLINK_NAME, True)] if model.nvlink else [])
    return [
        {
            "apiVersion": api_version,
            "kind": TOPOLOGY,
            "metadata": metadata(name),
            "spec": {"levels": [level(n, label) for n, label in levels(nvlink)]},
        }
        for name, nvlink in names
    ]

"""Volcano `HyperNode`s (topology.volcano.sh/v1alpha1): one tier per level, lowest first.

Tier 1 holds nodes by exact name: the NVLink domains (and, per leaf, the nodes without one) when
any node has a domain, else the leaf domains. Each tier above holds the HyperNodes below it, up
to the spine domains, so `networkTopology.highestTierAllowed: N` means the N-th level up
(`tierName` carries the level's name for `highestTierName`)."""

from __future__ import annotations

from typing import Any

from webhook.export.model import NO_NVLINK, NVLINK, Domain, Model, metadata

GROUP = "topology.volcano.sh"
VERSIONS = ("v1alpha1",)
KIND = "HyperNode"
PLURAL = "hypernodes"
_NETWORK_UP = ("leaf", "leaf-pair", "leaf-quad", "spine")


def tiers(nvlink: bool) -> dict[str, int]:
    """Level -> tier number."""
    names = ((NVLINK,) if nvlink else ()) + _NETWORK_UP
    out = {name: i + 1 for i, name in enumerate(names)}
    if nvlink:
        out[NO_NVLINK] = out[NVLINK]
    return out


def hypernodes(model: Model, version: str = VERSIONS[0]) -> list[dict[str, Any]]:
    tier = tiers(model.nvlink)
    by_tier: dict[int, list[dict[str, Any]]] = {}

    def visit(domain: Domain) -> None:
        for child in domain.children:
            visit(child)
        members = (
            [_member("HyperNode", c.name) for c in domain.children]
            if domain.children
            else [_member("Node", n) for n in domain.nodes]
        )
        level = NVLINK if domain.level == NO_NVLINK else domain.level
        by_tier.setdefault(tier[domain.level], []).append(
            {
                "apiVersion": f"{GROUP}/{version}",
                "kind": KIND,
                "metadata": metadata(domain.name),
                "spec": {"tier": tier[domain.level], "tierName": level, "members": members},
            }
        )

    for spine in model.spines:
        visit(spine)
    return [h for t in sorted(by_tier) for h in by_tier[t]]


def _member(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}

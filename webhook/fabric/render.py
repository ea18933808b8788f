"""Fabric -> what a person reads: the GpuFabric status, the `topology` table, label lines."""

from __future__ import annotations

from typing import Any

from webhook.fabric.levels import NETWORK_LABELS, Positions
from webhook.fabric.model import Fabric
from webhook.fabric.names import label_value

_TABLE_NODES = 6  # node names shown per leaf in the table; the YAML has all of them


def status(fabric: Fabric, positions: Positions | None = None) -> dict[str, Any]:
    """The GpuFabric `status` body (also `topology -o yaml`): every domain with its nodes."""
    pos = positions or Positions(fabric)
    spines = []
    for spine in fabric.spines:
        leaves = []
        for i, leaf in enumerate(spine.leaves):
            entry: dict[str, Any] = {
                "name": label_value(leaf.id),
                "pair": label_value(spine.leaves[i & ~1].id),
                "quad": label_value(spine.leaves[i & ~3].id),
            }
            if leaf.switches and leaf.switches != (leaf.id,):
                entry["switches"] = list(leaf.switches)
            entry["nodes"] = list(leaf.nodes)
            leaves.append(entry)
        body: dict[str, Any] = {"name": label_value(spine.id)}
        if spine.switches:
            body["switches"] = list(spine.switches)
        body["leaves"] = leaves
        spines.append(body)
    out: dict[str, Any] = {
        "source": fabric.source,
        "summary": {
            "spines": len(fabric.spines),
            "leaves": sum(1 for leaf in fabric.leaves if leaf.nodes),
            "nodes": len(pos.placed),
            "unplaced": len(fabric.unplaced),
            "problems": len(fabric.problems),
        },
    }
    if fabric.tiers:
        out["tiers"] = list(fabric.tiers)
    out["spines"] = spines
    out["unplaced"] = [{"node": u.node, "reason": u.reason} for u in fabric.unplaced]
    out["problems"] = list(fabric.problems)
    return out


def table(fabric: Fabric, positions: Positions | None = None) -> str:
    pos = positions or Positions(fabric)
    lines = [f"source: {fabric.source}"]
    if fabric.tiers:
        tiers = " / ".join(str(t) for t in fabric.tiers)
        lines.append(f"switches per tier (leaves first): {tiers}")
    leaves = sum(1 for leaf in fabric.leaves if leaf.nodes)
    lines.append(
        f"{len(fabric.spines)} spine domain(s), {leaves} leaf domain(s), "
        f"{len(pos.placed)} node(s) placed, {len(fabric.unplaced)} unplaced"
    )
    for spine in fabric.spines:
        lines.append("")
        nodes = sum(len(leaf.nodes) for leaf in spine.leaves)
        sw = f"{len(spine.switches)} switches, " if spine.switches else ""
        lines.append(f"spine {label_value(spine.id)}  ({sw}{nodes} nodes)")
        for i, leaf in enumerate(spine.leaves):
            if i % 4 == 0:
                lines.append(f"  quad {label_value(leaf.id)}")
            if i % 2 == 0:
                lines.append(f"    pair {label_value(leaf.id)}")
            shown = ", ".join(leaf.nodes[:_TABLE_NODES]) + (
                ", ..." if len(leaf.nodes) > _TABLE_NODES else ""
            )
            sw = f"{len(leaf.switches)} switches, " if len(leaf.switches) > 1 else ""
            what = f"{sw}{len(leaf.nodes)} nodes: {shown}" if leaf.nodes else "empty slot"
            lines.append(f"      leaf {label_value(leaf.id)}  ({what})")
    if fabric.unplaced:
        lines += ["", "unplaced nodes:"] + [f"  {u.node}: {u.reason}" for u in fabric.unplaced]
    if fabric.problems:
        lines += ["", "problems:"] + [f"  {p}" for p in fabric.problems]
    return "\n".join(lines) + "\n"


def label_lines(positions: Positions) -> str:
    """`NODE KEY=VALUE ...` per placed node (network labels only), sorted by node name."""
    out = []
    for node in sorted(positions.placed):
        labels = positions.placed[node]
        out.append(node + " " + " ".join(f"{k}={labels[k]}" for k in NETWORK_LABELS if k in labels))
    return "\n".join(out) + ("\n" if out else "")

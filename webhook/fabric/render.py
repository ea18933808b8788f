"""Fabric -> what a person reads: the GpuFabric status, the `topology` table, label lines."""

from __future__ import annotations

from typing import Any

from webhook.fabric.levels import NETWORK_LABELS, Positions
from webhook.fabric.model import Fabric
from webhook.fabric.names import label_value
from webhook.fabric.nvdomains import NvlinkView

_TABLE_NODES = 6  # node names shown per leaf in the table; the YAML has all of them


def status(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> dict[str, Any]:
    """The GpuFabric `status` body (also `topology -o yaml`): every domain with its nodes; with
    NVLink domains, which leaf domains hold each (the keys only appear when there are some)."""
    pos = positions or Positions(fabric)
    nv = nvlink or NvlinkView()
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
            if inside := nv.in_leaf(label_value(leaf.id)):
                entry["nvlinkDomains"] = [d.value for d in inside]
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
    if nv.domains:
        out["summary"]["nvlinkDomains"] = len(nv.domains)
    if fabric.tiers:
        out["tiers"] = list(fabric.tiers)
    out["spines"] = spines
    out["unplaced"] = [{"node": u.node, "reason": u.reason} for u in fabric.unplaced]
    out["problems"] = list(fabric.problems)
    if nv.domains:
        out["nvlinkDomains"] = [
            {
                "name": d.value,
                "leaves": [{"name": leaf, "nodes": n} for leaf, n in d.per_leaf],
                "nodes": list(d.nodes),
            }
            for d in nv.domains
        ]
    if nv.unknown:
        out["nvlinkUnknown"] = [{"node": u.node, "reason": u.reason} for u in nv.unknown]
    return out


def table(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> str:
    pos = positions or Positions(fabric)
    nv = nvlink or NvlinkView()
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
            lines += _nvlink_lines(nv, label_value(leaf.id))
    lines += _nvlink_summary(nv)
    if fabric.unplaced:
        lines += ["", "unplaced nodes:"] + [f"  {u.node}: {u.reason}" for u in fabric.unplaced]
    if fabric.problems:
        lines += ["", "problems:"] + [f"  {p}" for p in fabric.problems]
    return "\n".join(lines) + "\n"


def _nvlink_lines(nv: NvlinkView, leaf: str) -> list[str]:
    out = []
    for d in nv.in_leaf(leaf):
        here = dict(d.per_leaf)[leaf]
        also = f"; also in {', '.join(x for x in d.leaves if x != leaf)}" if d.spans else ""
        out.append(f"        nvlink-domain {d.value}  ({here} nodes{also})")
    return out


def _nvlink_summary(nv: NvlinkView) -> list[str]:
    if not nv.domains and not nv.unknown:
        return []
    spanning = [d for d in nv.domains if d.spans]
    lines = [
        "",
        f"{len(nv.domains)} NVLink domain(s), {len(spanning)} spanning more than one leaf domain",
    ]
    lines += [f"  {d.value} spans leaf domains {', '.join(d.leaves)}" for d in spanning]
    outside = [d for d in nv.domains if not d.leaves]
    lines += [f"  {d.value}: {len(d.nodes)} nodes, none placed in a leaf domain" for d in outside]
    if nv.unknown:
        lines += ["", "nodes without an NVLink domain:"]
        lines += [f"  {u.node}: {u.reason}" for u in nv.unknown]
    return lines


def label_lines(positions: Positions) -> str:
    """`NODE KEY=VALUE ...` per placed node (network labels only), sorted by node name."""
    out = []
    for node in sorted(positions.placed):
        labels = positions.placed[node]
        out.append(node + " " + " ".join(f"{k}={labels[k]}" for k in NETWORK_LABELS if k in labels))
    return "\n".join(out) + ("\n" if out else "")

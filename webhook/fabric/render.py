"""Fabric -> what a person reads: the GpuFabric status, the `topology` table, label lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.fabric.levels import NETWORK_LABELS, Positions
from webhook.fabric.model import Fabric, Leaf
from webhook.fabric.names import label_value
from webhook.fabric.nvdomains import NvlinkDomain, NvlinkView
from webhook.fabric.shape import (
    FabricStatus,
    LeafShare,
    NodeReason,
    SpanningDomain,
    SpineCounts,
    Summary,
)

_TABLE_NODES = 6  # node names shown per leaf in the table; `-o yaml` lists all of them
LISTED = 20  # problems, unplaced nodes and NVLink entries the GpuFabric object shows; all counted
SPINES_LISTED = 256  # spine domains the GpuFabric object gives counts for
_TEXT_MAX = 512  # characters of one problem or reason in the GpuFabric object


def status(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> dict[str, Any]:
    """The GpuFabric `status` body (shape.FabricStatus, which every reader reads back)."""
    return fabric_status(fabric, positions, nvlink).to_json()


def fabric_status(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> FabricStatus:
    """The summary, counts per spine domain, and the first LISTED problems, unplaced nodes and
    NVLink domains that span leaf domains (never one entry per node: the object stays far
    under etcd's 1.5 MiB at any size). `topology -o yaml` lists every node."""
    pos = positions or Positions(fabric)
    nv = nvlink or NvlinkView()
    by_leaf = _domains_by_leaf(nv)
    spines = []
    for spine in fabric.spines[:SPINES_LISTED]:
        slots = spine.leaves
        inside = {d.value for leaf in slots for d in by_leaf.get(label_value(leaf.id), ())}
        spines.append(
            SpineCounts(
                name=label_value(spine.id),
                leaves=sum(1 for leaf in slots if leaf.nodes),
                pairs=_groups(slots, 2),
                quads=_groups(slots, 4),
                nodes=sum(len(leaf.nodes) for leaf in slots),
                switches=len(spine.switches) if spine.switches else None,
                nvlink_domains=len(inside) if by_leaf else None,
            )
        )
    spanning = [d for d in nv.domains if d.spans]
    summary = Summary(
        spines=len(fabric.spines),
        leaves=sum(1 for leaf in fabric.leaves if leaf.nodes),
        nodes=len(pos.placed),
        unplaced=len(fabric.unplaced),
        problems=len(fabric.problems),
        nvlink_domains=len(nv.domains) if nv.domains else None,
        nvlink_spanning=len(spanning) if nv.domains else None,
        nvlink_unknown=len(nv.unknown) if nv.unknown else None,
    )
    return FabricStatus(
        source=fabric.source,
        summary=summary,
        spines=tuple(spines),
        unplaced=tuple(NodeReason(u.node, _short(u.reason)) for u in fabric.unplaced[:LISTED]),
        problems=tuple(_short(p) for p in fabric.problems[:LISTED]),
        tiers=tuple(fabric.tiers),
        nvlink_domains=tuple(
            SpanningDomain(
                d.value,
                tuple(LeafShare(leaf, n) for leaf, n in d.per_leaf[:LISTED]),
                len(d.nodes),
            )
            for d in spanning[:LISTED]
        ),
        nvlink_unknown=tuple(NodeReason(u.node, _short(u.reason)) for u in nv.unknown[:LISTED]),
    )


def listing(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> dict[str, Any]:
    """Every domain with its nodes (`topology -o yaml`, offline): the per-node listing the
    GpuFabric object leaves out. With NVLink domains, which leaf domains hold each."""
    pos = positions or Positions(fabric)
    nv = nvlink or NvlinkView()
    by_leaf = _domains_by_leaf(nv)
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
            if inside := by_leaf.get(label_value(leaf.id)):
                entry["nvlinkDomains"] = [d.value for d in inside]
            leaves.append(entry)
        body: dict[str, Any] = {"name": label_value(spine.id)}
        if spine.switches:
            body["switches"] = list(spine.switches)
        body["leaves"] = leaves
        spines.append(body)
    out = status(fabric, pos, nv)
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


def _groups(slots: Sequence[Leaf], size: int) -> int:
    """Aligned groups of `size` leaf slots that hold a node (pairs: 2, quads: 4)."""
    return sum(
        1
        for start in range(0, len(slots), size)
        if any(x.nodes for x in slots[start : start + size])
    )


def _short(text: str) -> str:
    return text if len(text) <= _TEXT_MAX else text[: _TEXT_MAX - 3] + "..."


def _domains_by_leaf(nv: NvlinkView) -> dict[str, list[NvlinkDomain]]:
    """Leaf domain label value -> the NVLink domains in it, in fabric order (one pass: asking
    each leaf in turn would be quadratic on 3,640 NVL72 racks)."""
    out: dict[str, list[NvlinkDomain]] = {}
    for d in nv.domains:
        for leaf in d.leaves:
            out.setdefault(leaf, []).append(d)
    return out


def table(
    fabric: Fabric, positions: Positions | None = None, nvlink: NvlinkView | None = None
) -> str:
    pos = positions or Positions(fabric)
    nv = nvlink or NvlinkView()
    by_leaf = _domains_by_leaf(nv)
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
            lines += _nvlink_lines(by_leaf, label_value(leaf.id))
    lines += _nvlink_summary(nv)
    if fabric.unplaced:
        lines += ["", "unplaced nodes:"] + [f"  {u.node}: {u.reason}" for u in fabric.unplaced]
    if fabric.problems:
        lines += ["", "problems:"] + [f"  {p}" for p in fabric.problems]
    return "\n".join(lines) + "\n"


def _nvlink_lines(by_leaf: Mapping[str, list[NvlinkDomain]], leaf: str) -> list[str]:
    out = []
    for d in by_leaf.get(leaf, ()):
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

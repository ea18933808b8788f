"""The GpuFabric object stays small at any size (issue 22): summary, counts per spine domain and
the first problems, never one entry per node. At 65,536 nodes the old status listed every node
(1.31 MiB; 2.13 MiB with NVL72 trays listed twice), near etcd's 1.5 MiB per object."""

from __future__ import annotations

import json
from typing import Any

from common import nvlink
from webhook.fabric import render
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, Leaf, Spine, Unplaced
from webhook.fabric.nvdomains import nvlink_view

LIMIT = 256 * 1024
NAME = "gpu-cluster-east-rack-{:05d}-node-{:03d}.example"  # ~45 characters, as real FQDN-ish names


def _fabric(leaves: int, per_leaf: int, spines: int, problems: int) -> Fabric:
    made = [
        Leaf(
            f"leaf-switch-{i:05d}-" + "x" * 60,  # too long for a label value: hashed
            tuple(f"rail-{r}-leaf-{i:05d}" for r in range(8)),
            tuple(NAME.format(i, n) for n in range(per_leaf)),
        )
        for i in range(leaves)
    ]
    step = -(-leaves // spines)
    return Fabric(
        "ibnetdiscover",
        tuple(
            Spine(
                f"spine-{s}",
                tuple(f"spine-{s}-switch-{k:04d}" for k in range(512)),
                tuple(made[s * step : (s + 1) * step]),
            )
            for s in range(spines)
        ),
        tuple(
            Unplaced(f"late-node-{k:05d}", "none of its HCA GUIDs is cabled") for k in range(5000)
        ),
        tuple(
            f"node {k}: HCAs on 2 leaf domains " + "(a: 4, b: 4) " * 100 for k in range(problems)
        ),
        (16384, 8192, 16),
    )


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, separators=(",", ":")))


def _label_values_ok(body: Any) -> bool:
    if isinstance(body, dict):
        return all(_label_values_ok(v) for k, v in body.items() if k != "reason")
    if isinstance(body, list):
        return all(_label_values_ok(v) for v in body)
    return not isinstance(body, str) or len(body) <= 63 or " " in body  # problems are prose


def test_65536_nodes_with_long_names_stay_under_256_kib() -> None:
    fabric = _fabric(leaves=2048, per_leaf=32, spines=1, problems=65_536)
    positions = Positions(fabric)
    body = render.status(fabric, positions)
    assert body["summary"] == {
        "spines": 1,
        "leaves": 2048,
        "nodes": 65_536,
        "unplaced": 5000,
        "problems": 65_536,
    }
    (spine,) = body["spines"]
    assert spine == {
        "name": "spine-0",
        "switches": 512,
        "leaves": 2048,
        "pairs": 1024,
        "quads": 512,
        "nodes": 65_536,
    }
    assert len(body["problems"]) == len(body["unplaced"]) == render.LISTED
    assert _size(body) < LIMIT
    assert all(len(v) <= 63 for labels in positions.placed.values() for v in labels.values())
    assert _label_values_ok(body)
    listing = render.listing(fabric, positions)  # offline, every node
    assert sum(len(leaf["nodes"]) for s in listing["spines"] for leaf in s["leaves"]) == 65_536


def test_65520_nvl72_trays_in_racks_that_span_leaf_domains_stay_under_256_kib() -> None:
    # 3,640 racks of 18 trays, 455 leaf domains of 144 trays in 8 spine domains; racks start half
    # a rack off the leaf domains, so the rack at each leaf domain's edge spans two of them.
    fabric = _fabric(leaves=455, per_leaf=144, spines=8, problems=0)
    positions = Positions(fabric)
    nodes = [n for leaf in fabric.leaves for n in leaf.nodes]
    racks = {n: nvlink.Domain(f"{(i + 9) // 18:05d}-{'c' * 36}.1") for i, n in enumerate(nodes)}
    view = nvlink_view(racks, positions)
    assert len(view.domains) == 3641 and sum(d.spans for d in view.domains) == 454
    body = render.status(fabric, positions, view)
    assert (body["summary"]["nvlinkDomains"], body["summary"]["nvlinkSpanning"]) == (3641, 454)
    assert len(body["nvlinkDomains"]) == render.LISTED
    assert all(isinstance(d["nodes"], int) for d in body["nvlinkDomains"])
    # a rack at the edge of two spine domains counts in both (7 such edges)
    assert sum(s["nvlinkDomains"] for s in body["spines"]) == 3641 + 7
    assert _size(body) < LIMIT
    assert _label_values_ok(body)

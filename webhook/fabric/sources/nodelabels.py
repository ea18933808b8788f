"""Existing node labels (clouds, topograph, CoreWeave, or keys an operator names) -> Fabric.

The lowest level present on a node is its leaf domain, the one above it its spine domain
(shared/notes/fabric_topology.md §5). Cloud ids are opaque, and some repeat under different
parents (a ToR name reused in another pod), so a leaf value seen under two spines is qualified
with its spine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from common.natural import natural_sorted
from webhook.fabric.model import Fabric, Leaf, SourceError, Unplaced
from webhook.fabric.sources.build import spines_from_parents

Level = tuple[str, ...]  # alternative keys for one level; the first the node carries wins

_AWS = "topology.k8s.aws/network-node-layer-"
_OCI = "oci.oraclecloud.com/rdma."
_GKE = "cloud.google.com/gce-topology-"
PRESETS: dict[str, tuple[Level, ...]] = {
    "aws": tuple((f"{_AWS}{i}",) for i in range(1, 5)),
    # gce-topology-host is the physical machine, not a switch: it is not a network level.
    "gke": ((f"{_GKE}block",), (f"{_GKE}subblock",)),
    "oci": ((f"{_OCI}hpc_island_id",), (f"{_OCI}network_block_id",), (f"{_OCI}local_block_id",)),
    "coreweave": (
        (
            "ib.coreweave.cloud/superpod",
            "backend.coreweave.cloud/fabric",
            "ib.coreweave.cloud/fabric",
        ),
        ("backend.coreweave.cloud/leafgroup", "ib.coreweave.cloud/leafgroup"),
    ),
}
_TOPOGRAPH_TIERS = ("fabric.topograph.run/tier-", "network.topology.nvidia.com/tier-")
_TOPOGRAPH_NAMED = (  # v0.3.0-v0.5.0, then v0.1.0; top first
    (
        "network.topology.nvidia.com/core",
        "network.topology.nvidia.com/spine",
        "network.topology.nvidia.com/leaf",
    ),
    (
        "network.topology.nvidia.com/datacenter",
        "network.topology.nvidia.com/spine",
        "network.topology.nvidia.com/block",
    ),
)
PRESET_NAMES = (*PRESETS, "topograph")


def levels_for(spec: str, nodes: Mapping[str, Mapping[str, str]]) -> tuple[Level, ...]:
    """A preset name or a `KEY,KEY,...` list (top level first) -> levels."""
    spec = spec.strip()
    if spec in PRESETS:
        return PRESETS[spec]
    if spec == "topograph":
        return _topograph_levels(nodes)
    keys = [k.strip() for k in spec.split(",") if k.strip()]
    if not keys or any("/" not in k and "." not in k and k not in ("rack", "zone") for k in keys):
        raise SourceError(
            f"--topology-labels {spec!r}: use one of {', '.join(PRESET_NAMES)} or a comma list of "
            "label keys, top level first"
        )
    return tuple((k,) for k in keys)


def _topograph_levels(nodes: Mapping[str, Mapping[str, str]]) -> tuple[Level, ...]:
    """Whichever topograph key generation the nodes carry (v1.0 tier-N, interim, v0.3, v0.1)."""
    keys = {k for labels in nodes.values() for k in labels}
    for prefix in _TOPOGRAPH_TIERS:
        tiers = sorted(
            int(k[len(prefix) :])
            for k in keys
            if k.startswith(prefix) and k[len(prefix) :].isdigit()
        )
        if tiers:
            return tuple((f"{prefix}{t}",) for t in reversed(tiers))
    for named in _TOPOGRAPH_NAMED:
        if named[-1] in keys:
            return tuple((k,) for k in named)
    return ((f"{_TOPOGRAPH_TIERS[0]}1",), (f"{_TOPOGRAPH_TIERS[0]}0",))


def _values(labels: Mapping[str, str], levels: Sequence[Level]) -> list[str]:
    out = []
    for alternatives in levels:
        value = next((labels[k] for k in alternatives if labels.get(k)), None)
        if value is not None:
            out.append(value)
    return out


def from_labels(spec: str, nodes: Mapping[str, Mapping[str, str]]) -> Fabric:
    levels = levels_for(spec, nodes)
    source = f"labels:{spec}" if spec in PRESET_NAMES else "labels"
    leaf_of: dict[str, tuple[str, str]] = {}  # node -> (spine value or "", leaf value)
    unplaced = []
    for node in natural_sorted(nodes):
        values = _values(nodes[node], levels)
        if not values:
            keys = ", ".join(k for level in levels for k in level)
            unplaced.append(Unplaced(node, f"carries none of the labels {keys}"))
            continue
        leaf_of[node] = (values[-2] if len(values) > 1 else "", values[-1])
    spines_of_leaf: dict[str, set[str]] = defaultdict(set)
    for spine, leaf in leaf_of.values():
        spines_of_leaf[leaf].add(spine)
    members: dict[str, list[str]] = defaultdict(list)
    parents: dict[str, set[str]] = defaultdict(set)
    for node, (spine, leaf) in leaf_of.items():
        leaf_id = f"{spine}.{leaf}" if len(spines_of_leaf[leaf]) > 1 else leaf
        members[leaf_id].append(node)
        if spine:
            parents[leaf_id].add(spine)
    leaves = [Leaf(leaf_id, (), tuple(nodes_)) for leaf_id, nodes_ in members.items()]
    problems = [
        f"leaf value {leaf} appears under {len(s)} different parents; qualified with the parent"
        for leaf, s in sorted(spines_of_leaf.items())
        if len(s) > 1
    ]
    return Fabric(source, spines_from_parents(leaves, parents), tuple(unplaced), tuple(problems))

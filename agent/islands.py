"""NVLink per GPU and the islands of GPUs that reach each other over it. Pure."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping

from agent.nvml import NvmlGpu, normalize_bus_id
from agent.probes.nccl_topo import TopoGpu
from common.model import Gpu, NvLink, NvLinkIsland, NvLinkPeer

# NVML_NVLINK_VERSION_* enum -> NVLink generation (pynvml: 1_0=1, 2_0=2, 2_2=3, 3_0=4, 3_1=5, ...).
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
# Bidirectional GB/s per link by generation: A100 12 x 50 = 600, H100 18 x 50 = 900, B200 18 x 100.
NVLINK_LINK_GBPS = {1: 40, 2: 50, 3: 50, 4: 50, 5: 100, 6: 200}


def nvlink_from_nvml(gpu: NvmlGpu, gpu_by_bus: Mapping[str, int]) -> NvLink | None:
    if not gpu.links:
        return None
    active = [link for link in gpu.links if link.active]
    versions = sorted({NVLINK_GENERATION.get(link.version or 0, 0) for link in active})
    generation = versions[-1] if versions else 0
    per_peer: Counter[tuple[str, str]] = Counter()
    for link in active:
        bus = normalize_bus_id(link.remote_bus_id or "unknown")
        kind = "GPU" if bus in gpu_by_bus else link.remote_type
        per_peer[(bus, kind)] += 1
    peers = tuple(
        NvLinkPeer(
            pci_bus_id=bus,
            type=kind,  # type: ignore[arg-type]
            links=count,
            gpu=gpu_by_bus.get(bus),
        )
        for (bus, kind), count in sorted(per_peer.items())
    )
    return NvLink(
        version=generation,
        active_links=len(active),
        total_links=len(gpu.links),
        bandwidth_gbps=len(active) * NVLINK_LINK_GBPS.get(generation, 0),
        peers=peers,
    )


# NCCL topology files give the GPU's SM version (sm="80"), not the NVLink generation.
SM_MAJOR_TO_GENERATION = {6: 1, 7: 2, 8: 3, 9: 4, 10: 5}


def nvlink_from_topo(bus_id: str, gpu: TopoGpu, gpu_by_bus: Mapping[str, int]) -> NvLink | None:
    """NVLink as an NCCL topology file describes it (<nvlink target count tclass>): the links
    NCCL saw when it dumped the file; "fffffff:ff:ff.0" is an NVSwitch it could not see. A link
    to the GPU itself (Azure's ncv4 file has one per GPU) connects nothing and is dropped."""
    links = [link for link in gpu.links if link.target != bus_id]
    if not links:
        return None
    generation = SM_MAJOR_TO_GENERATION.get(gpu.sm // 10, 0)
    per_peer: Counter[tuple[str, str]] = Counter()
    for link in links:
        bus = link.target
        if bus in gpu_by_bus:
            kind = "GPU"
        elif link.tclass == 0x068000 or bus.startswith("fffffff"):
            kind = "NVSwitch"
        elif link.tclass == 0x068001:
            kind = "CPU"
        else:
            kind = "Unknown"
        per_peer[(bus, kind)] += link.count
    count = sum(per_peer.values())
    return NvLink(
        version=generation,
        active_links=count,
        total_links=count,
        bandwidth_gbps=count * NVLINK_LINK_GBPS.get(generation, 0),
        peers=tuple(
            NvLinkPeer(pci_bus_id=bus, type=kind, links=n, gpu=gpu_by_bus.get(bus))  # type: ignore[arg-type]
            for (bus, kind), n in sorted(per_peer.items())
        ),
    )


def islands(gpus: list[Gpu]) -> tuple[NvLinkIsland, ...]:
    """GPUs that reach each other over NVLink, directly or through an NVSwitch."""
    parent = {g.index: g.index for g in gpus}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    switched: list[int] = []
    for g in gpus:
        for peer in g.nvlink.peers if g.nvlink else ():
            if peer.gpu is not None and peer.gpu in parent:
                parent[find(g.index)] = find(peer.gpu)
            elif peer.type == "NVSwitch" and g.index not in switched:
                switched.append(g.index)
    for a, b in itertools.pairwise(switched):
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for g in gpus:
        groups.setdefault(find(g.index), []).append(g.index)
    bandwidth = {g.index: g.nvlink.bandwidth_gbps if g.nvlink else 0 for g in gpus}
    members = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    return tuple(
        NvLinkIsland(id=i, gpus=tuple(m), bandwidth_gbps=min(bandwidth[x] for x in m))
        for i, m in enumerate(members)
    )

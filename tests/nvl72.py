"""A GB200 NVL72 test fabric: racks of 18 compute trays, each tray a node with 4 GPUs whose
`gpus[].fabric` names the rack's NVLink domain (its cluster UUID and clique).

Built here for tests, not captured from a machine: the shape follows NVIDIA's published GB200 NVL72
layout (18 compute trays x 2 Grace CPUs + 4 Blackwell GPUs, one NVLink domain of 72 GPUs per rack;
shared/notes/nvidia_fabric.md) and the tray naming of the real GB200 SuperPOD ibnetdiscover dump in
tests/fixtures/fabric/ibnetdiscover/topograph-gb200-railopt-example.out. The cluster UUIDs are made
up (uuid5 of the rack's name), so no test reads them as a real machine's.
"""

from __future__ import annotations

import uuid
from typing import Any

from agent.summary import summarize
from common import api
from common.model import (
    Fabric,
    Gpu,
    GpuDirect,
    NodeStatus,
    NvLink,
    NvLinkIsland,
    NvLinkPeer,
    RdmaSupport,
    StorageSupport,
)

TRAYS = 18  # compute trays per NVL72 rack
GPUS = 4  # Blackwell GPUs per tray
# The four GPUs of a GB200 compute tray sit in PCI domains 0008, 0009, 0018 and 0019.
_BUS = ("0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0")
_NS = uuid.UUID("6f1f6a56-4c1e-4d2b-9b8e-0e6a6e5c7a72")


def cluster_uuid(rack: int) -> str:
    return str(uuid.uuid5(_NS, f"rack-{rack}"))


def domain(rack: int, clique: int = 1) -> str:
    """The label value of the rack's NVLink domain (the spelling of nvidia.com/gpu.clique)."""
    return f"{cluster_uuid(rack)}.{clique}"


def tray_name(rack: int, tray: int) -> str:
    return f"nvl{rack:02d}-c{tray + 1:02d}"


def _gpu(name: str, i: int, fabric: Fabric | None) -> Gpu:
    switches = tuple(
        NvLinkPeer(pci_bus_id=f"ffff:0{k}:00.0", type="NVSwitch", links=2) for k in range(9)
    )
    return Gpu(
        index=i,
        pci_bus_id=_BUS[i],
        uuid=f"GPU-{uuid.uuid5(_NS, f'{name}-{i}')}",
        product="NVIDIA GB200",
        compute_capability="10.0",
        mig_mode="Disabled",
        nvlink=NvLink(
            version=5, active_links=18, total_links=18, bandwidth_gbps=1800, peers=switches
        ),
        fabric=fabric,
    )


def tray_status(
    rack: int,
    tray: int,
    *,
    cliques: tuple[int | None, ...] = (1, 1, 1, 1),
    racks: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """The GpuNodeStatus object of one tray. `cliques[i]` None: GPU i has no fabric yet (still
    forming); `racks[i]` puts GPU i in another rack's cluster (GPUs that disagree)."""
    gpus = []
    for i, clique in enumerate(cliques):
        owner = racks[i] if racks is not None else rack
        fabric = None if clique is None else Fabric(cluster_uuid(owner), clique)
        gpus.append(_gpu(tray_name(rack, tray), i, fabric))
    island = NvLinkIsland(id=0, gpus=tuple(range(len(gpus))), bandwidth_gbps=1800)
    status = NodeStatus(
        gpus=tuple(gpus),
        nvlink_islands=(island,),
        gpudirect=GpuDirect(),
        summary=summarize(gpus, (island,), (), RdmaSupport(), StorageSupport(), ()),
    )
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.NODE_STATUS_KIND,
        "metadata": {"name": tray_name(rack, tray)},
        "status": status.to_dict(),
    }


def tray_node(
    rack: int,
    tray: int,
    *,
    leaf: str | None = None,
    pair: str | None = None,
    quad: str | None = None,
    spine: str | None = None,
    labeled: bool = True,
    gpus: int = GPUS,
) -> dict[str, Any]:
    """The Node object of one tray as the placer sees it: the NVLink domain label (when
    `labeled`), the network labels given, `gpus` allocatable GPUs, Ready."""
    labels = {"kubernetes.io/hostname": tray_name(rack, tray)}
    if labeled:
        labels[api.LABEL_NVLINK_DOMAIN] = domain(rack)
    for key, value in (("leaf", leaf), ("leaf-pair", pair), ("leaf-quad", quad), ("spine", spine)):
        if value is not None:
            labels[f"{api.GROUP}/{key}"] = value
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": tray_name(rack, tray), "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "144", api.GPU_RESOURCE: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def racks_under_leaves(racks: int, racks_per_leaf: int = 1) -> list[dict[str, Any]]:
    """Node objects of `racks` NVL72 racks; `racks_per_leaf` racks share a leaf domain (rail
    leaves of one scalable unit), leaf domains paired and quadded in order, one spine."""
    out = []
    for rack in range(racks):
        lf = rack // racks_per_leaf
        for tray in range(TRAYS):
            out.append(
                tray_node(
                    rack,
                    tray,
                    leaf=f"leaf-{lf}",
                    pair=f"pair-{lf // 2}",
                    quad=f"quad-{lf // 4}",
                    spine="spine-0",
                )
            )
    return out

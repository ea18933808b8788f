"""Probe results -> GpuNodeStatus. Pure: no I/O, no clock (the caller passes `now`).

Every list is sorted by its key so that an unchanged node gives a byte-identical status. The parts
live beside this module: islands (NVLink), hca_select (compute fabric), conditions, summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agent.conditions import conditions, find_faults
from agent.hca_select import Candidate, Choice, select
from agent.islands import islands, nvlink_from_nvml, nvlink_from_topo
from agent.nvml import NvmlGpu, NvmlInventory, normalize_bus_id
from agent.probes.gds import GdsProbe
from agent.probes.nccl_topo import NcclTopo
from agent.probes.pci import PciFunction, PciTree
from agent.probes.rdma import RawHca
from agent.results import Options, Outcome, ProbeResults
from agent.summary import summarize
from agent.topology import Locality, closest
from common.model import (
    Fabric,
    Gpu,
    GpuDirect,
    Hca,
    NearHca,
    NodeStatus,
    NvmePeer,
    RdmaSupport,
    StorageSupport,
)
from common.natural import natural_key

__all__ = ["Assembled", "Options", "Outcome", "Place", "ProbeResults", "assemble"]

FABRIC_STATE_COMPLETED = 3
# Names for GPUs seen on PCI only (no NVML); the PCI device id is all we have then.
PCI_GPU_NAMES = {
    0x20B0: "NVIDIA A100-SXM4-40GB",
    0x20B2: "NVIDIA A100-SXM4-80GB",
    0x20B5: "NVIDIA A100 80GB PCIe",
    0x2237: "NVIDIA A10G",
    0x2330: "NVIDIA H100 80GB HBM3",
    0x2331: "NVIDIA H100 PCIe",
    0x2335: "NVIDIA H200",
    0x26B1: "NVIDIA RTX 6000 Ada Generation",
    0x2901: "NVIDIA B200",
}


@dataclass(frozen=True, slots=True)
class Place:
    label: str  # GPU0, NIC3, NVME1 (the table's names)
    name: str  # device name: GPU index, mlx5_0, nvme0
    bus_id: str
    locality: Locality


@dataclass(frozen=True, slots=True)
class Assembled:
    status: NodeStatus
    places: tuple[Place, ...]


def _locality(
    pci: PciTree | None, topo: NcclTopo | None, bus_id: str, nic: bool = False
) -> Locality:
    """One source for every device of a pass, so no distance mixes two trees: sysfs, or with a
    topology file the file's tree with sysfs used only to hang devices into it, as NCCL does."""
    function = pci.get(bus_id) if pci is not None else None
    sysfs = function.locality if function is not None else None
    if topo is not None:
        return topo.attach(bus_id, sysfs, nic)
    return sysfs if sysfs is not None else Locality(root="")


def _pcie_root(function: PciFunction | None) -> str:
    return function.locality.root if function is not None else ""


def _fabric(gpu: NvmlGpu) -> Fabric | None:
    info = gpu.fabric
    # go-nvlib's IsFabricAttached: completed, registered OK, and a non-zero cluster UUID.
    if info is None or info.state != FABRIC_STATE_COMPLETED or info.status != 0:
        return None
    if info.cluster_uuid.replace("-", "").strip("0") == "":
        return None
    return Fabric(cluster_uuid=info.cluster_uuid, clique_id=info.clique_id)


def _mig(mode: int | None) -> Literal["Enabled", "Disabled", "NotSupported"]:
    if mode is None:
        return "NotSupported"
    return "Enabled" if mode == 1 else "Disabled"


def _near_hcas(place: Locality, hca_places: Mapping[str, Locality]) -> tuple[NearHca, ...]:
    dist, names = closest(place, hca_places)
    return tuple(NearHca(name=n, distance=dist) for n in names) if dist else ()


def _gpus_from_nvml(
    inv: NvmlInventory,
    pci: PciTree | None,
    topo: NcclTopo | None,
    hca_places: Mapping[str, Locality],
) -> list[Gpu]:
    bus_of = {g.index: normalize_bus_id(g.pci_bus_id) for g in inv.gpus}
    gpu_by_bus = {bus: index for index, bus in bus_of.items()}
    gpus = []
    for g in inv.gpus:
        bus = bus_of[g.index]
        function = pci.get(bus) if pci is not None else None
        place = _locality(pci, topo, bus)
        cc = g.compute_capability
        gpus.append(
            Gpu(
                index=g.index,
                pci_bus_id=bus,
                uuid=g.uuid,
                product=g.name,
                memory_mib=(g.memory_total_bytes or 0) // (1 << 20),
                compute_capability=f"{cc[0]}.{cc[1]}" if cc else "",
                mig_mode=_mig(g.mig_mode),
                pcie_root=_pcie_root(function),
                pcie_switch=place.nearest_switch,
                numa_node=place.numa_node,
                local_cpus=place.local_cpus,
                pcie_link_speed=function.link_speed if function else "",
                pcie_link_width=function.link_width if function else 0,
                nearest_hcas=_near_hcas(place, hca_places),
                nvlink=nvlink_from_nvml(g, gpu_by_bus),
                fabric=_fabric(g),
            )
        )
    return gpus


def _gpus_from_pci(
    pci: PciTree | None, topo: NcclTopo | None, hca_places: Mapping[str, Locality]
) -> list[Gpu]:
    if pci is None:
        return []
    gpus = []
    gpu_by_bus = {f.bus_id: i for i, f in enumerate(pci.gpus())}
    for index, function in enumerate(pci.gpus()):
        place = _locality(pci, topo, function.bus_id)
        described = topo.gpus.get(function.bus_id) if topo is not None else None
        gpus.append(
            Gpu(
                index=index,
                pci_bus_id=function.bus_id,
                product=PCI_GPU_NAMES.get(function.device, f"NVIDIA 10de:{function.device:04x}"),
                pcie_root=_pcie_root(function),
                pcie_switch=place.nearest_switch,
                numa_node=place.numa_node,
                local_cpus=place.local_cpus,
                pcie_link_speed=function.link_speed,
                pcie_link_width=function.link_width,
                nearest_hcas=_near_hcas(place, hca_places),
                # Without NVML, the topology file is the only NVLink source (the condition says so).
                nvlink=(
                    nvlink_from_topo(function.bus_id, described, gpu_by_bus) if described else None
                ),
            )
        )
    return gpus


def _hcas(
    raws: list[RawHca],
    pci: PciTree | None,
    topo: NcclTopo | None,
    gdr: bool,
    choice: Mapping[str, Choice],
) -> list[Hca]:
    hcas = []
    for raw in raws:
        function = pci.get(raw.pci_bus_id) if pci is not None and raw.pci_bus_id else None
        place = _locality(pci, topo, raw.pci_bus_id, nic=True)
        hcas.append(
            Hca(
                name=raw.name,
                model=raw.model,
                board_id=raw.board_id,
                fw_version=raw.fw_version,
                node_guid=raw.node_guid,
                pci_bus_id=raw.pci_bus_id,
                pcie_root=_pcie_root(function),
                pcie_switch=place.nearest_switch,
                numa_node=place.numa_node,
                netdevs=raw.netdevs,
                gdr_capable=gdr,
                ports=raw.ports,
                compute_fabric=choice[raw.name].compute_fabric,
                selection=choice[raw.name].selection,
            )
        )
    return hcas


def _compute_fabric(
    hcas: list[RawHca],
    hca_places: Mapping[str, Locality],
    gpu_places: Mapping[str, Locality],
    opts: Options,
) -> dict[str, Choice]:
    """Whether each HCA is compute fabric, and why (see agent.hca_select)."""
    known_gpus = {k: v for k, v in gpu_places.items() if v.root}
    candidates = []
    for h in hcas:
        place = hca_places.get(h.name)
        dist = closest(place, known_gpus)[0] if place is not None and place.root else None
        candidates.append(
            Candidate(
                name=h.name,
                ports=h.ports,
                card="/".join(x for x in (h.model, h.board_id) if x),
                on_pci=bool(h.pci_bus_id),
                gpu_distance=dist,
            )
        )
    return select(candidates, include=opts.hca_include, exclude=opts.hca_exclude)


def _storage(gds: GdsProbe | None, nvme: tuple[NvmePeer, ...]) -> StorageSupport:
    if gds is None:
        return StorageSupport(nvme_peers=nvme)
    valid = bool(gds.config_path) and not gds.config_error
    direct = valid and not gds.force_compat and bool(gds.nvidia_fs_version or gds.use_p2pdma)
    return StorageSupport(
        cu_file_enabled=direct,
        compat_mode=valid and (gds.force_compat or (gds.allow_compat and not direct)),
        nvidia_fs_version=gds.nvidia_fs_version,
        gds_version=gds.gds_version,
        config_path=gds.config_path,
        nvme_peers=nvme,
    )


def assemble(results: ProbeResults, opts: Options | None = None) -> Assembled:
    opts = opts or Options()
    pci, inv, rdma, gds, topo = (
        results.pci.value,
        results.nvml.value,
        results.rdma.value,
        results.gds.value,
        results.topo.value,
    )
    raw_hcas = sorted(rdma.hcas, key=lambda h: natural_key(h.name)) if rdma is not None else []
    # Places: everything the distance matrix and nearest-device lists are computed over.
    hca_places = {
        h.name: _locality(pci, topo, h.pci_bus_id, nic=True) for h in raw_hcas if h.pci_bus_id
    }
    gpus = (
        _gpus_from_nvml(inv, pci, topo, hca_places)
        if inv is not None
        else _gpus_from_pci(pci, topo, hca_places)
    )
    gpu_places = {str(g.index): _locality(pci, topo, g.pci_bus_id) for g in gpus}
    nvme_list = sorted(gds.nvme, key=lambda x: natural_key(x.name)) if gds is not None else []
    nvme_places = {n.name: _locality(pci, topo, n.pci_bus_id) for n in nvme_list}
    gdr = rdma is not None and (rdma.peermem or rdma.dmabuf)
    choice = _compute_fabric(raw_hcas, hca_places, gpu_places, opts)
    hcas = _hcas(raw_hcas, pci, topo, gdr, choice)

    nvme_peers = []
    for n in nvme_list:
        dist, near_gpus = closest(nvme_places[n.name], gpu_places)
        function = pci.get(n.pci_bus_id) if pci is not None else None
        nvme_peers.append(
            NvmePeer(
                name=n.name,
                pci_bus_id=n.pci_bus_id,
                numa_node=nvme_places[n.name].numa_node,
                pcie_root=_pcie_root(function),
                pcie_switch=nvme_places[n.name].nearest_switch,
                nearest_gpus=tuple(sorted(int(x) for x in near_gpus)),
                distance=dist,
            )
        )
    storage = _storage(gds, tuple(nvme_peers))
    rdma_support = RdmaSupport(
        peermem=bool(rdma and rdma.peermem),
        dmabuf=bool(rdma and rdma.dmabuf),
        capable=gdr and bool(hcas),
    )
    island_list = islands(gpus)
    faults = find_faults(results, gpus, hcas)
    status = NodeStatus(
        gpus=tuple(gpus),
        nvlink_islands=island_list,
        hcas=tuple(hcas),
        gpudirect=GpuDirect(rdma=rdma_support, storage=storage),
        network=results.network,
        summary=summarize(gpus, island_list, hcas, rdma_support, storage, faults),
        conditions=conditions(results, gpus, hcas, storage, faults, opts),
    )
    places = (
        [Place(f"GPU{g.index}", str(g.index), g.pci_bus_id, gpu_places[str(g.index)]) for g in gpus]
        + [
            Place(f"NIC{i}", h.name, h.pci_bus_id, hca_places[h.name])
            for i, h in enumerate(h for h in hcas if h.name in hca_places)
        ]
        + [
            Place(f"NVME{i}", n.name, n.pci_bus_id, nvme_places[n.name])
            for i, n in enumerate(nvme_list)
        ]
    )
    return Assembled(status=status, places=tuple(places))

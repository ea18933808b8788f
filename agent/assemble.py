"""Probe results -> GpuNodeStatus. Pure: no I/O, no clock (the caller passes `now`).

Every list is sorted by its key so that an unchanged node gives a byte-identical status.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, Literal, TypeVar

from agent.nvml import NvmlGpu, NvmlInventory, normalize_bus_id
from agent.probes.gds import GdsProbe
from agent.probes.nccl_topo import NcclTopo
from agent.probes.pci import PciFunction, PciTree
from agent.probes.rdma import RdmaProbe
from agent.topology import Locality, closest
from common import api
from common.labels import hca_profile
from common.model import (
    Condition,
    Fabric,
    Gpu,
    GpuDirect,
    Hca,
    HcaPort,
    NearHca,
    NetworkPosition,
    NodeStatus,
    NvLink,
    NvLinkIsland,
    NvLinkPeer,
    NvmePeer,
    RdmaSupport,
    StorageSupport,
    Summary,
)

T = TypeVar("T")

# NVML_NVLINK_VERSION_* enum -> NVLink generation (pynvml: 1_0=1, 2_0=2, 2_2=3, 3_0=4, 3_1=5, ...).
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
# Bidirectional GB/s per link by generation: A100 12 x 50 = 600, H100 18 x 50 = 900, B200 18 x 100.
NVLINK_LINK_GBPS = {1: 40, 2: 50, 3: 50, 4: 50, 5: 100, 6: 200}
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
class Outcome(Generic[T]):
    """A probe's value, or why there is none (reason: CamelCase word, message: for people)."""

    value: T | None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ProbeResults:
    pci: Outcome[PciTree]
    nvml: Outcome[NvmlInventory]
    rdma: Outcome[RdmaProbe]
    gds: Outcome[GdsProbe]
    topo: Outcome[NcclTopo] = Outcome(None, "NotConfigured")
    network: NetworkPosition = field(default_factory=NetworkPosition)


@dataclass(frozen=True, slots=True)
class Options:
    now: str = "1970-01-01T00:00:00Z"
    previous: Mapping[str, Condition] = field(default_factory=dict)
    hca_exclude: tuple[str, ...] = ()


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


def natural(name: str) -> tuple[object, ...]:
    """mlx5_2 before mlx5_10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _locality(pci: PciTree | None, topo: NcclTopo | None, bus_id: str) -> Locality:
    if topo is not None and bus_id in topo.devices:
        return topo.devices[bus_id]
    function = pci.get(bus_id) if pci is not None else None
    return function.locality if function is not None else Locality(root="")


def _pcie_root(function: PciFunction | None) -> str:
    return function.locality.root if function is not None else ""


def _nvlink(gpu: NvmlGpu, gpu_by_bus: Mapping[str, int]) -> NvLink | None:
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


def _gpus_from_nvml(inv: NvmlInventory, pci: PciTree | None, topo: NcclTopo | None) -> list[Gpu]:
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
                nvlink=_nvlink(g, gpu_by_bus),
                fabric=_fabric(g),
            )
        )
    return gpus


def _gpus_from_pci(pci: PciTree | None, topo: NcclTopo | None) -> list[Gpu]:
    if pci is None:
        return []
    gpus = []
    for index, function in enumerate(pci.gpus()):
        place = _locality(pci, topo, function.bus_id)
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
            )
        )
    return gpus


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


def _port_faulty(port: HcaPort) -> bool:
    # An administratively disabled port is a choice, not a fault; a port that is cabled but not
    # ACTIVE (Polling, LinkErrorRecovery, INIT/ARMED without an SM) is.
    return port.state != "ACTIVE" and port.phys_state != "Disabled"


def _hcas(
    rdma: RdmaProbe | None, pci: PciTree | None, topo: NcclTopo | None, gdr: bool
) -> list[Hca]:
    if rdma is None:
        return []
    hcas = []
    for raw in sorted(rdma.hcas, key=lambda h: natural(h.name)):
        function = pci.get(raw.pci_bus_id) if pci is not None and raw.pci_bus_id else None
        place = _locality(pci, topo, raw.pci_bus_id)
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
            )
        )
    return hcas


def _condition(ctype: str, ok: bool, reason: str, message: str, opts: Options) -> Condition:
    status: Literal["True", "False"] = "True" if ok else "False"
    previous = opts.previous.get(ctype)
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status
        else opts.now
    )
    return Condition(
        type=ctype, status=status, reason=reason, message=message, last_transition_time=since
    )


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
    gpus = _gpus_from_nvml(inv, pci, topo) if inv is not None else _gpus_from_pci(pci, topo)
    gdr = rdma is not None and (rdma.peermem or rdma.dmabuf)
    hcas = _hcas(rdma, pci, topo, gdr)

    # Places: everything the distance matrix and nearest-device lists are computed over.
    gpu_places = {str(g.index): _locality(pci, topo, g.pci_bus_id) for g in gpus}
    hca_places = {h.name: _locality(pci, topo, h.pci_bus_id) for h in hcas if h.pci_bus_id}
    nvme_list = sorted(gds.nvme, key=lambda x: natural(x.name)) if gds is not None else []
    nvme_places = {n.name: _locality(pci, topo, n.pci_bus_id) for n in nvme_list}

    with_hcas = []
    for g in gpus:
        dist, names = closest(gpu_places[str(g.index)], hca_places)
        near = tuple(NearHca(name=n, distance=dist) for n in names) if dist else ()
        with_hcas.append(replace(g, nearest_hcas=near))
    gpus = with_hcas

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

    # Summary: exactly what the labels are made from.
    usable = sorted(
        (
            h.name
            for h in hcas
            if h.gdr_capable
            and any(p.state == "ACTIVE" for p in h.ports)
            and not any(fnmatch.fnmatchcase(h.name, pat) for pat in opts.hca_exclude)
        ),
        key=natural,
    )
    rdma_ports = sum(1 for h in hcas if h.name in usable for p in h.ports if p.state == "ACTIVE")
    biggest = max(island_list, key=lambda i: (len(i.gpus), i.bandwidth_gbps), default=None)
    numa_counts = Counter(g.numa_node for g in gpus)
    cufile: Literal["true", "compat", "false"] = (
        "true" if storage.cu_file_enabled else "compat" if storage.compat_mode else "false"
    )

    faults: list[str] = []
    if results.nvml.value is None and gpus:
        faults.append(f"NVML unavailable ({results.nvml.reason})")
    for g in gpus:
        if g.nvlink and 0 < g.nvlink.active_links < g.nvlink.total_links:
            faults.append(
                f"GPU {g.index} NVLink partial: {g.nvlink.active_links}/{g.nvlink.total_links}"
            )
    if inv is not None:
        for ng in inv.gpus:
            if ng.fabric and ng.fabric.state == FABRIC_STATE_COMPLETED and ng.fabric.status != 0:
                faults.append(f"GPU {ng.index} NVLink fabric registration failed")
    for h in hcas:
        for p in h.ports:
            if _port_faulty(p):
                faults.append(f"{h.name} port {p.port} {p.state}/{p.phys_state}")

    summary = Summary(
        gpu_count=len(gpus),
        nvlink_island_size=len(biggest.gpus) if biggest else 0,
        nvlink_bandwidth_gbps=biggest.bandwidth_gbps if biggest else 0,
        numa_gpus_max=max(numa_counts.values(), default=0),
        rdma=rdma_support.capable and rdma_ports > 0,
        rdma_ports=rdma_ports,
        usable_hcas=tuple(usable),
        hca_profile=hca_profile(usable),
        cufile=cufile,
        fabric_health="degraded" if faults else "ok",
    )

    conditions = _conditions(results, gpus, hcas, storage, faults, opts)
    status = NodeStatus(
        gpus=tuple(gpus),
        nvlink_islands=island_list,
        hcas=tuple(hcas),
        gpudirect=GpuDirect(rdma=rdma_support, storage=storage),
        network=results.network,
        summary=summary,
        conditions=conditions,
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


def _conditions(
    results: ProbeResults,
    gpus: list[Gpu],
    hcas: list[Hca],
    storage: StorageSupport,
    faults: list[str],
    opts: Options,
) -> tuple[Condition, ...]:
    conds = []
    nvml = results.nvml
    if nvml.value is not None:
        errs = [f"GPU {g.index}: {e}" for g in nvml.value.gpus for e in g.errors]
        msg = f"driver {nvml.value.driver_version}, {len(nvml.value.gpus)} GPUs"
        if errs:
            msg += "; field errors: " + "; ".join(errs[:5])
        conds.append(_condition(api.COND_NVML, True, "Initialized", msg, opts))
    else:
        found = f"; {len(gpus)} NVIDIA GPUs found on PCI" if gpus else ""
        conds.append(_condition(api.COND_NVML, False, nvml.reason, nvml.message + found, opts))

    pci = results.pci
    if pci.value is not None:
        where = (
            f" (locality from NCCL topology {results.topo.value.path})"
            if results.topo.value
            else ""
        )
        if results.topo.value is None and results.topo.reason not in ("", "NotConfigured"):
            where = f" (NCCL topology file ignored: {results.topo.message})"
        probs = "; ".join(pci.value.problems[:5])
        msg = f"{len(pci.value.functions)} PCI functions of interest{where}"
        conds.append(
            _condition(api.COND_PCIE, True, "Probed", msg + (f"; {probs}" if probs else ""), opts)
        )
    else:
        conds.append(_condition(api.COND_PCIE, False, pci.reason, pci.message, opts))

    rdma = results.rdma
    if rdma.value is not None:
        probs = "; ".join(rdma.value.problems[:5])
        reason = "Probed" if hcas else "NoRdmaDevices"
        msg = f"{len(hcas)} RDMA devices" + (f"; {probs}" if probs else "")
        conds.append(_condition(api.COND_RDMA, True, reason, msg, opts))
    else:
        conds.append(_condition(api.COND_RDMA, False, rdma.reason, rdma.message, opts))

    gds = results.gds
    if gds.value is None:
        conds.append(_condition(api.COND_GDS, False, gds.reason, gds.message, opts))
    elif gds.value.config_error:
        conds.append(
            _condition(
                api.COND_GDS,
                False,
                "ConfigInvalid",
                f"{gds.value.config_path}: {gds.value.config_error}",
                opts,
            )
        )
    else:
        mode = (
            "GPUDirect"
            if storage.cu_file_enabled
            else "compatibility mode"
            if storage.compat_mode
            else "unavailable"
        )
        where = storage.config_path or "no cufile.json found"
        fs = (
            f"nvidia-fs {storage.nvidia_fs_version}"
            if storage.nvidia_fs_version
            else "nvidia-fs not loaded"
        )
        reason = "Probed" if storage.config_path else "NoConfig"
        conds.append(_condition(api.COND_GDS, True, reason, f"cuFile {mode}; {where}; {fs}", opts))

    conds.append(
        _condition(
            api.COND_FABRIC,
            not faults,
            "Healthy" if not faults else "Degraded",
            "; ".join(faults[:8]) if faults else "all NVLinks and cabled RDMA ports up",
            opts,
        )
    )
    return tuple(conds)

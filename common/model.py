"""GpuNodeStatus as frozen dataclasses; ``to_wire`` gives the camelCase status object.

Field order is the wire order. Every list is sorted by its key when assembled, so an unchanged node
gives a byte-identical status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from common.wire import from_wire, to_wire

Distance = Literal["PIX", "PXB", "PHB", "NODE", "SYS"]
DISTANCE_ORDER: dict[str, int] = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
CuFileState = Literal["true", "compat", "false"]


def _wire(name: str) -> dict[str, str]:
    return {"wire": name}


@dataclass(frozen=True, slots=True)
class NvLinkPeer:
    pci_bus_id: str
    type: Literal["GPU", "NVSwitch", "CPU", "Unknown"]
    links: int
    gpu: int | None = None


@dataclass(frozen=True, slots=True)
class NvLink:
    version: int  # NVLink generation (3 = A100, 4 = H100, 5 = B200), not the NVML enum
    active_links: int
    total_links: int
    bandwidth_gbps: int = field(metadata=_wire("bandwidthGBps"))  # bidirectional, all links
    peers: tuple[NvLinkPeer, ...] = ()


@dataclass(frozen=True, slots=True)
class Fabric:
    cluster_uuid: str
    clique_id: int


@dataclass(frozen=True, slots=True)
class NearHca:
    name: str
    distance: Distance


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    pci_bus_id: str
    uuid: str = ""
    product: str = ""
    memory_mib: int = field(default=0, metadata=_wire("memoryMiB"))
    compute_capability: str = ""
    mig_mode: Literal["Enabled", "Disabled", "NotSupported", "Unknown"] = "Unknown"
    pcie_root: str = ""
    pcie_switch: str = ""
    numa_node: int = -1
    local_cpus: str = ""
    pcie_link_speed: str = ""
    pcie_link_width: int = 0
    nvlink: NvLink | None = None
    fabric: Fabric | None = None
    nearest_hcas: tuple[NearHca, ...] = ()


@dataclass(frozen=True, slots=True)
class NvLinkIsland:
    id: int
    gpus: tuple[int, ...]
    bandwidth_gbps: int = field(metadata=_wire("bandwidthGBps"))  # per GPU, smallest in island


@dataclass(frozen=True, slots=True)
class HcaPort:
    port: int
    state: str  # ACTIVE, DOWN, INIT, ARMED, ...
    phys_state: str  # LinkUp, Polling, Disabled, ...
    rate_gbps: float
    link_layer: str  # InfiniBand | Ethernet
    guid: str = ""  # port GUID, sysfs form "xxxx:xxxx:xxxx:xxxx" (IB only; "" when unknown)


@dataclass(frozen=True, slots=True)
class Hca:
    name: str
    model: str = ""
    board_id: str = ""
    fw_version: str = ""
    node_guid: str = ""
    pci_bus_id: str = ""
    pcie_root: str = ""
    pcie_switch: str = ""
    numa_node: int = -1
    netdevs: tuple[str, ...] = ()
    gdr_capable: bool = False
    ports: tuple[HcaPort, ...] = ()
    compute_fabric: bool = False  # one of the node's GPU-to-GPU fabric NICs (see agent.hca_select)
    selection: str = ""  # why it counts or not, for people


@dataclass(frozen=True, slots=True)
class RdmaSupport:
    peermem: bool = False
    dmabuf: bool = False
    capable: bool = False


@dataclass(frozen=True, slots=True)
class NvmePeer:
    name: str
    pci_bus_id: str
    numa_node: int = -1
    pcie_root: str = ""
    pcie_switch: str = ""
    nearest_gpus: tuple[int, ...] = ()
    distance: Distance | None = None


@dataclass(frozen=True, slots=True)
class StorageSupport:
    cu_file_enabled: bool = False
    compat_mode: bool = False
    nvidia_fs_version: str = ""
    gds_version: str = ""
    config_path: str = ""
    nvme_peers: tuple[NvmePeer, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuDirect:
    rdma: RdmaSupport = RdmaSupport()
    storage: StorageSupport = StorageSupport()


@dataclass(frozen=True, slots=True)
class NetworkPosition:
    source: str = "none"  # where the position came from: none | file | nccl-topo
    leaf: str = ""
    spine: str = ""
    block: str = ""


@dataclass(frozen=True, slots=True)
class Summary:
    """Exactly the values the node labels are made from (see common.labels)."""

    gpu_count: int = 0
    nvlink_island_size: int = 0
    nvlink_bandwidth_gbps: int = field(default=0, metadata=_wire("nvlinkBandwidthGBps"))
    numa_gpus_max: int = 0
    rdma: bool = False
    rdma_ports: int = 0
    usable_hcas: tuple[str, ...] = ()
    hca_profile: str = ""
    cufile: CuFileState = "false"
    fabric_health: Literal["ok", "degraded"] = "ok"
    # Multi-node NVLink domain (common.nvlink); None (left out of the status) when there is none.
    nvlink_domain: str | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: str | None = None


@dataclass(frozen=True, slots=True)
class NodeStatus:
    gpus: tuple[Gpu, ...] = ()
    nvlink_islands: tuple[NvLinkIsland, ...] = ()
    hcas: tuple[Hca, ...] = ()
    gpudirect: GpuDirect = GpuDirect()
    network: NetworkPosition = NetworkPosition()
    summary: Summary = Summary()
    conditions: tuple[Condition, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return cast(dict[str, object], to_wire(self, lean=True))

    @classmethod
    def from_dict(cls, data: object) -> NodeStatus:
        return from_wire(cls, data, "status")

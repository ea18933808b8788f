"""RDMA devices from /sys/class/infiniband and GPUDirect RDMA kernel support.

Formats (kernel drivers/infiniband/core/sysfs.c): state "4: ACTIVE", phys_state "5: LinkUp",
rate "400 Gb/sec (4X NDR)", link_layer "InfiniBand" | "Ethernet", gids/0 "%pI6"
("fe80:0000:0000:0000:946d:ae03:00cd:e72c"). hca_type and board_id are mlx5's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent import values
from agent.host import HostReader
from common.model import HcaPort

IB_CLASS = "/sys/class/infiniband"
_KERNEL = re.compile(r"^(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class RawHca:
    name: str
    pci_bus_id: str
    model: str
    board_id: str
    fw_version: str
    node_guid: str
    netdevs: tuple[str, ...]
    ports: tuple[HcaPort, ...]


@dataclass(frozen=True, slots=True)
class RdmaProbe:
    hcas: tuple[RawHca, ...]
    peermem: bool
    dmabuf: bool
    problems: tuple[str, ...] = ()


def port_guid(gid: str | None) -> str:
    """GID 0 of an IB port -> its port GUID (the low 64 bits) in node_guid's sysfs form."""
    groups = (gid or "").strip().split(":")
    if len(groups) != 8 or not all(len(g) == 4 for g in groups):
        return ""
    low = [g.lower() for g in groups[4:]]
    try:
        if int("".join(low), 16) == 0:
            return ""
    except ValueError:
        return ""
    return ":".join(low)


def _port(reader: HostReader, base: str, name: str, problems: list[str]) -> HcaPort | None:
    try:
        number = int(name)
    except ValueError:
        problems.append(f"{base}: ignored port entry {name!r}")
        return None
    pbase = f"{base}/{number}"
    rate = values.rate_gbps(reader, f"{pbase}/rate")
    if rate is None:
        problems.append(f"{pbase}/rate: missing or unparsable")
    layer = values.word(reader, f"{pbase}/link_layer", values.LINK_LAYERS) or "Unknown"
    # On RoCE, GID 0 is derived from the MAC, not a port GUID a subnet manager knows.
    gid = reader.read(f"{pbase}/gids/0") if layer == "InfiniBand" else None
    guid = port_guid(gid)
    if gid and not guid and gid.strip(": 0"):  # all zeros is a real "no GID"
        reader.note(f"{pbase}/gids/0", f"not a GID: {gid[:40]!r}")
    return HcaPort(
        port=number,
        state=values.port_state(reader, f"{pbase}/state"),
        phys_state=values.port_state(reader, f"{pbase}/phys_state"),
        rate_gbps=rate or 0.0,
        link_layer=layer,
        guid=guid,
    )


def _dmabuf_possible(reader: HostReader) -> bool:
    # dma-buf GPUDirect RDMA needs the open NVIDIA kernel module and kernel >= 5.12 (the
    # ib_umem_dmabuf API); NCCL's definitive check needs libibverbs and CUDA, unavailable here.
    version = reader.read("/proc/driver/nvidia/version") or ""
    release = reader.read("/proc/sys/kernel/osrelease") or ""
    match = _KERNEL.match(release)
    if release and match is None:
        reader.note("/proc/sys/kernel/osrelease", f"not a kernel release: {release[:40]!r}")
    if version and not version.startswith("NVRM version:"):
        reader.note("/proc/driver/nvidia/version", f"not an NVRM version: {version[:40]!r}")
    if match is None or "Open Kernel Module" not in version:
        return False
    return (int(match.group(1)), int(match.group(2))) >= (5, 12)


def probe(reader: HostReader) -> RdmaProbe:
    problems: list[str] = []
    hcas: list[RawHca] = []
    for name in reader.listdir(IB_CLASS):
        base = f"{IB_CLASS}/{name}"
        bus_id = reader.basename_of_link(f"{base}/device") or ""
        if not bus_id or ":" not in bus_id:
            problems.append(f"{name}: no PCI device link")
            bus_id = ""
        ports = [
            port
            for entry in reader.listdir(f"{base}/ports")
            if (port := _port(reader, f"{base}/ports", entry, problems)) is not None
        ]
        if not ports:
            problems.append(f"{name}: no ports")
        hcas.append(
            RawHca(
                name=name,
                pci_bus_id=bus_id,
                model=values.text(reader, f"{base}/hca_type"),
                board_id=values.text(reader, f"{base}/board_id"),
                fw_version=values.text(reader, f"{base}/fw_ver"),
                node_guid=values.guid(reader, f"{base}/node_guid"),
                netdevs=tuple(reader.listdir(f"{base}/device/net")),
                ports=tuple(sorted(ports, key=lambda p: p.port)),
            )
        )
    peermem = any(
        reader.exists(p)
        for p in (
            "/sys/module/nvidia_peermem",
            "/sys/kernel/mm/memory_peers/nv_mem/version",
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        )
    )
    return RdmaProbe(
        hcas=tuple(hcas),
        peermem=peermem,
        dmabuf=bool(hcas) and _dmabuf_possible(reader),
        problems=tuple(problems),
    )

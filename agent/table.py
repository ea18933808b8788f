"""`probe -o table`: an `nvidia-smi topo -m` style matrix extended with HCAs and NVMe drives."""

from __future__ import annotations

from agent.assemble import Assembled, Place
from agent.topology import distance
from common.model import Gpu, Hca

LEGEND = """Legend:
  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""


def _nv(a: Gpu, b: Gpu) -> str | None:
    if a.nvlink is None or b.nvlink is None:
        return None
    direct = sum(p.links for p in a.nvlink.peers if p.gpu == b.index)
    if direct:
        return f"NV{direct}"
    a_sw = any(p.type == "NVSwitch" for p in a.nvlink.peers)
    b_sw = any(p.type == "NVSwitch" for p in b.nvlink.peers)
    if a_sw and b_sw:
        return f"NV{min(a.nvlink.active_links, b.nvlink.active_links)}"
    return None


def render(result: Assembled) -> str:
    status = result.status
    places = list(result.places)
    gpus = {str(g.index): g for g in status.gpus}
    if not places:
        return "No GPUs, RDMA devices or NVMe drives found on this node.\n"
    width = max(6, *(len(p.label) + 2 for p in places))
    header = " " * width + "".join(p.label.ljust(width) for p in places)
    header += "CPU Affinity".ljust(16) + "NUMA Affinity"
    lines = [header.rstrip()]
    for row in places:
        cells = []
        for col in places:
            cells.append(_cell(row, col, gpus).ljust(width))
        cpus = row.locality.local_cpus or "N/A"
        numa = str(row.locality.numa_node) if row.locality.numa_node >= 0 else "N/A"
        lines.append((row.label.ljust(width) + "".join(cells) + cpus.ljust(16) + numa).rstrip())
    lines.append("")
    lines.append(LEGEND)
    nics = [p for p in places if p.label.startswith("NIC")]
    if nics:
        lines += ["", "NIC Legend:"]
        by_name = {h.name: h for h in status.hcas}
        for p in nics:
            hca = by_name[p.name]
            ports = ", ".join(
                f"port {x.port} {x.state} {x.rate_gbps:g} Gb/s {x.link_layer}" for x in hca.ports
            )
            lines.append(f"  {p.label}: {p.name} {hca.pci_bus_id} ({ports})")
            lines.append(" " * (len(p.label) + 4) + _selection(hca, status.summary.usable_hcas))
    nvmes = [p for p in places if p.label.startswith("NVME")]
    if nvmes:
        lines += ["", "NVMe Legend:"]
        lines += [f"  {p.label}: {p.name} {p.bus_id}" for p in nvmes]
    s = status.summary
    lines += [
        "",
        f"Summary: {s.gpu_count} GPUs, largest NVLink island {s.nvlink_island_size} GPUs at "
        f"{s.nvlink_bandwidth_gbps} GB/s per GPU, at most {s.numa_gpus_max} GPUs per NUMA node, "
        f"RDMA {'yes' if s.rdma else 'no'} ({s.rdma_ports} usable ports), cuFile {s.cufile}, "
        f"fabric {s.fabric_health}",
    ]
    for c in status.conditions:
        lines.append(f"  {c.type}={c.status} ({c.reason}): {c.message}")
    return "\n".join(lines) + "\n"


def _selection(hca: Hca, usable: tuple[str, ...]) -> str:
    if not hca.compute_fabric:
        return f"not compute fabric: {hca.selection}"
    now = "usable for GPUDirect RDMA" if hca.name in usable else "not usable now"
    return f"compute fabric, {now}: {hca.selection}"


def _cell(row: Place, col: Place, gpus: dict[str, Gpu]) -> str:
    if row is col:
        return "X"
    if row.label.startswith("GPU") and col.label.startswith("GPU"):
        nv = _nv(gpus[row.name], gpus[col.name])
        if nv:
            return nv
    if not row.locality.root or not col.locality.root:
        return "?"
    return distance(row.locality, col.locality)

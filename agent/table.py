"""`probe -o table`: an `nvidia-smi topo -m` style matrix extended with HCAs and NVMe drives."""

from __future__ import annotations

import textwrap

from agent.assemble import Assembled, Place
from agent.summary import nvlink_domain
from agent.topology import distance
from common import api
from common.model import Gpu, Hca, Summary

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


NOT_COMPUTE = "*"  # suffix on the label of an HCA that is not compute fabric
AFFINITY = ("CPU Affinity", "NUMA Affinity")


def render(result: Assembled, width: int = 160) -> str:
    """The matrix, split into column blocks that each fit `width` characters, then legends."""
    status = result.status
    places = list(result.places)
    gpus = {str(g.index): g for g in status.gpus}
    if not places:
        return "No GPUs, RDMA devices or NVMe drives found on this node.\n"
    hcas = {h.name: h for h in status.hcas}
    nvml_known = any(c.type == api.COND_NVML and c.status == "True" for c in status.conditions)
    labels = {id(p): _label(p, hcas) for p in places}
    cell = max(6, *(len(x) + 2 for x in labels.values()))
    aff = [
        (
            p.locality.local_cpus or "N/A",
            str(p.locality.numa_node) if p.locality.numa_node >= 0 else "N/A",
        )
        for p in places
    ]
    cpu_w = max(len(AFFINITY[0]), *(len(a[0]) for a in aff)) + 2
    tail = cpu_w + len(AFFINITY[1])
    per_block = max(1, (width - cell) // cell)
    if cell + len(places) * cell + tail <= width:
        per_block = len(places)
    lines: list[str] = []
    for start in range(0, len(places), per_block):
        block = places[start : start + per_block]
        last = start + per_block >= len(places)
        if lines:
            lines.append("")
        header = " " * cell + "".join(labels[id(c)].ljust(cell) for c in block)
        if last and cell + len(block) * cell + tail <= width:
            header += AFFINITY[0].ljust(cpu_w) + AFFINITY[1]
            with_aff = True
        else:
            with_aff = False
        lines.append(header.rstrip())
        for i, row in enumerate(places):
            cells = "".join(_cell(row, col, gpus, nvml_known).ljust(cell) for col in block)
            extra = aff[i][0].ljust(cpu_w) + aff[i][1] if with_aff else ""
            lines.append((labels[id(row)].ljust(cell) + cells + extra).rstrip())
        if last and not with_aff:
            lines += ["", "".join(x.ljust(cell) for x in ("", *AFFINITY[:1])).rstrip()]
            lines += [
                (labels[id(p)].ljust(cell) + a[0].ljust(cpu_w) + a[1]).rstrip()
                for p, a in zip(places, aff, strict=True)
            ]
    lines.append("")
    lines.append(LEGEND)
    if any(_cell(a, b, gpus, nvml_known) == "NV?" for a in places for b in places):
        lines.append(
            "  NV?  = NVLink unknown: NVML is unavailable and no topology file describes it"
        )
    if any(labels[id(p)].endswith(NOT_COMPUTE) for p in places):
        lines.append(
            f"  NIC#{NOT_COMPUTE}= not compute fabric: never offered to NCCL (see the NIC Legend)"
        )
    nics = [p for p in places if p.label.startswith("NIC")]
    if nics:
        lines += ["", "NIC Legend:"]
        for p in nics:
            hca = hcas[p.name]
            ports = ", ".join(
                f"port {x.port} {x.state} {x.rate_gbps:g} Gb/s {x.link_layer}" for x in hca.ports
            )
            lines.append(f"  {labels[id(p)]}: {p.name} {hca.pci_bus_id} ({ports})")
            lines.append(" " * (len(p.label) + 4) + _selection(hca, status.summary.usable_hcas))
    nvmes = [p for p in places if p.label.startswith("NVME")]
    if nvmes:
        lines += ["", "NVMe Legend:"]
        lines += [f"  {p.label}: {p.name} {p.bus_id}" for p in nvmes]
    s = status.summary
    lines += [
        "",
        *textwrap.wrap(
            f"Summary: {s.gpu_count} GPUs, {_islands(result, nvml_known)}{_numa(s)}, "
            f"RDMA {'yes' if s.rdma else 'no'} ({s.rdma_ports} usable ports), cuFile "
            f"{s.cufile}, fabric {s.fabric_health}",
            width,
            subsequent_indent="  ",
        ),
    ]
    domain = nvlink_domain(status.gpus)
    if domain.value or domain.reason:  # only on multi-node NVLink (GB200/GB300 NVL72) nodes
        what = domain.value or f"none ({domain.reason})"
        lines += textwrap.wrap(
            f"NVLink domain ({api.LABEL_NVLINK_DOMAIN}): {what}",
            width,
            initial_indent="  ",
            subsequent_indent="      ",
        )
    for c in status.conditions:
        lines += textwrap.wrap(
            f"{c.type}={c.status} ({c.reason}): {c.message}",
            width,
            initial_indent="  ",
            subsequent_indent="      ",
        )
    return "\n".join(lines) + "\n"


def _islands(result: Assembled, nvml_known: bool) -> str:
    s = result.status.summary
    if not nvml_known and not any(g.nvlink for g in result.status.gpus) and s.gpu_count:
        return "NVLink unknown (no NVML)"
    if s.nvlink_island_size == 0:
        return "no NVLink"
    return f"largest NVLink island {s.nvlink_island_size} GPUs at {s.nvlink_bandwidth_gbps} GB/s per GPU"


def _numa(s: Summary) -> str:
    # 0 with GPUs present means a GPU's NUMA node is unknown (a VM's -1): not "at most 0".
    if s.numa_gpus_max:
        return f", at most {s.numa_gpus_max} GPUs per NUMA node"
    return ", GPUs per NUMA node unknown" if s.gpu_count else ""


def _label(place: Place, hcas: dict[str, Hca]) -> str:
    hca = hcas.get(place.name) if place.label.startswith("NIC") else None
    return place.label + NOT_COMPUTE if hca is not None and not hca.compute_fabric else place.label


def _selection(hca: Hca, usable: tuple[str, ...]) -> str:
    if not hca.compute_fabric:
        return f"not compute fabric: {hca.selection}"
    if hca.name in usable:
        now = "usable for GPUDirect RDMA"
    elif not any(p.state == "ACTIVE" for p in hca.ports):
        now = "not usable now (no port ACTIVE)"
    else:  # the port is up: what is missing is the node's GPUDirect RDMA
        now = "ACTIVE but no GPUDirect RDMA on this node (neither nvidia_peermem nor dma-buf)"
    return f"compute fabric, {now}: {hca.selection}"


def _cell(row: Place, col: Place, gpus: dict[str, Gpu], nvml_known: bool) -> str:
    if row is col:
        return "X"
    if row.label.startswith("GPU") and col.label.startswith("GPU"):
        a, b = gpus[row.name], gpus[col.name]
        nv = _nv(a, b)
        if nv:
            return nv
        if not nvml_known and (a.nvlink is None or b.nvlink is None):
            return "NV?"  # a PCIe distance here would claim there is no NVLink
    if not row.locality.root or not col.locality.root:
        return "?"
    return distance(row.locality, col.locality)

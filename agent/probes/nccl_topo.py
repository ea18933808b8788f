"""Locality from a vendor NCCL topology file (NCCL_TOPO_FILE format).

On cloud VMs the virtual PCI tree hides which GPU shares a switch with which NIC; Azure, AWS and
OCI publish that layout as an NCCL XML file, and NCCL itself trusts it. Each <cpu numaid> is a host
bridge; every <pci> bridge (class 0x0604xx) on the way down is a switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.host import HostReader
from agent.topology import Locality

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET


class NcclTopoError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class NcclTopo:
    path: str
    devices: dict[str, Locality]


def mask_to_cpulist(mask: str) -> str:
    """NCCL/hwloc affinity "0000ffff,ffffffff" (32-bit groups, most significant first) -> "0-47"."""
    try:
        value = int(mask.replace(",", ""), 16)
    except ValueError:
        return ""
    cpus = [i for i in range(value.bit_length()) if value >> i & 1]
    ranges: list[str] = []
    start = prev = -2
    for cpu in [*cpus, -1]:
        if cpu == prev + 1:
            prev = cpu
            continue
        if start >= 0:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(ranges)


def parse(text: str, path: str = "<topo>") -> NcclTopo:
    import xml.etree.ElementTree as ET  # only VMs given a topology file need the XML parser

    try:
        root = ET.fromstring(text)  # noqa: S314 - operator-supplied local file, no entities used
    except ET.ParseError as err:
        raise NcclTopoError(f"{path}: not valid XML: {err}") from err
    devices: dict[str, Locality] = {}
    cpus = root.iter("cpu") if root.tag != "cpu" else iter([root])
    for cpu in cpus:
        numa_text = cpu.get("numaid", "-1")
        try:
            numa = int(numa_text)
        except ValueError as err:
            raise NcclTopoError(f"{path}: cpu numaid {numa_text!r} is not an integer") from err
        cpulist = mask_to_cpulist(cpu.get("affinity", ""))

        def walk(node: ET.Element, switches: tuple[str, ...], numa: int, cpulist: str) -> None:
            for child in node.findall("pci"):
                busid = (child.get("busid") or "").lower()
                klass = int(child.get("class", "0x0") or "0x0", 16)
                if (klass >> 8) == 0x0604:
                    walk(child, (*switches, busid), numa, cpulist)
                    continue
                if busid:
                    devices[busid] = Locality(
                        root=f"cpu{numa}",
                        switches=switches,
                        numa_node=numa,
                        local_cpus=cpulist,
                        parent=switches[-1] if switches else "",
                    )
                walk(child, switches, numa, cpulist)

        walk(cpu, (), numa, cpulist)
    if not devices:
        raise NcclTopoError(f"{path}: no PCI devices under any <cpu>")
    return NcclTopo(path=path, devices=devices)


def load(reader: HostReader, host_path: str) -> NcclTopo:
    text = reader.read(host_path)
    if text is None:
        raise NcclTopoError(f"{host_path}: not found or unreadable")
    return parse(text, host_path)

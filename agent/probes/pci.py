"""PCIe functions and their place in the tree, from /sys/bus/pci/devices (kernel pci-sysfs ABI)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from agent import values
from agent.host import HostReader
from agent.topology import Locality

log = logging.getLogger(__name__)

PCI_DEVICES = "/sys/bus/pci/devices"
NODES_ONLINE = "/sys/devices/system/node/online"  # Documentation/ABI/stable/sysfs-devices-node
_BDF = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ROOT = re.compile(r"^pci[0-9a-f]{4,}:[0-9a-f]{2}$")

VENDOR_NVIDIA = 0x10DE
CLASS_BRIDGE_OTHER = 0x0680  # NVSwitch presents as "Bridge" (0x068000)
CLASS_NVME = 0x0108


@dataclass(frozen=True, slots=True)
class PciFunction:
    bus_id: str
    vendor: int
    device: int
    class_code: int  # 24-bit: base << 16 | sub << 8 | prog-if
    locality: Locality
    link_speed: str = ""
    link_width: int = 0

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == VENDOR_NVIDIA and (self.class_code >> 16) == 0x03


@dataclass(frozen=True, slots=True)
class PciTree:
    functions: dict[str, PciFunction]
    problems: tuple[str, ...] = ()

    def gpus(self) -> list[PciFunction]:
        return [f for bdf, f in sorted(self.functions.items()) if f.is_nvidia_gpu]

    def get(self, bus_id: str) -> PciFunction | None:
        return self.functions.get(bus_id)


def locality_of(
    reader: HostReader, bus_id: str, numa_node: int = -1, local_cpus: str = ""
) -> Locality | None:
    """Root complex and switch chain of a PCI function, from its canonical sysfs path."""
    canonical = reader.resolve(f"{PCI_DEVICES}/{bus_id}")
    if canonical is None:
        return None
    parts = canonical.strip("/").split("/")
    roots = [i for i, p in enumerate(parts) if _ROOT.match(p)]
    if not roots:
        return None
    start = roots[-1]
    chain = [p for p in parts[start + 1 :] if _BDF.match(p)]
    if not chain or chain[-1] != bus_id:
        return None
    bridges = chain[:-1]
    # The first bridge is the root port; then each switch shows as upstream port + downstream port.
    switches = tuple(bridges[1::2]) if bridges else ()
    return Locality(
        root=parts[start],
        switches=switches,
        parent=bridges[-1] if bridges else "",
        bridges=tuple(bridges),
        numa_node=numa_node,
        local_cpus=local_cpus,
    )


def probe(reader: HostReader, wanted: set[str] | None = None) -> PciTree:
    """Every PCI function that matters to us (GPUs, NVSwitches, NICs, NVMe), or `wanted` bus ids."""
    functions: dict[str, PciFunction] = {}
    problems: list[str] = []
    # A device says numa_node -1 when firmware gives no proximity (single-socket hosts, most cloud
    # VMs); with one NUMA node online every device is on it, as `nvidia-smi topo -m` also says.
    only = values.only_node(reader, NODES_ONLINE)
    fallback = only if only is not None else -1
    for bdf in reader.listdir(PCI_DEVICES):
        if not _BDF.match(bdf):
            problems.append(f"ignored odd PCI entry {bdf!r}")
            continue
        base = f"{PCI_DEVICES}/{bdf}"
        klass = values.hex_value(reader, f"{base}/class")
        if klass is None:
            problems.append(f"{bdf}: unreadable class")
            continue
        # Class first: most functions (bridges, chipset) are dismissed without reading more.
        candidate = (
            (klass >> 16) in (0x02, 0x03)
            or (klass >> 8) in (CLASS_NVME, CLASS_BRIDGE_OTHER)
            or (wanted is not None and bdf in wanted)
        )
        if not candidate:
            continue
        vendor = values.hex_value(reader, f"{base}/vendor")
        if vendor is None:
            problems.append(f"{bdf}: unreadable vendor")
            continue
        if (klass >> 16) == 0x03 and vendor != VENDOR_NVIDIA:
            continue  # another vendor's display controller (a BMC's VGA)
        numa = values.int_value(reader, f"{base}/numa_node", minimum=-1)
        numa = numa if numa is not None and numa >= 0 else fallback
        cpus = values.cpulist(reader, f"{base}/local_cpulist")
        place = locality_of(reader, bdf, numa, cpus)
        if place is None:
            problems.append(f"{bdf}: cannot place in the PCI tree")
            place = Locality(root="", numa_node=numa, local_cpus=cpus)
        functions[bdf] = PciFunction(
            bus_id=bdf,
            vendor=vendor,
            device=values.hex_value(reader, f"{base}/device") or 0,
            class_code=klass,
            locality=place,
            link_speed=values.link_speed(reader, f"{base}/current_link_speed"),
            link_width=values.int_value(reader, f"{base}/current_link_width") or 0,
        )
    for text in problems:
        log.warning("pci probe problem", extra={"problem": text})
    return PciTree(functions=functions, problems=tuple(problems))

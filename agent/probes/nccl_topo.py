"""Locality (and NVLink) from an NCCL topology file (NCCL_TOPO_FILE format).

On cloud VMs the virtual PCI tree hides which GPU shares a switch with which NIC; Azure, AWS and
OCI publish that layout as an NCCL XML file, and NCCL itself trusts it. Read the way NCCL reads it
(NVIDIA/nccl src/graph/xml.cc, topo.cc, src/transport/net_ib.cc):
- Each <cpu> is a host bridge with its NUMA node; two <cpu> with one numaid are two host bridges.
- A <pci> is a bridge (a PCIe switch) when its class is 0x0604xx, or, with no class attribute (the
  AWS p5 file), when it has <pci> children: only bridges have devices below them.
- A NIC is described once, at PCI function 0 of device 0 (net_ib.cc ncclIbGetPciPath: "Merge
  multi-port NICs into the same PCI device" and, with NCCL_IB_MERGE_VFS=1, virtual functions too),
  with `port="N"` on its <net>: the second port 0000:0c:00.1 lives where 0000:0c:00.0 is.
- A file may hold several hosts (`host_hash` on <cpu>); only one of them is this node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.host import MAX_READ, HostReader, read_local
from agent.topology import Locality

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET


class NcclTopoError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TopoLink:
    target: str  # bus id of the far end, as written ("fffffff:ff:ff.0": an NVSwitch NCCL can't see)
    count: int
    tclass: int  # 0x068000 NVSwitch, 0x0302xx GPU, 0x068001 CPU


@dataclass(frozen=True, slots=True)
class TopoGpu:
    sm: int  # compute capability x 10 (80 = A100, 90 = H100)
    links: tuple[TopoLink, ...] = ()


@dataclass(frozen=True, slots=True)
class TopoCpu:
    root: str
    numa_node: int
    local_cpus: str


@dataclass(frozen=True, slots=True)
class NcclTopo:
    path: str
    devices: dict[str, Locality]  # bus id -> place, bridges included
    bridges: frozenset[str] = frozenset()
    cpus: tuple[TopoCpu, ...] = ()
    gpus: dict[str, TopoGpu] = field(default_factory=dict)  # only GPUs with a <gpu> element
    problems: tuple[str, ...] = ()  # for the PcieProbed message, which names the file already
    endpoints: frozenset[str] = frozenset()  # bus ids of devices that are not bridges
    gpu_ids: frozenset[str] = frozenset()  # of those, the GPUs (display class or <gpu>)

    def lookup(self, bus_id: str, nic: bool = False) -> Locality | None:
        """The file's place for a device: exact bus id, or for a NIC NCCL's merged form."""
        if bus_id in self.devices:
            return self.devices[bus_id]
        if nic and len(bus_id) >= 7:
            return self.devices.get(merged_nic_id(bus_id))
        return None

    def attach(self, bus_id: str, sysfs: Locality | None, nic: bool = False) -> Locality:
        """Where NCCL puts a device: from the file, else under its nearest sysfs ancestor that the
        file names, else under the file's <cpu> of its NUMA node; unknown when none applies."""
        found = self.lookup(bus_id, nic)
        if found is not None:
            return found
        if sysfs is None:
            return Locality(root="")
        for bridge in reversed(sysfs.bridges):
            above = self.devices.get(bridge)
            if above is not None and bridge in self.bridges:
                return Locality(
                    root=above.root,
                    switches=(*above.switches, bridge),
                    numa_node=above.numa_node,
                    local_cpus=above.local_cpus,
                    parent=bridge,
                )
        cpu = next((c for c in self.cpus if c.numa_node == sysfs.numa_node >= 0), None)
        if cpu is None:
            return Locality(root="")
        return Locality(root=cpu.root, numa_node=cpu.numa_node, local_cpus=cpu.local_cpus)


def merged_nic_id(bus_id: str) -> str:
    """0000:0c:00.1 -> 0000:0c:00.0 (port 2); c941:00:02.0 -> c941:00:00.0 (a VF)."""
    return bus_id[:-4] + "00.0"


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


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text else None
    except ValueError:
        return None


class _Builder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.devices: dict[str, Locality] = {}
        self.bridges: set[str] = set()
        self.gpus: dict[str, TopoGpu] = {}
        self.endpoints: set[str] = set()
        self.gpu_ids: set[str] = set()
        self.problems: list[str] = []
        self.repeated: set[str] = set()

    def add(self, busid: str, place: Locality) -> bool:
        if busid in self.devices:
            self.repeated.add(busid)
            return False  # NCCL finds the first node with a bus id; so do we
        self.devices[busid] = place
        return True

    def walk(self, node: ET.Element, cpu: TopoCpu, switches: tuple[str, ...]) -> None:
        for child in node.findall("pci"):
            busid = (child.get("busid") or "").lower()
            klass = _int(child.get("class"), 16)
            bridge = (klass >> 8) == 0x0604 if klass is not None else child.find("pci") is not None
            here = Locality(
                root=cpu.root,
                switches=switches,
                numa_node=cpu.numa_node,
                local_cpus=cpu.local_cpus,
                parent=switches[-1] if switches else "",
            )
            first = self.add(busid, here) if busid else False
            if bridge:
                if busid:
                    self.bridges.add(busid)
                self.walk(child, cpu, (*switches, busid) if busid else switches)
                continue
            gpu = child.find("gpu")
            if gpu is not None and first:
                self.gpus[busid] = _gpu(gpu)
            if first:
                self.endpoints.add(busid)
                if gpu is not None or (klass is not None and klass >> 16 == 0x03):
                    self.gpu_ids.add(busid)
            self.walk(child, cpu, switches)


def _gpu(node: ET.Element) -> TopoGpu:
    links = tuple(
        TopoLink(
            target=(link.get("target") or "").lower(),
            count=_int(link.get("count")) or 0,
            tclass=_int(link.get("tclass"), 16) or 0,
        )
        for link in node.findall("nvlink")
    )
    return TopoGpu(sm=_int(node.get("sm")) or 0, links=links)


def parse(
    text: str, path: str = "<topo>", present: Callable[[str], bool] | None = None
) -> NcclTopo:
    """`present(bus_id)` says whether a device exists on this node; it picks this node's host
    when the file holds several (`host_hash`). Without it, the first host is used."""
    import xml.etree.ElementTree as ET  # only VMs given a topology file need the XML parser

    try:
        root = ET.fromstring(text)  # noqa: S314 - operator-supplied local file, no entities used
    except ET.ParseError as err:
        raise NcclTopoError(f"{path}: not valid XML: {err}") from err
    cpus = list(root.iter("cpu")) if root.tag != "cpu" else [root]
    hosts: dict[str, list[ET.Element]] = {}
    for cpu in cpus:
        hosts.setdefault(cpu.get("host_hash", ""), []).append(cpu)
    problems: list[str] = []
    chosen = next(iter(hosts.values()), [])
    if len(hosts) > 1:
        chosen, note = _pick_host(hosts, present)
        problems.append(f"{len(hosts)} hosts in one file; {note}")
    b = _Builder(path)
    topo_cpus: list[TopoCpu] = []
    for i, cpu in enumerate(chosen):
        numa_text = cpu.get("numaid", "-1")
        numa = _int(numa_text)
        if numa is None:
            raise NcclTopoError(f"{path}: cpu numaid {numa_text!r} is not an integer")
        info = TopoCpu(f"topo-cpu{i}", numa, mask_to_cpulist(cpu.get("affinity", "")))
        topo_cpus.append(info)
        b.walk(cpu, info, ())
    if not b.devices:
        raise NcclTopoError(f"{path}: no PCI devices under any <cpu>")
    if b.repeated:
        problems.append(f"bus ids repeated, first kept: {', '.join(sorted(b.repeated))}")
    numas = [c.get("numaid") for c in chosen]
    twice = sorted({n for n in numas if n is not None and numas.count(n) > 1})
    if twice:
        problems.append(f"several <cpu> with numaid {', '.join(twice)} (host bridges)")
    return NcclTopo(
        path=path,
        devices=b.devices,
        bridges=frozenset(b.bridges),
        cpus=tuple(topo_cpus),
        gpus=b.gpus,
        problems=tuple(problems),
        endpoints=frozenset(b.endpoints),
        gpu_ids=frozenset(b.gpu_ids),
    )


def _pick_host(
    hosts: dict[str, list[ET.Element]], present: Callable[[str], bool] | None
) -> tuple[list[ET.Element], str]:
    def seen(cpus: list[ET.Element]) -> int:
        if present is None:
            return 0
        ids = {(p.get("busid") or "").lower() for c in cpus for p in c.iter("pci")}
        return sum(1 for bus in ids if bus and not bus.startswith("ffff") and present(bus))

    scores = {h: seen(cpus) for h, cpus in hosts.items()}
    best = max(scores.values())
    winners = [h for h, s in scores.items() if s == best]
    name = winners[0] or "(no host_hash)"
    if len(winners) > 1:
        return hosts[winners[0]], f"using the first, host_hash {name} (devices match equally)"
    return hosts[winners[0]], f"using host_hash {name}, whose devices this node has"


def load(reader: HostReader, path: str, *, local: bool = False) -> NcclTopo:
    """The file at host path `path`, or with `local` at `path` on this machine (`probe --from`
    tried against a file that is not in the snapshot); NcclTopoError says why it cannot be used."""
    if local:
        try:
            data = read_local(path, MAX_READ)
        except OSError as err:
            raise NcclTopoError(f"{path}: {err.strerror or err}") from None
    else:
        mark = len(reader.issues)
        found = reader.read_bytes(path)
        if found is None:  # the reader noted why, unless the file is simply not there
            raise NcclTopoError(
                reader.issues[mark] if reader.issues[mark:] else f"{path}: no such file"
            )
        data = found

    def present(bus: str) -> bool:
        return reader.exists(f"/sys/bus/pci/devices/{bus}")

    return parse(data.decode("utf-8", errors="replace"), path, present)

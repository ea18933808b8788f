"""Pure PCIe locality arithmetic: where a device sits and how far apart two devices are.

Distances follow the `nvidia-smi topo -m` legend: PIX (one PCIe switch), PXB (several switches, no
host bridge), PHB (through the host bridge), NODE (across host bridges of one NUMA node), SYS
(across the SMP interconnect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.model import DISTANCE_ORDER, Distance


@dataclass(frozen=True, slots=True)
class Locality:
    root: str  # "pci0000:16" (sysfs), or "cpu<N>" when taken from an NCCL topology file
    switches: tuple[str, ...] = ()  # upstream ports of the PCIe switches above, top first
    numa_node: int = -1
    local_cpus: str = ""
    parent: str = ""  # the bridge right above the device: functions of one card share it
    bridges: tuple[str, ...] = ()  # every bridge from the root port down (sysfs only)

    @property
    def nearest_switch(self) -> str:
        return self.switches[-1] if self.switches else ""


def distance(a: Locality, b: Locality) -> Distance:
    if a.root != b.root:
        same_node = a.numa_node >= 0 and a.numa_node == b.numa_node
        return "NODE" if same_node else "SYS"
    if a.parent and a.parent == b.parent:
        return "PIX"
    common = 0
    for x, y in zip(a.switches, b.switches, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"
    # Below the lowest shared switch, does either side cross another switch?
    if len(a.switches) == common and len(b.switches) == common:
        return "PIX"
    return "PXB"


def closest(
    origin: Locality, candidates: Mapping[str, Locality]
) -> tuple[Distance | None, tuple[str, ...]]:
    """The smallest distance from origin and every candidate key at that distance (sorted)."""
    best: Distance | None = None
    names: list[str] = []
    for name in sorted(candidates):
        d = distance(origin, candidates[name])
        if best is None or DISTANCE_ORDER[d] < DISTANCE_ORDER[best]:
            best, names = d, [name]
        elif d == best:
            names.append(name)
    return best, tuple(names)

"""What the probes hand to assembly: each probe's outcome and the options of one pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agent.nvml import NvmlInventory
from agent.probes.gds import GdsProbe
from agent.probes.nccl_topo import NcclTopo
from agent.probes.pci import PciTree
from agent.probes.rdma import RdmaProbe
from common.model import Condition, NetworkPosition

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """A probe's value, or why there is none (reason: CamelCase word, message: for people)."""

    value: T | None
    reason: str = ""
    message: str = ""
    invalid: tuple[str, ...] = ()  # host files that could not be read or parsed ("path: why")


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
    hca_exclude: tuple[str, ...] = ()  # globs: never compute fabric
    hca_include: tuple[str, ...] = ()  # globs: when set, exactly these are compute fabric

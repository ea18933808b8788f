"""The NVML seam: plain-value inventory types, the backend Protocol and the non-pynvml backends.

Only agent/nvml/pynvml_backend.py imports pynvml. Everything else sees NvmlInventory, so the probes,
the gather snapshot and the test fakes share one shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

from common.wire import from_wire, to_wire

RemoteType = Literal["GPU", "NVSwitch", "CPU", "Unknown"]


@dataclass(frozen=True, slots=True)
class NvmlLink:
    link: int
    active: bool
    version: int | None = None  # NVML enum NVML_NVLINK_VERSION_* (6 = NVLink 4.0)
    remote_type: RemoteType = "Unknown"
    remote_bus_id: str | None = None  # as NVML reports it (8-digit domain, uppercase)


@dataclass(frozen=True, slots=True)
class NvmlFabric:
    state: int  # NVML_GPU_FABRIC_STATE_*: 3 = completed
    status: int  # nvmlReturn_t of the fabric registration; valid only when completed
    cluster_uuid: str
    clique_id: int


@dataclass(frozen=True, slots=True)
class NvmlGpu:
    index: int
    uuid: str
    name: str
    pci_bus_id: str  # NVML form: "00000000:1A:00.0"
    memory_total_bytes: int | None = None
    compute_capability: tuple[int, int] | None = None
    mig_mode: int | None = None  # current mode; None when NotSupported
    links: tuple[NvmlLink, ...] = ()
    fabric: NvmlFabric | None = None
    errors: tuple[str, ...] = ()  # per-field failures that were not "not supported"


@dataclass(frozen=True, slots=True)
class NvmlInventory:
    driver_version: str
    gpus: tuple[NvmlGpu, ...]
    cuda_driver_version: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(to_wire(self))

    @classmethod
    def from_dict(cls, data: object) -> NvmlInventory:
        return from_wire(cls, data, "nvml")


class NvmlUnavailable(Exception):
    """NVML could not be used at all; ``reason`` is a CamelCase word for the condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class NvmlBackend(Protocol):
    def inventory(self) -> NvmlInventory:
        """Everything the agent needs from NVML; raises NvmlUnavailable if NVML cannot start."""
        ...


class NullNvml:
    """`--nvml none`: the GPUs are still found on PCI, NVML is reported as switched off."""

    def inventory(self) -> NvmlInventory:
        raise NvmlUnavailable("Disabled", "NVML disabled by --nvml none")


class SnapshotNvml:
    """Replays an NVML snapshot captured by `gpufabric-agent gather` (errors included)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._parsed: NvmlInventory | None = None  # a snapshot never changes: parse once

    def inventory(self) -> NvmlInventory:
        error = self._data.get("error")
        if error:
            raise NvmlUnavailable(
                str(error.get("reason", "Unknown")), str(error.get("message", ""))
            )
        if self._parsed is None:
            self._parsed = NvmlInventory.from_dict(self._data["inventory"])
        return self._parsed


def snapshot_of(backend: NvmlBackend) -> dict[str, Any]:
    """The gather format of what a backend returns, failure included."""
    try:
        return {"inventory": backend.inventory().to_dict()}
    except NvmlUnavailable as err:
        return {"error": {"reason": err.reason, "message": err.message}}


@lru_cache(maxsize=1024)  # every NVLink names its peer: 144 links, a dozen distinct ids per probe
def normalize_bus_id(bus_id: str) -> str:
    """NVML "00000000:1A:00.0" -> sysfs "0000:1a:00.0"; wider domains (VMD "10000:") are kept."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep:
        return text
    domain = domain.lstrip("0").rjust(4, "0")
    return f"{domain}:{rest}"

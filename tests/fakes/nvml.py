"""A stand-in for the pynvml module: the same function names, pynvml's own error classes.

PynvmlBackend runs unchanged on top of it, so its translation of NVML behaviour (NotSupported,
InvalidArgument past the link count, LibraryNotFound at init) is what the tests exercise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml


@dataclass
class FakeGpu:
    uuid: str
    name: str
    bus_id: str
    memory: int = 80 * (1 << 30)
    cc: tuple[int, int] = (9, 0)
    mig: int | None = 0
    link_count: int = 18  # links the driver answers for; higher indices raise InvalidArgument
    links: dict[int, tuple[int, str, int]] = field(
        default_factory=dict
    )  # link -> (state, bus, type)
    nvlink_supported: bool = True
    fail: dict[str, type[pynvml.NVMLError]] = field(default_factory=dict)


class FakePynvml:
    NVMLError = pynvml.NVMLError
    NVML_NVLINK_MAX_LINKS = 36

    def __init__(self, gpus: list[FakeGpu], init_error: type[pynvml.NVMLError] | None = None):
        self.gpus = gpus
        self.init_error = init_error
        self.initialized = False
        for name in dir(pynvml):
            if name.startswith("NVMLError_"):
                setattr(self, name, getattr(pynvml, name))

    def _check(self) -> None:
        if not self.initialized:
            raise pynvml.NVMLError_Uninitialized()

    def _gpu(self, handle: int, what: str) -> FakeGpu:
        self._check()
        gpu = self.gpus[handle]
        if what in gpu.fail:
            raise gpu.fail[what]()
        return gpu

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.init_error is not None:
            raise self.init_error()
        self.initialized = True

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._check()
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check()
        return "550.90.07"

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        self._check()
        return 12040

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        self._check()
        if i >= len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return i

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(busId=self._gpu(h, "pci").bus_id)

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return self._gpu(h, "uuid").uuid

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return self._gpu(h, "name").name

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:  # noqa: N802
        return SimpleNamespace(total=self._gpu(h, "memory").memory)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:  # noqa: N802
        return self._gpu(h, "cc").cc

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:  # noqa: N802
        gpu = self._gpu(h, "mig")
        if gpu.mig is None:
            raise pynvml.NVMLError_NotSupported()
        return [gpu.mig, gpu.mig]

    def _link(self, h: int, link: int, what: str) -> tuple[int, str, int]:
        gpu = self._gpu(h, what)
        if not gpu.nvlink_supported:
            raise pynvml.NVMLError_NotSupported()
        if link >= gpu.link_count:
            raise pynvml.NVMLError_InvalidArgument()
        return gpu.links.get(link, (0, "", 0))

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:  # noqa: N802
        return self._link(h, link, "nvlink_state")[0]

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:  # noqa: N802
        self._link(h, link, "nvlink_version")
        return 6

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:  # noqa: N802
        return SimpleNamespace(busId=self._link(h, link, "nvlink_remote")[1])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:  # noqa: N802
        return self._link(h, link, "nvlink_type")[2]

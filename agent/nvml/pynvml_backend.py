"""The real NVML backend (nvidia-ml-py). The only module that imports pynvml.

The pynvml module is injected, so tests drive this exact code with a stand-in that raises pynvml's
own error classes.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from agent.nvml import NvmlFabric, NvmlGpu, NvmlInventory, NvmlLink, NvmlUnavailable, RemoteType

log = logging.getLogger(__name__)
T = TypeVar("T")

_REMOTE_TYPES: dict[int, RemoteType] = {0: "GPU", 1: "CPU", 2: "NVSwitch"}
_FALLBACK_MAX_LINKS = 18


class PynvmlBackend:
    def __init__(self, lib: Any | None = None) -> None:
        if lib is None:
            import pynvml

            lib = pynvml
        self.lib = lib

    def _is(self, err: BaseException, *names: str) -> bool:
        return any(isinstance(err, getattr(self.lib, f"NVMLError_{n}", ())) for n in names)

    def _optional(self, errors: list[str], what: str, fn: Callable[[], T]) -> T | None:
        """Call fn; NotSupported means "no such feature" (None), other NVML errors are noted."""
        try:
            return fn()
        except self.lib.NVMLError as err:
            if not self._is(err, "NotSupported", "FunctionNotFound"):
                errors.append(f"{what}: {err}")
            return None

    def inventory(self) -> NvmlInventory:
        lib = self.lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as err:
            reason = type(err).__name__.removeprefix("NVMLError_") or "Unknown"
            raise NvmlUnavailable(reason, f"nvmlInit failed: {err}") from err
        try:
            driver = str(lib.nvmlSystemGetDriverVersion())
            cuda = self._optional([], "cuda", lib.nvmlSystemGetCudaDriverVersion)
            count = int(lib.nvmlDeviceGetCount())
            gpus = tuple(self._gpu(i) for i in range(count))
            return NvmlInventory(driver_version=driver, gpus=gpus, cuda_driver_version=cuda)
        except lib.NVMLError as err:
            reason = type(err).__name__.removeprefix("NVMLError_") or "Unknown"
            raise NvmlUnavailable(reason, f"NVML query failed: {err}") from err
        finally:
            try:
                lib.nvmlShutdown()
            except lib.NVMLError as err:
                log.debug("nvmlShutdown failed", extra={"error": str(err)})

    def _gpu(self, index: int) -> NvmlGpu:
        lib = self.lib
        errors: list[str] = []
        handle = lib.nvmlDeviceGetHandleByIndex(index)
        pci = lib.nvmlDeviceGetPciInfo(handle)
        memory = self._optional(errors, "memory", lambda: lib.nvmlDeviceGetMemoryInfo(handle))
        cc = self._optional(errors, "cc", lambda: lib.nvmlDeviceGetCudaComputeCapability(handle))
        mig = self._optional(errors, "mig", lambda: lib.nvmlDeviceGetMigMode(handle))
        return NvmlGpu(
            index=index,
            uuid=str(lib.nvmlDeviceGetUUID(handle)),
            name=str(lib.nvmlDeviceGetName(handle)),
            pci_bus_id=str(pci.busId),
            memory_total_bytes=None if memory is None else int(memory.total),
            compute_capability=None if cc is None else (int(cc[0]), int(cc[1])),
            mig_mode=None if mig is None else int(mig[0]),
            links=self._links(handle, errors),
            fabric=self._fabric(handle, errors),
            errors=tuple(errors),
        )

    def _links(self, handle: Any, errors: list[str]) -> tuple[NvmlLink, ...]:
        lib = self.lib
        max_links = int(getattr(lib, "NVML_NVLINK_MAX_LINKS", _FALLBACK_MAX_LINKS))
        links: list[NvmlLink] = []
        for link in range(max_links):
            try:
                state = lib.nvmlDeviceGetNvLinkState(handle, link)
            except lib.NVMLError as err:
                # NotSupported: no NVLink; InvalidArgument: index past this GPU's link count
                # (GB200 rejects 18..35). Both mean "no link here", not a failure.
                if self._is(err, "NotSupported", "InvalidArgument"):
                    continue
                errors.append(f"nvlink {link} state: {err}")
                continue
            if not state:
                links.append(NvmlLink(link=link, active=False))
                continue
            version = self._optional(
                errors,
                f"nvlink {link} version",
                functools.partial(lib.nvmlDeviceGetNvLinkVersion, handle, link),
            )
            remote = self._optional(
                errors,
                f"nvlink {link} remote",
                functools.partial(lib.nvmlDeviceGetNvLinkRemotePciInfo, handle, link),
            )
            rtype = self._optional(
                errors,
                f"nvlink {link} remote type",
                functools.partial(lib.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link),
            )
            links.append(
                NvmlLink(
                    link=link,
                    active=True,
                    version=None if version is None else int(version),
                    remote_type=_REMOTE_TYPES.get(int(rtype), "Unknown")
                    if rtype is not None
                    else "Unknown",
                    remote_bus_id=None if remote is None else str(remote.busId),
                )
            )
        return tuple(links)

    def _fabric(self, handle: Any, errors: list[str]) -> NvmlFabric | None:
        lib = self.lib
        if not hasattr(lib, "c_nvmlGpuFabricInfoV_t"):
            return None
        info = lib.c_nvmlGpuFabricInfoV_t()
        ok = self._optional(
            errors, "fabric", lambda: lib.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
        )
        if ok is None and not getattr(info, "state", 0):
            return None
        return NvmlFabric(
            state=int(info.state),
            status=int(info.status),
            cluster_uuid=str(uuid.UUID(bytes=bytes(bytearray(info.clusterUuid)[:16]))),
            clique_id=int(info.cliqueId),
        )

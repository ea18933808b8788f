"""udev events as an async stream. The only module that imports pyudev."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Protocol

log = logging.getLogger(__name__)

SUBSYSTEMS = ("pci", "infiniband", "net", "nvme")


class EventSource(Protocol):
    def events(self) -> AsyncIterator[str]:
        """Yields one short description per hardware event."""
        ...


class PyudevSource:
    def __init__(self, subsystems: tuple[str, ...] = SUBSYSTEMS) -> None:
        import pyudev

        self._monitor = pyudev.Monitor.from_netlink(pyudev.Context())
        for subsystem in subsystems:
            self._monitor.filter_by(subsystem)
        self._monitor.start()

    async def events(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=10_000)

        def readable() -> None:
            device = self._monitor.poll(timeout=0)
            while device is not None:
                if not queue.full():  # a storm only needs one re-probe; drop the excess
                    queue.put_nowait(f"{device.action} {device.subsystem} {device.sys_name}")
                device = self._monitor.poll(timeout=0)

        loop.add_reader(self._monitor.fileno(), readable)
        try:
            while True:
                yield await queue.get()
        finally:
            loop.remove_reader(self._monitor.fileno())


class QueueSource:
    """An in-process event source (tests, and `--no-udev` where it never yields)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()

    def emit(self, event: str) -> None:
        self.queue.put_nowait(event)

    async def events(self) -> AsyncIterator[str]:
        while True:
            yield await self.queue.get()

"""How many GPUs the largest spine domain can hold, for the admission warning about a group too
big for any spine. The spines come from the GpuFabric object `cluster` that the labeler
publishes, read through its one definition (webhook/fabric/shape.py): node counts per spine,
never node names (the object stays small at any size). A spine of N nodes holds at most N times
the GPUs of the fullest node the admission cache knows, so the warning is given only for groups
that surely fit in no spine."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from common import api
from webhook.fabric.shape import FabricStatus, ShapeError
from webhook.fleet.cache import FabricCache

log = logging.getLogger(__name__)
FABRIC_PLURAL = "gpufabrics"
FABRIC_OBJECT = "cluster"


class SpineSizes:
    def __init__(self) -> None:
        self.spines: dict[str, int] = {}  # spine domain -> its nodes
        self._unread = ""  # why the last object could not be read (said once)

    def listed(self, items: list[Mapping[str, Any]]) -> None:
        self.spines = {}
        for obj in items:
            self.event("ADDED", obj)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if (obj.get("metadata") or {}).get("name") != FABRIC_OBJECT:
            return
        if kind == "DELETED":
            self.spines = {}
            return
        try:
            status = FabricStatus.from_json(obj.get("status") or {})
        except ShapeError as err:  # another version's object: no warning rather than a wrong one
            if str(err) != self._unread:
                log.warning("GpuFabric status not read", extra={"why": str(err)})
            self._unread, self.spines = str(err), {}
            return
        self._unread = ""
        self.spines = {s.name: s.nodes for s in status.spines}

    def largest(self, most_gpus: Callable[[], int]) -> int | None:
        """GPUs the largest spine domain can hold; None while no fabric is known (no warning
        then). `most_gpus`: GPUs of the fullest node."""
        if not self.spines:
            return None
        return max(self.spines.values()) * most_gpus()


def most_gpus_in(cache: FabricCache) -> Callable[[], int]:
    """GPUs of the fullest node the admission cache's statuses know (gpufabric.io/gpu-count),
    read over its layouts (alike nodes share one), not over every node."""

    def most() -> int:
        fleet = cache.groups()
        with fleet.lock:
            values = [layout.labels.get(api.LABEL_GPU_COUNT, "0") for layout, _ in fleet.members()]
        return max((int(v) for v in values if v.isdigit()), default=0)

    return most

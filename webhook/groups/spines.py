"""How many GPUs the largest spine domain holds, for the admission warning about a group too big
for any spine. The spines and their nodes come from the GpuFabric object `cluster` that the
labeler publishes (status.spines[].leaves[].nodes); GPUs per node from the admission cache."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from common import api
from webhook.fleet.cache import FabricCache

FABRIC_PLURAL = "gpufabrics"
FABRIC_OBJECT = "cluster"


class SpineSizes:
    def __init__(self) -> None:
        self.spines: dict[str, tuple[str, ...]] = {}

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
        spines: dict[str, tuple[str, ...]] = {}
        for spine in (obj.get("status") or {}).get("spines") or []:
            if isinstance(spine, Mapping):
                nodes = [
                    str(n)
                    for leaf in spine.get("leaves") or []
                    if isinstance(leaf, Mapping)
                    for n in leaf.get("nodes") or []
                ]
                spines[str(spine.get("name", ""))] = tuple(nodes)
        self.spines = spines

    def largest(self, gpus_of: Callable[[str], int]) -> int | None:
        """GPUs of the largest spine domain; None while no fabric is known (no warning then)."""
        if not self.spines:
            return None
        return max(sum(gpus_of(n) for n in nodes) for nodes in self.spines.values())


def gpus_in(cache: FabricCache) -> Callable[[str], int]:
    """GPUs of a node as the admission cache's statuses say (gpufabric.io/gpu-count; 0 unknown)."""

    def of(name: str) -> int:
        record = cache.nodes.get(name)
        value = dict(record.labels).get(api.LABEL_GPU_COUNT, "0") if record else "0"
        return int(value) if value.isdigit() else 0

    return of

"""Running pods per node, per gang and, per domain of each level, GPUs and pods per priority.

Kept up to date from the placer's pod events, so a preemption decision reads domains, not every
pod; the per-domain sums are rebuilt only when the nodes change (the view's generation).
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.groups.capacity import CapacityView
from webhook.groups.names import LEVELS, Level

GangKey = tuple[str, str]  # (namespace, group name)
Sums = dict[str, dict[int, list[int]]]  # domain -> priority -> [GPUs, pods]


@dataclass(frozen=True, slots=True)
class Running:
    uid: str
    namespace: str
    name: str
    node: str
    gpus: int
    priority: int
    gang: GangKey | None  # the placed group it belongs to (evicted whole)
    leaving: bool  # being deleted already: its GPUs come free without an eviction
    grace: float = 30.0  # spec.terminationGracePeriodSeconds


class RunningIndex:
    def __init__(self) -> None:
        self.pods: dict[str, Running] = {}
        self.on_node: dict[str, dict[str, Running]] = {}
        self.gangs: dict[GangKey, set[str]] = {}
        self._sums: list[Sums] | None = None
        self._view: CapacityView | None = None
        self._generation = -1

    def reset(self) -> None:
        self.pods, self.on_node, self.gangs, self._sums = {}, {}, {}, None

    def put(self, r: Running) -> None:
        self.remove(r.uid)
        self.pods[r.uid] = r
        self.on_node.setdefault(r.node, {})[r.uid] = r
        if r.gang is not None:
            self.gangs.setdefault(r.gang, set()).add(r.uid)
        self._add(r, 1)

    def remove(self, uid: str) -> None:
        r = self.pods.pop(uid, None)
        if r is None:
            return
        on = self.on_node.get(r.node, {})
        on.pop(uid, None)
        if not on:
            self.on_node.pop(r.node, None)
        if r.gang is not None:
            members = self.gangs.get(r.gang, set())
            members.discard(uid)
            if not members:
                self.gangs.pop(r.gang, None)
        self._add(r, -1)

    def _add(self, r: Running, sign: int) -> None:
        if self._sums is None or self._view is None or r.leaving:
            return
        for i, d in enumerate(self._view.where(r.node)):
            if d is not None:
                entry = self._sums[i].setdefault(d, {}).setdefault(r.priority, [0, 0])
                entry[0] += sign * r.gpus
                entry[1] += sign
                if entry[1] == 0:
                    del self._sums[i][d][r.priority]

    def domains(self, view: CapacityView, level: Level) -> Sums:
        """Domain of the level -> priority -> [GPUs, pods] of the running pods not yet leaving."""
        if self._sums is None or self._view is not view or self._generation != view.generation:
            self._view, self._generation = view, view.generation
            self._sums = [{} for _ in LEVELS]
            for r in self.pods.values():
                self._add(r, 1)
        return self._sums[LEVELS.index(level)]

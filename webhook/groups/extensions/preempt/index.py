"""Running pods per node, per gang and, per domain of each level, GPUs and pods per priority.

Kept up to date from the placer's pod events, so a preemption decision reads domains, not every
pod; the per-domain sums are rebuilt only when the nodes change (the view's generation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.model.names import LEVELS, GroupKey, Level
from webhook.groups.model.pods import Labels
from webhook.groups.model.records import PodRecord

Sums = dict[str, dict[int, dict[int, int]]]  # domain -> priority -> GPUs of one pod -> pods
# per priority, lowest first: (priority, GPUs of the pods up to it, their sizes largest first)
Ladder = tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]


@dataclass(frozen=True, slots=True)
class Running:
    uid: str
    namespace: str
    name: str
    node: str
    gpus: int
    priority: int
    gang: GroupKey | None  # the placed group it belongs to (evicted whole)
    leaving: bool  # being deleted already: its GPUs come free without an eviction
    grace: float = 30.0  # spec.terminationGracePeriodSeconds
    labels: Labels = ()  # what PodDisruptionBudgets select it by


class RunningIndex:
    def __init__(self) -> None:
        self.pods: dict[str, Running] = {}
        self.on_node: dict[str, dict[str, Running]] = {}
        self.gangs: dict[GroupKey, set[str]] = {}
        self._sums: list[Sums] | None = None
        self._view: CapacityView | None = None
        self._generation = -1
        self._where: dict[str, tuple[str | None, ...]] = {}  # node -> domains its pods count in
        self._ladders: list[dict[str, Ladder]] = [{} for _ in LEVELS]
        # (level, priority, GPUs needed) -> domains that can be freed -> bound; and the domains
        # changed since, to compute again: a decision then reads the few domains that can be
        # freed, not every domain of the level.
        self._bounds: dict[tuple[int, int, int], tuple[dict[str, Any], set[str]]] = {}

    def reset(self) -> None:
        self.pods, self.on_node, self.gangs, self._sums = {}, {}, {}, None
        self._ladders = [{} for _ in LEVELS]
        self._bounds = {}
        self._where = {}

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
        if r.gang is not None:
            members = self.gangs.get(r.gang, set())
            members.discard(uid)
            if not members:
                self.gangs.pop(r.gang, None)
        self._add(r, -1)
        on = self.on_node.get(r.node, {})
        on.pop(uid, None)
        if not on:  # its domains are read afresh when a pod comes again
            self.on_node.pop(r.node, None)
            self._where.pop(r.node, None)

    def _add(self, r: Running, sign: int) -> None:
        if self._sums is None or self._view is None or r.leaving:
            return
        where = self._where.get(r.node)
        if where is None:
            where = self._where[r.node] = self._view.where(r.node)
        for i, d in enumerate(where):
            if d is not None:
                self._ladders[i].pop(d, None)
                for key, (_, dirty) in self._bounds.items():
                    if key[0] == i:
                        dirty.add(d)
                per = self._sums[i].setdefault(d, {})
                sizes = per.setdefault(r.priority, {})
                sizes[r.gpus] = sizes.get(r.gpus, 0) + sign
                if not sizes[r.gpus]:
                    del sizes[r.gpus]
                    if not sizes:
                        del per[r.priority]
                        if not per:
                            del self._sums[i][d]

    def domains(self, view: CapacityView, level: Level) -> Sums:
        """Domain of the level -> priority -> pod size (GPUs) -> pods, of the running pods not
        yet leaving."""
        if self._sums is None or self._view is not view:
            self._view, self._generation, self._where = view, view.generation, {}
            self._ladders = [{} for _ in LEVELS]
            self._bounds = {}
            self._sums = [{} for _ in LEVELS]
            for r in self.pods.values():
                self._add(r, 1)
        elif self._generation != view.generation:  # nodes changed: move only relabelled ones
            self._generation = view.generation
            for node, pods in self.on_node.items():
                if self._where.get(node) != view.where(node):
                    for r in pods.values():
                        self._add(r, -1)
                    self._where[node] = view.where(node)
                    for r in pods.values():
                        self._add(r, 1)
        return self._sums[LEVELS.index(level)]

    def ladders(self, view: CapacityView, level: Level) -> Callable[[str], Ladder]:
        """domain -> its pods by priority, summed up the way victims.py bounds a domain's cost;
        each kept until a pod of the domain comes or goes."""
        sums = self.domains(view, level)
        cache = self._ladders[LEVELS.index(level)]

        def ladder(domain: str) -> Ladder:
            hit = cache.get(domain)
            if hit is None:
                steps, total, sizes = [], 0, dict[int, int]()
                per = sums.get(domain, {})
                for p in sorted(per):
                    for size, n in per[p].items():
                        total += size * n
                        sizes[size] = sizes.get(size, 0) + n
                    steps.append((p, total, tuple(sorted(sizes.items(), reverse=True))))
                hit = cache[domain] = tuple(steps)
            return hit

        return ladder

    def freeable(
        self,
        view: CapacityView,
        level: Level,
        priority: int,
        need: int,
        bound: Callable[[Ladder], Any],
    ) -> dict[str, Any]:
        """domain -> bound(its ladder), for the domains where it is not None: kept per (level,
        priority, need) and brought up to date for the domains whose pods changed since."""
        i = LEVELS.index(level)
        ladder = self.ladders(view, level)
        key = (i, priority, need)
        hit = self._bounds.get(key)
        if hit is None:
            if len(self._bounds) >= 32:  # a few shapes recur; an odd one must not pile up
                self._bounds = {}
            hit = self._bounds[key] = ({}, set(self.domains(view, level)))
        found, dirty = hit
        for d in dirty:
            value = bound(ladder(d))
            if value is None:
                found.pop(d, None)
            else:
                found[d] = value
        dirty.clear()
        return found


def as_running(rec: PodRecord) -> Running:
    """A pod that holds GPUs, as the preemption index keeps it (a possible victim)."""
    gang = (rec.namespace, rec.group.name) if rec.group is not None else None
    return Running(
        rec.uid,
        rec.namespace,
        rec.name,
        rec.node,
        rec.gpus,
        rec.priority,
        gang,
        not rec.member,
        rec.grace,
        rec.labels,
    )

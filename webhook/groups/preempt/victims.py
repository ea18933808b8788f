"""Which pods to preempt for a group that fits nowhere. Pure over a CapacityView and RunningIndex.

Only pods of lower priority are victims; a victim in a placed group brings its whole gang. In each
domain of the level the cheapest set is found as kube-scheduler does per node: take victims from
the lowest priority up until the group fits, then give back the most important ones it can spare.
Domains are compared by (a PDB blocked them before, highest victim priority, pods, GPUs), and
looked at in order of a lower bound of that cost, so a decision stops at the first domain whose
cost no later one can beat instead of evaluating every domain.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from webhook.groups.capacity import CapacityView
from webhook.groups.choose import Member, demand, pack
from webhook.groups.names import LEVELS, Level
from webhook.groups.preempt.index import Running, RunningIndex

Cost = tuple[bool, int, int, int]  # (PDB blocked before, highest victim priority, pods, GPUs)


@dataclass(frozen=True, slots=True)
class Plan:
    level: Level
    domain: str
    victims: tuple[Running, ...]  # whole gangs, also their pods outside the domain
    cost: Cost

    @property
    def gpus(self) -> int:
        return sum(v.gpus for v in self.victims)


class _Fit:
    """Does the group fit the domain's nodes with these GPUs freed? (uniform pods: slot count)"""

    def __init__(self, view: CapacityView, members: Sequence[Member]) -> None:
        self.view, self.members = view, members
        self.shapes = {m.selector.signature: view.eligible(m.selector) for m in members}
        shapes = {(m.selector.signature, m.gpus) for m in members}
        self.uniform = next(iter(shapes)) if len(shapes) == 1 else None

    def __call__(self, nodes: Sequence[str], free: Callable[[str], int]) -> bool:
        if self.uniform is not None:
            ok, per = self.shapes[self.uniform[0]], self.uniform[1]
            return per == 0 or sum(free(n) // per for n in nodes if n in ok) >= len(self.members)
        return pack(self.members, nodes, free, lambda s: self.shapes[s.signature]) is not None


def _units(
    index: RunningIndex, nodes: Sequence[str], priority: int
) -> tuple[dict[str, int], list[tuple[int, tuple[Running, ...]]]]:
    """GPUs already leaving per node, and the evictable units (gangs whole) on these nodes."""
    leaving: dict[str, int] = {}
    units: dict[object, tuple[int, tuple[Running, ...]]] = {}
    for n in nodes:
        for r in index.on_node.get(n, {}).values():
            if r.leaving:
                leaving[n] = leaving.get(n, 0) + r.gpus
                continue
            key: object = r.gang if r.gang is not None else r.uid
            if key in units:
                continue
            pods = (
                tuple(index.pods[u] for u in sorted(index.gangs.get(r.gang, ())))
                if r.gang is not None
                else (r,)
            )
            pods = tuple(p for p in pods if not p.leaving)
            top = max(p.priority for p in pods)
            if top < priority:
                units[key] = (top, pods)
    return leaving, list(units.values())


def evaluate(
    view: CapacityView,
    index: RunningIndex,
    fit: _Fit,
    level: Level,
    domain: str,
    priority: int,
    blocked: bool,
) -> Plan | None:
    """The cheapest victims in one domain, or None when even all of them would not free it."""
    nodes = view.domain_nodes(level, domain)
    inside = set(nodes)
    leaving, units = _units(index, nodes, priority)
    freed: dict[str, int] = dict(leaving)

    def free(n: str) -> int:
        return view.free(n) + freed.get(n, 0)

    def move(unit: tuple[Running, ...], sign: int) -> None:
        for p in unit:
            if p.node in inside:
                freed[p.node] = freed.get(p.node, 0) + sign * p.gpus

    def inside_gpus(unit: tuple[Running, ...]) -> int:
        return sum(p.gpus for p in unit if p.node in inside)

    units.sort(key=lambda u: (u[0], -inside_gpus(u[1]), len(u[1]), u[1][0].uid))
    chosen: list[tuple[int, tuple[Running, ...]]] = []
    for unit in units:
        if fit(nodes, free):
            break
        chosen.append(unit)
        move(unit[1], 1)
    if not chosen or not fit(nodes, free):
        return None
    for unit in sorted(chosen, key=lambda u: (-u[0], len(u[1]), u[1][0].uid)):  # reprieve
        move(unit[1], -1)
        if fit(nodes, free):
            chosen.remove(unit)
        else:
            move(unit[1], 1)
    victims = tuple(p for _, unit in chosen for p in unit)
    cost = (blocked, max(u[0] for u in chosen), len(victims), sum(p.gpus for p in victims))
    return Plan(level, domain, victims, cost)


def choose(
    view: CapacityView,
    index: RunningIndex,
    members: Sequence[Member],
    level: Level,
    priority: int,
    skip: Collection[str] = (),
    blocked: Collection[str] = (),
) -> Plan | None:
    """The domain of the level where preempting lower-priority pods frees the group most cheaply;
    None when no domain can be freed so. `skip`: domains not to try; `blocked`: domains where a
    PodDisruptionBudget refused an eviction before (chosen only when no other one frees it)."""
    need = demand(members)
    if need == 0:
        return None
    fit = _Fit(view, members)
    ok = frozenset().union(*fit.shapes.values())
    i = LEVELS.index(level)
    free: dict[str, int] = {}
    for n, f in view.with_free().items():
        d = view.where(n)[i] if n in ok else None
        if d is not None:
            free[d] = free.get(d, 0) + f
    biggest = max((info.gpus for info in view.nodes.values()), default=1) or 1
    order = view.order(level)
    bounds = []
    for d, per in index.domains(view, level).items():
        if d in skip or d not in order:
            continue
        have = free.get(d, 0)
        top = None
        for p in sorted(q for q in per if q < priority):
            have += per[p][0]
            if have >= need:
                top = p
                break
        if top is None:
            continue
        short = max(0, need - free.get(d, 0))
        bounds.append(((d in blocked, top, -(-short // biggest), short), order[d], d))
    bounds.sort()
    best: Plan | None = None
    for bound, _, d in bounds:
        if best is not None and best.cost <= bound:
            break
        plan = evaluate(view, index, fit, level, d, priority, d in blocked)
        if plan is not None and (best is None or plan.cost < best.cost):
            best = plan
    return best


def closest(view: CapacityView, members: Sequence[Member], level: Level) -> str | None:
    """The domain of the level nearest to holding the group (most usable free GPUs): what a group
    that may not preempt waits on."""
    fit = _Fit(view, members)
    ok = frozenset().union(*fit.shapes.values())
    i = LEVELS.index(level)
    free: dict[str, int] = {}
    for n, f in view.with_free().items():
        d = view.where(n)[i] if n in ok else None
        if d is not None:
            free[d] = free.get(d, 0) + f
    order = view.order(level)
    return min(free, key=lambda d: (-free[d], order.get(d, 0)), default=None)


def describe(plan: Plan, limit: int = 8) -> str:
    names = [f"{v.namespace}/{v.name}" for v in plan.victims]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more

"""Which pods to preempt for a group that fits nowhere. Pure over a CapacityView and RunningIndex.

Only pods of lower priority are victims; a victim in a placed group brings its whole gang. In each
domain of the level the cheapest set is found as kube-scheduler does per node: take victims from
the lowest priority up until the group fits, then give back the most important ones it can spare.
Domains are compared by (a PDB blocked them before, highest victim priority, pods, GPUs), and
looked at in order of a lower bound of that cost, so a decision stops at the first domain whose
cost no later one can beat instead of evaluating every domain.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.decision.fit import demand, pack
from webhook.groups.extensions.preempt.index import Ladder, Running, RunningIndex
from webhook.groups.framework.evictions import Budgets, Ledger, Use
from webhook.groups.model.names import LEVELS, Level

Cost = tuple[bool, int, int, int]  # (PDB blocked before, highest victim priority, pods, GPUs)


@dataclass(frozen=True, slots=True)
class Plan:
    level: Level
    domain: str
    victims: tuple[Running, ...]  # whole gangs, also their pods outside the domain
    cost: Cost
    budgets: tuple[Use, ...] = ()  # each PodDisruptionBudget selecting a victim: all allow it

    @property
    def gpus(self) -> int:
        return sum(v.gpus for v in self.victims)


@dataclass(frozen=True, slots=True)
class Refused:
    """A domain that lower-priority pods would free, but not without breaking a budget."""

    level: Level
    domain: str
    budgets: tuple[Use, ...]  # the budgets that keep victims it needs


@dataclass(frozen=True, slots=True)
class Choice:
    plan: Plan | None  # the cheapest domain freed whole, budgets counted
    refused: tuple[Refused, ...] = ()  # cheaper domains (by bound) that budgets keep


class _Fit:
    """What fits reads of the members: their eligible nodes, and the pod shape when they are all
    alike (then fitting is counting whole-pod slots, kept up to date as victims come and go)."""

    def __init__(self, view: CapacityView, members: Sequence[Member]) -> None:
        self.view, self.members = view, members
        self.shapes = {m.selector.signature: view.eligible(m.selector) for m in members}
        shapes = {(m.selector.signature, m.gpus) for m in members}
        self.uniform = next(iter(shapes)) if len(shapes) == 1 else None


class _Room:
    """Free GPUs on one domain's nodes as victims are added or given back."""

    def __init__(self, fit: _Fit, nodes: Sequence[str], leaving: dict[str, int]) -> None:
        self.fit, self.nodes = fit, nodes
        self.free = {n: fit.view.free(n) + leaving.get(n, 0) for n in nodes}
        self.per = fit.uniform[1] if fit.uniform is not None else 0
        ok = fit.shapes[fit.uniform[0]] if fit.uniform is not None else frozenset()
        avoid = {n for m in fit.members for n in m.avoid}  # its group's IMEX channels are there
        self.ok = ok - avoid if avoid else ok
        self.one = any(m.whole for m in fit.members)  # one member a node (IMEX channel)
        self.slots = sum(self._slots(f) for n, f in self.free.items() if n in self.ok)

    def _slots(self, free: int) -> int:
        if not self.per:
            return 0
        return min(1, free // self.per) if self.one else free // self.per

    def move(self, node: str, gpus: int) -> None:
        before = self.free[node]
        self.free[node] = before + gpus
        if self.per and node in self.ok:
            self.slots += self._slots(before + gpus) - self._slots(before)

    def fits(self) -> bool:
        if self.fit.uniform is not None:
            return self.per == 0 or self.slots >= len(self.fit.members)
        shapes = self.fit.shapes
        placed = pack(
            self.fit.members, self.nodes, self.free.__getitem__, lambda s: shapes[s.signature]
        )
        return placed is not None


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
    budgets: Budgets | None = None,
) -> Plan | Refused | None:
    """The cheapest victims in one domain that every budget allows; Refused when only victims
    a budget keeps would free it, None when even all of them would not."""
    nodes = view.domain_nodes(level, domain)
    leaving, units = _units(index, nodes, priority)
    room = _Room(fit, nodes, leaving)
    inside = room.free

    def move(unit: tuple[Running, ...], sign: int) -> None:
        for p in unit:
            if p.node in inside:
                room.move(p.node, sign * p.gpus)

    def inside_gpus(unit: tuple[Running, ...]) -> int:
        return sum(p.gpus for p in unit if p.node in inside)

    def who(unit: tuple[Running, ...]) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
        return [(p.namespace, p.name, p.labels) for p in unit]

    units.sort(key=lambda u: (u[0], -inside_gpus(u[1]), len(u[1]), u[1][0].uid))
    ledger = Ledger(budgets)
    chosen: list[tuple[int, tuple[Running, ...]]] = []
    for unit in units:
        if room.fits():
            break
        if ledger.take(who(unit[1])):  # a unit a budget keeps is passed over, not evicted
            chosen.append(unit)
            move(unit[1], 1)
    if not room.fits():
        return Refused(level, domain, ledger.blocking()) if ledger.refused else None
    if not chosen:
        return None
    for unit in sorted(chosen, key=lambda u: (-u[0], len(u[1]), u[1][0].uid)):  # reprieve
        move(unit[1], -1)
        if room.fits():
            chosen.remove(unit)
            ledger.give_back(who(unit[1]))
        else:
            move(unit[1], 1)
    victims = tuple(p for _, unit in chosen for p in unit)
    cost = (blocked, max(u[0] for u in chosen), len(victims), sum(p.gpus for p in victims))
    return Plan(level, domain, victims, cost, ledger.uses())


def choose(
    view: CapacityView,
    index: RunningIndex,
    members: Sequence[Member],
    level: Level,
    priority: int,
    skip: Collection[str] = (),
    blocked: Collection[str] = (),
    held: Collection[str] = (),
    budgets: Budgets | None = None,
    only: str | None = None,
) -> Choice:
    """The domain of the level where preempting lower-priority pods frees the group most cheaply
    with every victim allowed to go by its PodDisruptionBudgets; no plan when no domain can be
    freed so, with the domains budgets kept (those cheaper than the plan). `skip`: domains not
    to try; `blocked`: domains where an eviction was refused before (chosen only when no other
    one frees it); `held`: nodes held for other groups (a domain with one of them is not freed
    for this one); `only`: the one domain to try (a placed group's replacements)."""
    need = demand(members)
    if need == 0:
        return Choice(None)
    fit = _Fit(view, members)
    free = _free(view, fit, level)
    order, ladder = view.order(level), index.ladders(view, level)
    bounds: list[tuple[Cost, int, str]] = []
    if only is not None:
        known = only in order and only not in skip
        low = _bound(ladder(only), need - free.get(only, 0), priority) if known else None
        if low is not None:
            bounds.append(((only in blocked, *low), order[only], only))
    else:
        freeable = index.freeable(
            view, level, priority, need, lambda lad: _bound(lad, need, priority)
        )
        for d, low in freeable.items():
            if d not in free and d not in skip and d in order:
                bounds.append(((d in blocked, *low), order[d], d))
        for d, f in free.items():  # domains with free GPUs need fewer victims
            if d not in skip and d in order and (low := _bound(ladder(d), need - f, priority)):
                bounds.append(((d in blocked, *low), order[d], d))
    bounds.sort()
    best: Plan | None = None
    refused: list[Refused] = []
    for cost, _, d in bounds:
        if best is not None and best.cost <= cost:
            break
        if held and any(n in held for n in view.domain_nodes(level, d)):
            continue
        plan = evaluate(view, index, fit, level, d, priority, d in blocked, budgets)
        if isinstance(plan, Refused):
            refused.append(plan)
        elif plan is not None and (best is None or plan.cost < best.cost):
            best = plan
    return Choice(best, tuple(refused))


def _free(view: CapacityView, fit: _Fit, level: Level) -> Mapping[str, int]:
    """Free GPUs per domain of the level, on nodes some member may use: the view's tally of
    those nodes, kept as pods come and go (a pass over every node with a free GPU was 36 ms a
    waiting group at 65,536 nodes, at every event that frees room). Read-only."""
    return view.tally(m.selector for m in fit.members).sums[LEVELS.index(level)]


def _bound(ladder: Ladder, short: int, priority: int) -> tuple[int, int, int] | None:
    """A lower bound of the domain's cost (PDB flag aside): the lowest priority up to which the
    pods below `priority` hold `short` GPUs, and the fewest of those pods that do (largest first;
    node fit and gangs only add). None when all of them together do not."""
    if short <= 0:
        return 0, 0, 0
    for p, total, sizes in ladder:
        if p >= priority:
            return None
        if total >= short:
            pods, left = 0, short
            for size, n in sizes:
                take = min(n, -(-left // size))
                pods, left = pods + take, left - take * size
                if left <= 0:
                    break
            return p, pods, short
    return None


def closest(view: CapacityView, members: Sequence[Member], level: Level) -> str | None:
    """The domain of the level nearest to holding the group (most usable free GPUs): what a group
    that may not preempt waits on."""
    tally = view.tally(m.selector for m in members)
    return tally.most_free(LEVELS.index(level), view.order(level), view.generation)


def describe(plan: Plan, limit: int = 8) -> str:
    names = [f"{v.namespace}/{v.name}" for v in plan.victims]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more

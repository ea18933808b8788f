"""Which domain a group goes to. Pure over a CapacityView; the same code runs in the placer and in
bench/group_sim.py.

Level: the explicit one, or (auto) the smallest level with a domain large enough for the whole
group when empty. Gang: one domain must hold every member now, each on a node its own constraints
admit, with the GPUs free (best-fit-decreasing packing onto nodes). Choice among the domains that
fit: tightest (least free left after placing), ties by fabric order, so big holes stay whole for
big groups; "first" (first fit in fabric order) exists for the benchmark's comparison. Required
waits with the reason; preferred goes up one level at a time and at the top spreads over the
fewest domains (largest first, the last one best-fit, as Kueue's BestFit does).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from webhook.groups.capacity import CapacityView
from webhook.groups.names import LEVELS, Level, Locality
from webhook.groups.selector import Selector

Policy = Literal["tightest", "first"]


@dataclass(frozen=True, slots=True)
class Member:
    key: str  # the pod's namespace/name
    gpus: int
    selector: Selector


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    members: tuple[Member, ...]
    locality: Locality = "required"
    level: Level | Literal["auto"] = "auto"
    within: tuple[Level, str] | None = None  # the group's recorded domain (recovery)


@dataclass(frozen=True, slots=True)
class Assignment:
    member: str
    level: Level | None  # None: no network labels anywhere, preferred placed without a domain
    domain: str
    node: str  # where the GPUs are promised; the scheduler picks the node itself


@dataclass(frozen=True, slots=True)
class Placed:
    level: Level | None
    assignments: tuple[Assignment, ...]

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.domain for a in self.assignments))


@dataclass(frozen=True, slots=True)
class Waiting:
    level: Level | None
    message: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """One domain of a level as explain shows it."""

    domain: str
    free: int  # free GPUs on the domain's usable nodes
    usable_free: int  # of those, on nodes the members' own constraints admit
    fits: bool
    why: str


Decision = Placed | Waiting


def demand(members: Sequence[Member]) -> int:
    return sum(m.gpus for m in members)


def pack(
    members: Sequence[Member],
    nodes: Iterable[str],
    free: Callable[[str], int],
    eligible: Callable[[Selector], frozenset[str]],
    partial: bool = False,
) -> dict[str, str] | None:
    """Best-fit decreasing: member -> node. None when not every member fits (unless partial)."""
    room = {n: f for n in nodes if (f := free(n)) > 0}
    out: dict[str, str] = {}
    for m in sorted(members, key=lambda m: (-m.gpus, m.key)):
        ok = eligible(m.selector)
        best, best_free = "", -1
        for n, f in room.items():
            if f >= m.gpus and n in ok and (best_free < 0 or f < best_free):
                best, best_free = n, f
                if f == m.gpus:
                    break  # an exact fit cannot be beaten
        if best_free < 0:
            if partial:
                continue
            return None
        out[m.key] = best
        room[best] -= m.gpus
    return out


class _Eval:
    """Per-decision memo of eligibility and free GPUs (the view does not change meanwhile)."""

    def __init__(self, view: CapacityView, members: Sequence[Member]) -> None:
        self.view = view
        self.members = members
        self.shapes = {m.selector.signature: view.eligible(m.selector) for m in members}
        self.any_ok: frozenset[str] = frozenset().union(*self.shapes.values())
        self.need = demand(members)
        self.smallest = min((m.gpus for m in members), default=0)
        self._free: dict[str, int] = {}

    def subset(self, members: Sequence[Member]) -> _Eval:
        other = copy.copy(self)
        other.members, other.need = members, demand(members)
        return other

    def free(self, n: str) -> int:
        f = self._free.get(n)
        if f is None:
            f = self._free[n] = self.view.free(n)
        return f

    def alloc(self, n: str) -> int:
        info = self.view.nodes.get(n)
        return info.gpus if info is not None and info.usable else 0

    def eligible(self, s: Selector) -> frozenset[str]:
        return self.shapes[s.signature]

    def usable_free(self, nodes: Sequence[str], free: Callable[[str], int]) -> int:
        return sum(f for n in nodes if n in self.any_ok and (f := free(n)) >= self.smallest)

    def fit(self, nodes: Sequence[str], free: Callable[[str], int]) -> dict[str, str] | None:
        if self.usable_free(nodes, free) < self.need:
            return None  # cheap bound first: most domains fail here
        return pack(self.members, nodes, free, self.eligible)


def start_level(view: CapacityView, ev: _Eval, req: Request) -> Level | None:
    levels = view.levels()
    if not levels:
        return None
    if req.level != "auto":
        return req.level
    for level in levels:
        if any(ev.fit(nodes, ev.alloc) is not None for _, nodes in view.index()[level]):
            return level
    return levels[-1]


def candidates(view: CapacityView, members: Sequence[Member], level: Level) -> list[Candidate]:
    ev = _Eval(view, members)
    out = []
    for domain, nodes in view.index()[level]:
        usable = ev.usable_free(nodes, ev.free)
        fits = ev.fit(nodes, ev.free) is not None
        if fits:
            why = f"fits; {sum(ev.free(n) for n in nodes) - ev.need} GPUs left after placing"
        elif ev.fit(nodes, ev.alloc) is None:
            why = "too small even when empty for these pods' constraints"
        elif usable < ev.need:
            why = f"{usable} usable free GPUs, needs {ev.need}"
        else:
            why = "enough GPUs in total, but not on nodes where every pod fits whole"
        out.append(Candidate(domain, sum(ev.free(n) for n in nodes), usable, fits, why))
    return out


def _placed(level: Level | None, domain: str, assigned: dict[str, str]) -> Placed:
    return Placed(
        level, tuple(Assignment(k, level, domain, n) for k, n in sorted(assigned.items()))
    )


def _best(ev: _Eval, view: CapacityView, level: Level, policy: Policy) -> Placed | None:
    best: tuple[int, int, str, dict[str, str]] | None = None
    for order, (domain, nodes) in enumerate(view.index()[level]):
        assigned = ev.fit(nodes, ev.free)
        if assigned is None:
            continue
        if policy == "first":
            return _placed(level, domain, assigned)
        left = sum(ev.free(n) for n in nodes) - ev.need
        if best is None or (left, order) < best[:2]:
            best = (left, order, domain, assigned)
    return None if best is None else _placed(level, best[2], best[3])


def _why_waiting(ev: _Eval, view: CapacityView, level: Level) -> str:
    best_domain, best_free = "", -1
    for domain, nodes in view.index()[level]:
        usable = ev.usable_free(nodes, ev.free)
        if usable > best_free:
            best_domain, best_free = domain, usable
    text = f"no {level} has {ev.need} free GPUs for {len(ev.members)} pods"
    return f"{text}; best: {best_domain} with {best_free}" if best_domain else text


def _spread(ev: _Eval, view: CapacityView, level: Level) -> Placed | None:
    """Fewest domains of the top level: largest first, then the tightest one for the rest."""
    domains = sorted(view.index()[level], key=lambda d: -ev.usable_free(d[1], ev.free))
    room: dict[str, int] = {}

    def free(n: str) -> int:
        if n not in room:
            room[n] = ev.free(n)
        return room[n]

    left = list(ev.members)
    out: list[Assignment] = []
    used: set[str] = set()
    while left:
        rest = ev.subset(left)
        whole = [
            (sum(free(n) for n in nodes), order, d, a)
            for order, (d, nodes) in enumerate(domains)
            if d not in used and (a := rest.fit(nodes, free)) is not None
        ]
        if whole:
            _, _, domain, assigned = min(whole, key=lambda w: w[:2])
            out += [Assignment(k, level, domain, n) for k, n in sorted(assigned.items())]
            return Placed(level, tuple(out))
        nxt = next(((d, nodes) for d, nodes in domains if d not in used), None)
        if nxt is None:
            return None
        domain, nodes = nxt
        used.add(domain)
        assigned = pack(left, nodes, free, ev.eligible, partial=True) or {}
        sizes = {m.key: m.gpus for m in left}
        for k, n in sorted(assigned.items()):
            room[n] -= sizes[k]
            out.append(Assignment(k, level, domain, n))
        left = [m for m in left if m.key not in assigned]
    return Placed(level, tuple(out))


def decide(view: CapacityView, req: Request, policy: Policy = "tightest") -> Decision:
    ev = _Eval(view, req.members)
    if req.within is not None:
        at, domain = req.within
        assigned = ev.fit(view.domain_nodes(at, domain), ev.free)
        if assigned is not None:
            return _placed(at, domain, assigned)
        if req.locality == "required":
            usable = ev.usable_free(view.domain_nodes(at, domain), ev.free)
            return Waiting(
                at,
                f"the group's {at} {domain} has {usable} usable free GPUs; "
                f"{len(req.members)} new pods need {ev.need}",
            )
    level = start_level(view, ev, req)
    if level is None:
        if req.locality == "required":
            return Waiting(None, "no node carries a network label (gpufabric.io/leaf ... spine)")
        assigned = pack(req.members, sorted(view.nodes), ev.free, ev.eligible)
        if assigned is None:
            return Waiting(None, f"the cluster has no room for {ev.need} GPUs in these pods")
        return _placed(None, "", assigned)
    if req.within is not None:
        level = max(level, req.within[0], key=LEVELS.index)
    levels = view.levels()
    for current in LEVELS[LEVELS.index(level) :]:
        if current not in levels:
            continue
        placed = _best(ev, view, current, policy)
        if placed is not None:
            return placed
        if req.locality == "required":
            return Waiting(current, _why_waiting(ev, view, current))
    top = levels[-1]
    spread = _spread(ev, view, top)
    if spread is not None:
        return spread
    total = sum(ev.usable_free(nodes, ev.free) for _, nodes in view.index()[top])
    return Waiting(
        top, f"all {top} domains together have {total} usable free GPUs; needs {ev.need}"
    )

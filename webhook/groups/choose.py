"""Which domain a group goes to. Pure over a CapacityView; the same code runs in the placer and in
bench/group_sim.py.

Level: the explicit one, or (auto) the smallest level with a domain large enough for the whole
group when empty; the NVLink domain (names.LEVELS[0]) comes first where nodes carry it. Gang: one
domain must hold every member now, each on a node its own constraints admit, with the GPUs free
(best-fit-decreasing packing onto nodes). Choice among the domains that fit: tightest (least free
left after placing), ties by fabric order, so big holes stay whole for big groups; "first" (first
fit in fabric order) exists for the benchmark's comparison. Required waits with the reason;
preferred goes up one level at a time and at the top spreads over the fewest domains (largest
first, the last one best-fit, as Kueue's BestFit does).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

from webhook.groups.capacity import CapacityView
from webhook.groups.names import LEVELS, NVLINK_LEVEL, Level, Locality, level_key
from webhook.groups.selector import Selector
from webhook.groups.tally import Tally, free_for, slots

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

NO_LABELS = "no node carries a level label (gpufabric.io/nvlink-domain, leaf ... spine)"
NO_NVLINK = (
    f"group-level {NVLINK_LEVEL}: no node carries {level_key(NVLINK_LEVEL)} (no multi-node "
    "NVLink domain is known in this cluster)"
)


def demand(members: Sequence[Member]) -> int:
    return sum(m.gpus for m in members)


def pack(
    members: Sequence[Member],
    nodes: Iterable[str],
    free: Callable[[str], int],
    eligible: Callable[[Selector], AbstractSet[str]],
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
    """Per-decision memo of eligibility and free GPUs (the view does not change meanwhile).
    Which domains fit is read from the view's per-domain tallies; only a domain that is chosen,
    or that needs a packing to tell, is looked at node by node."""

    def __init__(self, view: CapacityView, members: Sequence[Member]) -> None:
        self.view = view
        self.members = members
        self.shapes = {m.selector.signature: view.admitted(m.selector) for m in members}
        self.need = demand(members)
        self.smallest = min((m.gpus for m in members), default=0)
        self._free: dict[str, int] = {}
        self._any_ok: AbstractSet[str] | None = None
        self._tally: Tally | None = None

    def subset(self, members: Sequence[Member]) -> _Eval:
        """The same view and eligibility for fewer members (their tally: the whole group's, an
        upper bound for them)."""
        other = copy.copy(self)
        other.members, other.need = members, demand(members)
        other.smallest = min((m.gpus for m in members), default=0)
        return other

    @property
    def any_ok(self) -> AbstractSet[str]:
        """Nodes at least one member may go to."""
        if self._any_ok is None:
            sets = list(self.shapes.values())
            self._any_ok = sets[0] if len(sets) == 1 else frozenset().union(*sets)
        return self._any_ok

    def tally(self) -> Tally:
        if self._tally is None:
            self._tally = self.view.tally(m.selector for m in self.members)
        return self._tally

    def free(self, n: str) -> int:
        f = self._free.get(n)
        if f is None:
            f = self._free[n] = self.view.free(n)
        return f

    def alloc(self, n: str) -> int:
        info = self.view.nodes.get(n)
        return info.gpus if info is not None and info.usable else 0

    def eligible(self, s: Selector) -> AbstractSet[str]:
        return self.shapes[s.signature]

    def uniform(self) -> tuple[AbstractSet[str], int, int] | None:
        """(eligible nodes, GPUs per pod, pods) when every member is the same shape."""
        shapes = {(m.selector.signature, m.gpus) for m in self.members}
        if len(shapes) != 1 or (0 in {g for _, g in shapes}):  # 0 GPUs: no slots to count
            return None
        signature, gpus = shapes.pop()
        return self.shapes[signature], gpus, len(self.members)

    def usable_free(self, nodes: Sequence[str], free: Callable[[str], int]) -> int:
        ok = self.any_ok
        return sum(f for n in nodes if n in ok and (f := free(n)) >= self.smallest)

    def fits(self, nodes: Sequence[str], free: Callable[[str], int]) -> bool:
        if self.usable_free(nodes, free) < self.need:
            return False  # cheap bound first: most domains fail here
        uniform = self.uniform()
        if uniform is not None:  # identical pods: counting whole-pod slots is exact
            ok, gpus, count = uniform
            return sum(free(n) // gpus for n in nodes if n in ok) >= count
        return pack(self.members, nodes, free, self.eligible) is not None

    def fit(self, nodes: Sequence[str], free: Callable[[str], int]) -> dict[str, str] | None:
        if not self.fits(nodes, free):
            return None
        return pack(self.members, nodes, free, self.eligible)

    def usable(self, level: Level) -> dict[str, int]:
        """Per domain of the level (those with any): free GPUs on nodes a member may go to that
        have room for the smallest member."""
        i = LEVELS.index(level)
        if self.smallest <= 1:  # every free GPU counts
            return dict(self.tally().sums[i])
        counts = self.tally().free[i]
        return {d: u for d, c in counts.items() if (u := free_for(c, self.smallest)) > 0}

    def most_usable(self, level: Level) -> tuple[str, int] | None:
        """The domain with the most usable free GPUs (the first in fabric order of equals)."""
        i, order = LEVELS.index(level), self.view.order(level)
        counts = self.tally().free[i]
        best: tuple[int, int, str] | None = None
        for d, have in self.tally().sums[i].items():
            if best is not None and have < -best[0]:
                continue  # its free GPUs bound what it can offer
            u = have if self.smallest <= 1 else free_for(counts[d], self.smallest)
            if u > 0 and (best is None or (-u, order[d]) < best[:2]):
                best = (-u, order[d], d)
        return None if best is None else (best[2], -best[0])

    def may_fit(self, level: Level, domain: str) -> bool:
        """False when the domain surely cannot hold the members now (a bound from its tally)."""
        counts = self.tally().free[LEVELS.index(level)].get(domain, {})
        return free_for(counts, self.smallest) >= self.need

    def fits_empty(self, level: Level) -> bool:
        """Some domain of the level holds every member when nothing runs on it."""
        uniform = self.uniform()
        i = LEVELS.index(level)
        size = self.tally().size[i]
        for domain, counts in self.tally().alloc[i].items():
            if size[domain] < self.need or free_for(counts, self.smallest) < self.need:
                continue
            if uniform is not None:
                if slots(counts, uniform[1]) >= uniform[2]:
                    return True
            elif self.fits(self.view.domain_nodes(level, domain), self.alloc):
                return True
        return False

    def fitting(self, level: Level) -> Iterator[tuple[str, int]]:
        """Domains of the level that hold every member now, with the GPUs left after placing,
        in fabric order."""
        i, order = LEVELS.index(level), self.view.order(level)
        counts, sums = self.tally().free[i], self.tally().sums[i]
        total = self.view.domain_free(level)
        uniform = self.uniform()
        found = []
        for d, have in sums.items():
            if have < self.need:
                continue
            if uniform is not None:  # enough whole-pod slots imply enough usable GPUs
                ok = slots(counts[d], uniform[1]) >= uniform[2]
            elif free_for(counts[d], self.smallest) < self.need:
                continue
            else:
                nodes = self.view.domain_nodes(level, d)
                ok = pack(self.members, nodes, self.free, self.eligible) is not None
            if ok:
                found.append((order[d], d, total[d] - self.need))
        for _, d, left in sorted(found):
            yield d, left


def start_level(view: CapacityView, ev: _Eval, req: Request) -> Level | None:
    levels = view.levels()
    if not levels:
        return None
    if req.level != "auto":
        return req.level
    key = ("start", tuple(sorted((m.selector.signature, m.gpus) for m in ev.members)))
    hit = view.memo.get(key)  # depends only on the nodes, not on what runs on them
    if hit is None:
        hit = next((level for level in levels if ev.fits_empty(level)), levels[-1])
        view.memo[key] = hit
    return hit  # type: ignore[return-value]


def chosen_level(view: CapacityView, req: Request) -> Level | None:
    """The level the group starts at (explicit, or the smallest that holds it when empty)."""
    return start_level(view, _Eval(view, req.members), req)


def candidates(view: CapacityView, members: Sequence[Member], level: Level) -> list[Candidate]:
    ev = _Eval(view, members)
    out = []
    for domain, nodes in view.index()[level]:
        usable = ev.usable_free(nodes, ev.free)
        fits = ev.fits(nodes, ev.free)
        if fits:
            why = f"fits; {sum(ev.free(n) for n in nodes) - ev.need} GPUs left after placing"
        elif not ev.fits(nodes, ev.alloc):
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
    best: tuple[int, int, str] | None = None
    order = view.order(level)
    for domain, left in ev.fitting(level):
        if best is None or (left, order[domain]) < best[:2]:
            best = (left, order[domain], domain)
        if policy == "first":
            break
    if best is None:
        return None
    assigned = pack(ev.members, view.domain_nodes(level, best[2]), ev.free, ev.eligible)
    return None if assigned is None else _placed(level, best[2], assigned)


def _why_waiting(ev: _Eval, view: CapacityView, level: Level) -> str:
    text = f"no {level} has {ev.need} free GPUs for {len(ev.members)} pods"
    best = ev.most_usable(level)
    return text if best is None else f"{text}; best: {best[0]} with {best[1]}"


def _spread(ev: _Eval, view: CapacityView, level: Level) -> Placed | None:
    """Fewest domains of the top level: largest first, then the tightest one for the rest."""
    usable = ev.usable(level)
    if sum(usable.values()) < ev.need:
        return None  # not even every usable free GPU together would do
    order = view.order(level)
    domains = sorted(order, key=lambda d: (-usable.get(d, 0), order[d]))
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
        whole = []
        for at, d in enumerate(domains[len(used) :], start=len(used)):
            if usable.get(d, 0) < rest.need:
                break  # the domains are in falling order of what they can offer
            nodes = view.domain_nodes(level, d)
            if rest.may_fit(level, d) and (a := rest.fit(nodes, free)) is not None:
                whole.append((sum(free(n) for n in nodes), at, d, a))
        if whole:
            _, _, domain, assigned = min(whole, key=lambda w: w[:2])
            out += [Assignment(k, level, domain, n) for k, n in sorted(assigned.items())]
            return Placed(level, tuple(out))
        if len(used) == len(domains):
            return None
        nxt = domains[len(used)]  # the largest left
        used.add(nxt)
        nodes = view.domain_nodes(level, nxt)
        assigned = pack(left, nodes, free, ev.eligible, partial=True) or {}
        sizes = {m.key: m.gpus for m in left}
        for k, n in sorted(assigned.items()):
            room[n] -= sizes[k]
            out.append(Assignment(k, level, nxt, n))
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
    levels = view.levels()
    if req.level == NVLINK_LEVEL and NVLINK_LEVEL not in levels and req.locality == "required":
        return Waiting(NVLINK_LEVEL, NO_NVLINK)
    level = start_level(view, ev, req)
    if level is None:
        if req.locality == "required":
            return Waiting(None, NO_LABELS)
        assigned = pack(req.members, sorted(view.nodes), ev.free, ev.eligible)
        if assigned is None:
            return Waiting(None, f"the cluster has no room for {ev.need} GPUs in these pods")
        return _placed(None, "", assigned)
    if req.within is not None:
        level = max(level, req.within[0], key=LEVELS.index)
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
    total = sum(ev.usable(top).values())
    return Waiting(
        top, f"all {top} domains together have {total} usable free GPUs; needs {ev.need}"
    )

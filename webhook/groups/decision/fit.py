"""Whether a group's members fit a set of nodes, and where: best-fit-decreasing packing, and the
per-decision evaluation choose.py reads (which domains of a level hold the group now or when
empty, how much each can offer), bounded first by the view's per-domain tallies.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.decision.tally import Tally, free_for, slots
from webhook.groups.model.names import LEVELS, Level
from webhook.groups.model.selector import Selector


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
    for m in members:
        for n in m.avoid:  # one IMEX channel a node: its group holds these already
            room.pop(n, None)
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
        if m.whole:  # its group's IMEX channel on that node is taken
            del room[best]
    return out


class GroupFit:
    """Per-decision memo of eligibility and free GPUs (the view does not change meanwhile).
    Which domains fit is read from the view's per-domain tallies; only a domain that is chosen,
    or that needs a packing to tell, is looked at node by node."""

    def __init__(self, view: CapacityView, members: Sequence[Member]) -> None:
        self.view = view
        self.members = members
        self.shapes = {m.selector.signature: view.admitted(m.selector) for m in members}
        self.need = demand(members)
        self.smallest = min((m.gpus for m in members), default=0)
        self.one = any(m.whole for m in members)  # one member a node (IMEX channel)
        self._free: dict[str, int] = {}
        self._any_ok: AbstractSet[str] | None = None
        self._tally: Tally | None = None

    def subset(self, members: Sequence[Member]) -> GroupFit:
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
            if self.one:
                return sum(1 for n in nodes if n in ok and free(n) >= gpus) >= count
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

    def most_nodes(self, level: Level) -> tuple[str, int] | None:
        """The domain with the most nodes a member may go to that have room for the smallest
        one (the first in fabric order of equals): one member a node counts nodes."""
        i, order = LEVELS.index(level), self.view.order(level)
        best: tuple[int, int, str] | None = None
        for d, counts in self.tally().free[i].items():
            n = slots(counts, max(self.smallest, 1), True)
            if n and (best is None or (-n, order[d]) < best[:2]):
                best = (-n, order[d], d)
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
                if slots(counts, uniform[1], self.one) >= uniform[2]:
                    return True
            elif self.fits(self.view.domain_nodes(level, domain), self.alloc):
                return True
        return False

    def best(self, level: Level, tightest: bool = True) -> tuple[str, int] | None:
        """The domain of the level that holds every member now, with the GPUs left after
        placing: the tightest (fewest left, then first in fabric order) or the first in fabric
        order. A domain's fit is judged only where it would beat the one found so far (judging
        every domain with room was 13 ms a decision at 65,536 nodes, half of them busy)."""
        i, order = LEVELS.index(level), self.view.order(level)
        counts, sums = self.tally().free[i], self.tally().sums[i]
        total = self.view.domain_free(level)
        uniform = self.uniform()
        found: tuple[int, int, str] | None = None
        for d, have in sums.items():
            if have < self.need:
                continue
            rank = (total[d] - self.need if tightest else 0, order[d])
            if found is not None and rank >= found[:2]:
                continue
            if uniform is not None:  # enough whole-pod slots imply enough usable GPUs
                ok = slots(counts[d], uniform[1], self.one) >= uniform[2]
            elif free_for(counts[d], self.smallest) < self.need:
                continue
            else:
                nodes = self.view.domain_nodes(level, d)
                ok = pack(self.members, nodes, self.free, self.eligible) is not None
            if ok:
                found = (*rank, d)
        return None if found is None else (found[2], total[found[2]] - self.need)

"""Inside the domain a group is given: the fewest lowest domains that hold it (DESIGN.md "Ranks").

choose.decide picks the domain and packs the members onto its nodes in name order, which on a
cluster whose names do not follow the leaves spreads an 8-pod group over every leaf of a quad.
Here the members move to the fewest lowest domains (NVLink domain where the nodes have one, else
leaf) that hold them, so a ring over the ranks crosses only the boundaries the size forces.
Among the sets of that many domains, the tightest: least free GPUs left in them after placing (as
between domains), then the fewest wholly free domains broken (they stay whole for the next big
group), then fabric order. Pure over a CapacityView; reads the nodes of the given domain only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.decision.fit import pack
from webhook.groups.decision.ranks import Lowest
from webhook.groups.model.names import LEVELS, Level

_EXACT_BUDGET = 10_000  # DP steps (domains x count x need, ~0.15 us each) before the greedy


@dataclass(frozen=True, slots=True, eq=False)  # identity: two domains never compare equal
class Low:
    """One lowest domain inside the group's domain, as the choice sees it."""

    name: Lowest
    nodes: tuple[str, ...]  # its usable nodes with a free GPU
    holds: int  # pods (one shape) or GPUs (mixed shapes) it takes for these members
    free: int  # its free GPUs
    whole: bool  # every GPU of the domain is free (breaking it costs a whole domain)


def lows(
    view: CapacityView,
    nodes: Sequence[str],
    members: Sequence[Member],
    free: Callable[[str], int],
) -> list[Low]:
    """The lowest domains of `nodes` in fabric order, with what each can take of `members`."""
    gpu_members = [m for m in members if m.gpus > 0]
    shapes = {(m.selector.signature, m.gpus) for m in gpu_members}
    ok = {m.selector.signature: view.eligible(m.selector) for m in gpu_members}
    any_ok = frozenset[str]().union(*ok.values())
    smallest = min((m.gpus for m in gpu_members), default=1)
    # one shape: whole pods per domain (exact); mixed: usable GPUs (a bound, checked by pack)
    signature, per = next(iter(shapes)) if len(shapes) == 1 else ("", 0)
    at: dict[Lowest, list[str]] = {}
    whole: dict[Lowest, bool] = {}
    for n in nodes:
        low = view.lowest(n)
        if low is None:
            continue
        f = free(n)
        info = view.nodes.get(n)
        whole[low] = whole.get(low, True) and info is not None and info.usable and f == info.gpus
        if f > 0:
            at.setdefault(low, []).append(n)
    out = []
    for low, ns in at.items():
        if per:
            one = gpu_members[0].whole  # one member a node (IMEX channel)
            holds = sum(
                min(free(n) // per, 1) if one else free(n) // per for n in ns if n in ok[signature]
            )
        else:
            holds = sum(f for n in ns if n in any_ok and (f := free(n)) >= smallest)
        out.append(Low(low, tuple(ns), holds, sum(free(n) for n in ns), whole[low]))
    orders = {lv: view.order(lv) for lv in LEVELS}
    return sorted(out, key=lambda d: (LEVELS.index(d.name[0]), orders[d.name[0]].get(d.name[1], 0)))


def fewest_count(holds: Sequence[int], need: int) -> int | None:
    """The fewest domains whose capacities reach `need` (largest first is exact for a count)."""
    total = 0
    for k, h in enumerate(sorted(holds, reverse=True), start=1):
        total += h
        if total >= need:
            return k
    return None if need > 0 else 0


def choose_lows(
    domains: Sequence[Low], need: int, budget: int = _EXACT_BUDGET
) -> tuple[Low, ...] | None:
    """The fewest domains that reach `need`, the tightest such set; None when all together fall
    short. Exact (a DP over count and capped capacity) within `budget` steps, else greedy."""
    useful = [d for d in domains if d.holds > 0]
    k = fewest_count([d.holds for d in useful], need)
    if k is None:
        return None
    if k <= 1:
        fits = [d for d in useful if d.holds >= need]
        return (min(fits, key=lambda d: (d.free, d.whole)),) if fits and k else ()
    if len(useful) * k * (need + 1) <= budget:
        return _exact(useful, need, k)
    return _greedy(useful, need, k)


def _exact(domains: Sequence[Low], need: int, k: int) -> tuple[Low, ...]:
    # state (count, capacity capped at need) -> (cost, chosen); cost adds up per domain, so the
    # cheapest partial set per state is the only one worth extending
    best: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, ...]]] = {(0, 0): ((0, 0), ())}
    for i, d in enumerate(domains):
        for (j, s), ((free, broken), chosen) in list(best.items()):
            if j == k:
                continue
            key = (j + 1, min(need, s + d.holds))
            cost = (free + d.free, broken + d.whole)
            have = best.get(key)
            if have is None or cost < have[0]:
                best[key] = (cost, (*chosen, i))
    return tuple(domains[i] for i in best[(k, need)][1])


def _greedy(domains: Sequence[Low], need: int, k: int) -> tuple[Low, ...]:
    """One domain at a time: the tightest that still lets the rest reach `need` with the
    largest remaining domains."""
    left = sorted(domains, key=lambda d: (d.free, d.whole))
    caps = sorted((d.holds for d in left), reverse=True)
    chosen: list[Low] = []
    for step in range(k, 0, -1):
        rest = sum(caps[: step - 1])  # the step-1 largest: what the others can add at most
        # d is enough when it covers what they leave, or is one of them (the step largest reach
        # `need` by the choice of k)
        least = min(need - rest, caps[step - 2] if step > 1 else need)
        pick = next(d for d in left if d.holds >= least)
        chosen.append(pick)
        left.remove(pick)
        caps.remove(pick.holds)
        need -= pick.holds
        if need <= 0:
            break
    return tuple(chosen)


def _need(members: Sequence[Member]) -> int:
    """What the lowest domains' `holds` must add up to: pods of one shape, else GPUs."""
    gpu_members = [m for m in members if m.gpus > 0]
    if len({(m.selector.signature, m.gpus) for m in gpu_members}) == 1:
        return len(gpu_members)
    return sum(m.gpus for m in gpu_members)


def fewest_possible(
    view: CapacityView,
    level: Level,
    domain: str,
    members: Sequence[Member],
    free: Callable[[str], int],
) -> int | None:
    """The fewest lowest domains of (level, domain) that could hold the members now."""
    holds = [d.holds for d in lows(view, view.domain_nodes(level, domain), members, free)]
    return fewest_count(holds, _need(members))


def fewest(
    view: CapacityView,
    level: Level,
    domain: str,
    members: Sequence[Member],
    free: Callable[[str], int],
) -> dict[str, str] | None:
    """member -> node inside (level, domain) on the fewest lowest domains, tightest first; None
    when the members do not fit there (the caller keeps the decision it has)."""
    domains = lows(view, view.domain_nodes(level, domain), members, free)
    if len(domains) <= 1:
        return None  # one lowest domain: nothing to choose
    chosen = choose_lows(domains, _need(members))
    if chosen is None:
        return None
    rest = sorted((d for d in domains if d not in chosen), key=lambda d: (d.free, d.whole))
    picked = list(chosen)
    while True:  # mixed shapes: a capacity in GPUs can promise more than whole pods fit
        got = pack(members, [n for d in picked for n in d.nodes], free, view.eligible)
        if got is not None or not rest:
            return got
        picked.append(rest.pop(0))

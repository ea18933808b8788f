"""Which domain a group goes to. Pure over a CapacityView; the same code runs in the placer and in
bench/group_sim.py.

Level: the explicit one, or (auto) the smallest level with a domain large enough for the whole
group when empty; the NVLink domain (names.LEVELS[0]) comes first where nodes carry it. Gang: one
domain must hold every member now, each on a node its own constraints admit, with the GPUs free
(best-fit-decreasing packing onto nodes). Choice among the domains that fit: tightest (least free
left after placing), ties by fabric order, so big holes stay whole for big groups; "first" (first
fit in fabric order) exists for the benchmark's comparison. Required waits with the reason;
preferred goes up one level at a time and at the top spreads over the fewest domains (largest
first, the last one best-fit, as Kueue's BestFit does). Whether and where members fit: fit.py; the
request and the answer: decision.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import (
    Assignment,
    Candidate,
    Decision,
    Member,
    Placed,
    Policy,
    Request,
    Waiting,
)
from webhook.groups.decision.fit import GroupFit, pack
from webhook.groups.model.names import LEVELS, NVLINK_LEVEL, Level, level_key

NO_LABELS = "no node carries a level label (gpufabric.io/nvlink-domain, leaf ... spine)"
NO_NVLINK = (
    f"group-level {NVLINK_LEVEL}: no node carries {level_key(NVLINK_LEVEL)} (no multi-node "
    "NVLink domain is known in this cluster)"
)


def start_level(view: CapacityView, ev: GroupFit, req: Request) -> Level | None:
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
    return start_level(view, GroupFit(view, req.members), req)


def candidates(view: CapacityView, members: Sequence[Member], level: Level) -> list[Candidate]:
    ev = GroupFit(view, members)
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


def _best(ev: GroupFit, view: CapacityView, level: Level, policy: Policy) -> Placed | None:
    best = ev.best(level, tightest=policy != "first")
    if best is None:
        return None
    assigned = pack(ev.members, view.domain_nodes(level, best[0]), ev.free, ev.eligible)
    return None if assigned is None else _placed(level, best[0], assigned)


def _why_waiting(ev: GroupFit, view: CapacityView, level: Level) -> str:
    if ev.one:  # one member a node: what is short is trays, whatever GPUs they have free
        n, per = len(ev.members), max(ev.smallest, 1)
        text = (
            f"no {level} has {n} free trays for {n} pods, one a tray (a tray has one IMEX "
            f"channel; free: {per} GPU{'s' if per > 1 else ''} free and no other "
            "ComputeDomain's channel)"
        )
        trays = ev.most_nodes(level)
        return text if trays is None else f"{text}; best: {trays[0]} with {trays[1]} free trays"
    text = f"no {level} has {ev.need} free GPUs for {len(ev.members)} pods"
    best = ev.most_usable(level)
    return text if best is None else f"{text}; best: {best[0]} with {best[1]}"


def _spread(ev: GroupFit, view: CapacityView, level: Level) -> Placed | None:
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
    ev = GroupFit(view, req.members)
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

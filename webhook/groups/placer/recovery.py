"""Members of a placed group that come back: replacements seated again in the lowest domains of
their ranks, and, after a placer restart, the GPUs of ungated, unbound members promised again in
their domains. Pure over a CapacityView and the pods' records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Policy, Request, Waiting
from webhook.groups.decision.ranks import free_ranks
from webhook.groups.decision.seating import Seat, held_lowest, seat_replacements
from webhook.groups.framework.enforce import parse_placement
from webhook.groups.model.names import LEVELS, Level
from webhook.groups.model.records import PodRecord, member_key


def seat_again(
    view: CapacityView,
    req: Request,
    recs: Iterable[PodRecord],
    fixed: Mapping[str, int],
    size: int,
    unranked: frozenset[str],
    policy: Policy,
) -> Waiting | tuple[Seat, ...]:
    """Seats for a placed group's gated members (`req.within` set): back in the lowest domains
    of their ranks; plain ones take the ranks no member holds."""
    placed = [r for r in recs if not r.gated]
    kept = [r.rank for r in placed if r.rank is not None and member_key(r) not in fixed]
    ranks = {m.key: fixed[m.key] for m in req.members if m.key in fixed}
    free = iter(free_ranks(size - len(unranked), [*fixed.values(), *kept]))
    for m in sorted(req.members, key=lambda m: m.key):
        if m.key not in ranks and m.key not in unranked:
            ranks[m.key] = next(free, size)  # more members than ranks is refused before
    lows = {}
    for r in placed:
        rank = fixed.get(member_key(r), r.rank)
        low = held_lowest(r.body, r.node, view)
        if rank is not None and low is not None:
            lows[rank] = low
    return seat_replacements(view, req, ranks, lows, policy)


def repromise(
    view: CapacityView,
    pods: Iterable[PodRecord],
    may: Callable[[PodRecord, str], bool] = lambda _r, _n: True,
    promised: Callable[[PodRecord, str], None] = lambda _r, _n: None,
) -> None:
    """After a restart: ungated, unbound members keep their GPUs promised in their domain, on a
    node `may` allows them (an IMEX channel free there); `promised` hears each promise."""
    for rec in pods:
        if rec.group is None or rec.gated or rec.node or not rec.member:
            continue
        where = parse_placement(rec.placement)
        if where is None or where[0] not in LEVELS or rec.selector is None:
            continue
        ok = view.eligible(rec.selector)
        own = held_lowest(rec.body, "", view)  # its own lowest domain, when held to one
        fits = [
            (view.free(n), n)
            for n in view.domain_nodes(*(own or (where[0], where[1])))
            if n in ok and view.free(n) >= rec.gpus and may(rec, n)
        ]
        if fits:
            view.promise(rec.uid, min(fits)[1], rec.gpus)
            promised(rec, min(fits)[1])


def outcome(seats: tuple[Seat, ...], within: tuple[Level, str] | None) -> str:
    """How a decision went, for the decision metric."""
    domains = {s.domain for s in seats}
    if within is not None:
        return "recovered" if domains == {within[1]} else "moved"
    return "spread" if len(domains) > 1 else "placed"

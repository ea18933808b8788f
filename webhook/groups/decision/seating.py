"""From a group decision to each member's seat: rank, node, and the lowest domain that holds it.

The glue between choose.decide (which domain, which nodes) and ranks (which member where): new
groups are seated in fabric order; replacements in a placed group go back to the lowest domain
their rank belongs to when it has room, else decide places them by the group's locality rule and
the seat says why it moved. Pure over a CapacityView, like choose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.groups.decision.capacity import CapacityView, fabric_order
from webhook.groups.decision.choose import decide
from webhook.groups.decision.decision import Assignment, Member, Placed, Policy, Request, Waiting
from webhook.groups.decision.fit import pack
from webhook.groups.decision.inside import fewest
from webhook.groups.decision.ranks import Lowest, Slot, homes, lowest, neighbours, seat
from webhook.groups.model.names import LEVELS, Level, level_key
from webhook.kube.nodeselector import required_terms


@dataclass(frozen=True, slots=True)
class Seat:
    member: str
    rank: int | None  # None: the member takes no rank (an MPI launcher without GPUs)
    level: Level | None  # the group's level and domain, as decision.Assignment
    domain: str
    node: str  # where the GPUs are promised
    hold: Lowest | None  # the member's own lowest domain (None: no network labels)
    moved: str = ""  # recovery: why the member is not back in its rank's lowest domain


def rank_runs(seats: Sequence[Seat], limit: int = 0) -> str:
    """'leaf leaf-2: 0-3; leaf leaf-3: 4-7': each lowest domain with its consecutive ranks (at
    most `limit` runs when set, then how many more)."""
    runs: list[tuple[str, int, int]] = []
    for s in sorted((s for s in seats if s.rank is not None), key=lambda s: s.rank or 0):
        assert s.rank is not None  # noqa: S101 - filtered above
        where = f"{s.hold[0]} {s.hold[1]}" if s.hold else "no domain"
        if runs and runs[-1][0] == where and runs[-1][2] == s.rank - 1:
            runs[-1] = (where, runs[-1][1], s.rank)
        else:
            runs.append((where, s.rank, s.rank))
    words = [f"{w}: {a}" if a == b else f"{w}: {a}-{b}" for w, a, b in runs]
    if limit and len(words) > limit:
        words = [*words[:limit], f"... {len(words) - limit} more"]
    return "; ".join(words)


def seat_words(s: Seat, seats: Sequence[Seat]) -> str:
    """The GroupPlaced Event's words for one seat: its rank and own lowest domain (level named
    with the value: a pair is often named after its first leaf), then the group's ranks per
    lowest domain."""
    if s.rank is None:
        return "no rank (an MPI launcher without GPUs)"
    own = f" in {s.hold[0]} {s.hold[1]}" if s.hold and s.hold != (s.level, s.domain) else ""
    return f"rank {s.rank}{own}; ranks by lowest domain: {rank_runs(seats, 8)}"


def _shape(m: Member) -> tuple[str, int]:
    return (m.selector.signature, m.gpus)


def node_order(view: CapacityView, nodes: Sequence[str]) -> dict[str, Any]:
    """Sort key per node: its lowest domain's place in fabric order (the domain's first node
    top-down: spine, quad, pair, leaf...), then the node's own place."""
    orders = [view.order(lv) for lv in LEVELS]
    first: dict[Lowest | None, tuple[int, ...]] = {}
    lows: dict[str, Lowest | None] = {}
    for n in nodes:
        where = view.where(n)
        key = tuple(orders[i].get(d, -1) if d else -1 for i, d in reversed(list(enumerate(where))))
        low = lows[n] = lowest(where)
        have = first.get(low)
        if have is None or key < have:
            first[low] = key
    return {n: (first[lows[n]], lows[n] or ("", ""), fabric_order(n)) for n in nodes}


def compact(
    view: CapacityView, assignments: Sequence[Assignment], members: Sequence[Member]
) -> tuple[Assignment, ...]:
    """The decision's assignments moved, per domain, onto the fewest lowest domains that hold
    them (inside.fewest); a domain where that finds nothing better keeps its own."""
    by_key = {m.key: m for m in members}
    per: dict[tuple[Level | None, str], list[Assignment]] = {}
    for a in assignments:
        per.setdefault((a.level, a.domain), []).append(a)
    out: list[Assignment] = []
    for (level, domain), these in per.items():
        got = None
        if level is not None and len(these) > 1:
            got = fewest(view, level, domain, [by_key[a.member] for a in these], view.free)
        out += these if got is None else [replace(a, node=got[a.member]) for a in these]
    return tuple(out)


def seat_new(
    view: CapacityView,
    placed: Placed,
    members: Sequence[Member],
    fixed: Mapping[str, int],
    unranked: frozenset[str] = frozenset(),
) -> tuple[Seat, ...]:
    """Every member of a newly placed group in its seat, ranks 0..size-1 in fabric order on the
    fewest lowest domains; `unranked` members (an MPI launcher without GPUs) get no rank."""
    return seat_assignments(
        view, compact(view, placed.assignments, members), members, fixed, unranked
    )


def seat_assignments(
    view: CapacityView,
    assignments: Sequence[Assignment],
    members: Sequence[Member],
    fixed: Mapping[str, int],
    unranked: frozenset[str],
) -> tuple[Seat, ...]:
    """Seats on the nodes the assignments give, as they are (no compacting)."""
    shapes = {m.key: _shape(m) for m in members}
    ranked = [a for a in assignments if a.member not in unranked]
    slots = [Slot(a.member, shapes[a.member], a.node) for a in ranked]
    seats = seat(slots, node_order(view, [s.node for s in slots]), fixed)
    by_member = {a.member: a for a in ranked}
    out = []
    for m, (rank, slot) in sorted(seats.items(), key=lambda kv: kv[1][0]):
        a = by_member[slot]
        out.append(Seat(m, rank, a.level, a.domain, a.node, lowest(view.where(a.node))))
    out += [
        Seat(a.member, None, a.level, a.domain, a.node, None)
        for a in assignments
        if a.member in unranked
    ]
    return tuple(out)


def held_lowest(body: Mapping[str, Any], node: str, view: CapacityView) -> Lowest | None:
    """A placed member's lowest domain: its node's when bound, else the lowest level the placer
    held it to (an `In` expression on a level label in its required node affinity)."""
    if node:
        return lowest(view.where(node))
    found: dict[Level, str] = {}
    keys = {level_key(lv): lv for lv in LEVELS}
    for term in required_terms(body) or ():
        for expr in (term or {}).get("matchExpressions") or ():
            level = keys.get(str((expr or {}).get("key")))
            values = (expr or {}).get("values") or []
            if level and expr.get("operator") == "In" and len(values) == 1:
                found[level] = str(values[0])
    return next(((lv, found[lv]) for lv in LEVELS if lv in found), None)


def seat_replacements(
    view: CapacityView,
    req: Request,
    ranks: Mapping[str, int],
    held: Mapping[int, Lowest],
    policy: Policy = "tightest",
) -> Waiting | tuple[Seat, ...]:
    """Replacements in a placed group (req.within set): each back to its rank's lowest domain when
    that has room on nodes its constraints admit, the rest by decide; all or none. A member
    without an entry in `ranks` takes no rank (it goes anywhere the group's domain allows)."""
    assert req.within is not None  # noqa: S101 - recovery only
    within_nodes = set(view.domain_nodes(*req.within))
    room: dict[str, int] = {}

    def free(n: str) -> int:
        if n not in room:
            room[n] = view.free(n)
        return room[n]

    seats: list[Seat] = []
    rest: list[Member] = []
    tried: dict[str, tuple[Lowest, ...]] = {}
    for m in sorted(req.members, key=lambda m: (m.key not in ranks, ranks.get(m.key, 0))):
        if m.key not in ranks and not m.gpus:  # no rank, no GPU: any node of the domain it admits
            ok = view.eligible(m.selector)
            node = next((n for n in view.domain_nodes(*req.within) if n in ok), "")
            if node:
                seats.append(Seat(m.key, None, *req.within, node, None))
                continue
        tried[m.key] = homes(ranks[m.key], held) if m.key in ranks else ()
        for home in tried[m.key]:
            nodes = [n for n in view.domain_nodes(*home) if n in within_nodes]
            got = pack([m], nodes, free, view.eligible)
            if got:
                node = got[m.key]
                room[node] -= m.gpus
                seats.append(Seat(m.key, ranks[m.key], *req.within, node, home))
                break
        else:
            rest.append(m)
    if not rest:
        return tuple(seats)
    promised = [f"seat:{s.member}" for s in seats]
    gpus = {m.key: m.gpus for m in req.members}
    for uid, s in zip(promised, seats, strict=True):  # decide must not count them as free
        view.promise(uid, s.node, gpus[s.member])
    try:
        decision = decide(view, replace(req, members=tuple(rest)), policy)
        if isinstance(decision, Waiting):
            return decision
        assignments = compact(view, decision.assignments, rest)
    finally:
        for uid in promised:
            view.release(uid)
    # the rest in fabric order among themselves, lowest rank first
    ranked = sorted((m for m in rest if m.key in ranks), key=lambda m: ranks[m.key])
    by_rank = {m.key: i for i, m in enumerate(ranked)}
    unranked = frozenset(m.key for m in rest if m.key not in ranks)
    moved = [
        replace(s, rank=None if s.rank is None else ranks[s.member])
        for s in seat_assignments(view, assignments, rest, by_rank, unranked)
    ]
    where = {
        **held,
        **{s.rank: s.hold for s in (*seats, *moved) if s.hold is not None and s.rank is not None},
    }
    return (*seats, *(_why_moved(s, tried[s.member], where) for s in moved))


def _why_moved(s: Seat, tried: tuple[Lowest, ...], where: Mapping[int, Lowest]) -> Seat:
    """The seat with the words for its Event when it sits apart from both its ring neighbours
    though a lowest domain beside them was its place (a move that costs the ring a crossing)."""
    if s.rank is None:
        return s
    beside = neighbours(s.rank, list(where))
    if not tried or not beside or s.hold in {where[r] for r in beside}:
        return s
    was = " or ".join(f"{lv} {d}" for lv, d in tried)
    now = f"{s.hold[0]} {s.hold[1]}" if s.hold else "a node without a network label"
    ranks = " and ".join(str(r) for r in beside)
    text = (
        f"rank {s.rank} belongs in {was} beside rank{'s' if len(beside) > 1 else ''} {ranks}, "
        f"which has no room on nodes its constraints admit; placed in {now}"
    )
    return replace(s, moved=text)

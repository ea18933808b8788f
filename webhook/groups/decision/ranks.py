"""Ranks in fabric order (DESIGN.md "Ranks"). Pure: no view, no pods, only members and places.

A member's lowest domain is the first level, bottom up, its node has a domain at (NVLink domain
where the node has one, else leaf). Seats are the places a decision gave the members, sorted so
that every lowest domain's seats are consecutive and the domains follow fabric order; rank r sits
in seat r. A member with an index keeps it as its rank and takes seat `index` when that seat is
of its own shape (GPUs and constraints): members of one shape may swap seats, others may not.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from webhook.groups.model.names import ANN_PLACEMENT, ANN_RANK, LEVELS, Level

ENV_RANK: Final = "GPUFABRIC_RANK"
ENV_GROUP_SIZE: Final = "GPUFABRIC_GROUP_SIZE"
ENV_PLACEMENT: Final = "GPUFABRIC_PLACEMENT"

Lowest = tuple[Level, str]  # (level, domain) of a member's lowest domain


def _from_annotation(env: str, key: str) -> dict[str, Any]:
    path = f"metadata.annotations['{key}']"
    return {"name": env, "valueFrom": {"fieldRef": {"fieldPath": path}}}


_RANK_ENV: Final = _from_annotation(ENV_RANK, ANN_RANK)
_PLACEMENT_ENV: Final = _from_annotation(ENV_PLACEMENT, ANN_PLACEMENT)


def member_env(size: int) -> tuple[dict[str, Any], ...]:
    """The variables every container of a member gets (unless it sets them itself)."""
    return (_RANK_ENV, {"name": ENV_GROUP_SIZE, "value": str(size)}, _PLACEMENT_ENV)


def lowest(where: Sequence[str | None]) -> Lowest | None:
    """The lowest domain of a node whose domains per level (LEVELS order) are `where`."""
    for level, domain in zip(LEVELS, where, strict=False):
        if domain:
            return level, domain
    return None


@dataclass(frozen=True, slots=True)
class Slot:
    member: str  # the member the decision put here
    shape: Hashable  # members of one shape may take each other's slots
    node: str


def seat(
    slots: Sequence[Slot], order: Mapping[str, Any], fixed: Mapping[str, int]
) -> dict[str, tuple[int, str]]:
    """member -> (its rank, the member whose slot it takes). `order`: node -> sort key that keeps
    each lowest domain together, in fabric order; `fixed`: the ranks indexes give."""
    ordered = sorted(slots, key=lambda s: (order[s.node], s.member))
    positions: dict[Hashable, list[int]] = {}
    members: dict[Hashable, list[str]] = {}
    for p, s in enumerate(ordered):
        positions.setdefault(s.shape, []).append(p)
        members.setdefault(s.shape, []).append(s.member)
    at: dict[str, int] = {}  # member -> position
    for shape, free in positions.items():
        mine = members[shape]
        indexed = sorted((m for m in mine if m in fixed), key=fixed.__getitem__)
        plain = sorted(m for m in mine if m not in fixed)
        own = set(free)
        late = []
        for m in indexed:
            if fixed[m] in own:
                at[m] = fixed[m]
                own.discard(fixed[m])
            else:
                late.append(m)
        for m, p in zip([*late, *plain], sorted(own), strict=True):
            at[m] = p
    pool = sorted(set(range(len(ordered))) - set(fixed.values()))
    plain_at = sorted((p, m) for m, p in at.items() if m not in fixed)
    ranks = dict(fixed)
    taken = {p for p, _ in plain_at if p in pool}
    rest = [r for r in pool if r not in taken]
    for p, m in plain_at:  # a plain member's rank is its position unless an index holds it
        ranks[m] = p if p in taken else rest.pop(0)
    return {m: (ranks[m], ordered[p].member) for m, p in at.items()}


def neighbours(rank: int, ranks: Sequence[int]) -> tuple[int, ...]:
    """The ranks beside `rank` on the ring over `ranks` (wrap-around included), below first."""
    others = sorted(set(ranks) - {rank})
    if not others:
        return ()
    below = max((r for r in others if r < rank), default=others[-1])
    above = min((r for r in others if r > rank), default=others[0])
    return tuple(dict.fromkeys((below, above)))


def homes(rank: int, held: Mapping[int, Lowest]) -> tuple[Lowest, ...]:
    """Where a lost rank belongs: the lowest domains of its ring neighbours still held (the same
    one inside a domain, two at a domain's edge), the one below first."""
    return tuple(dict.fromkeys(held[r] for r in neighbours(rank, list(held))))


def free_ranks(size: int, taken: Sequence[int]) -> list[int]:
    """The ranks no member holds, lowest first (what replacements without an index get)."""
    used = set(taken)
    return [r for r in range(size) if r not in used]

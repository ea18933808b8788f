"""The rules of DESIGN "Priority" that read a group's members: the order groups are tried in,
members that disagree on priority, and the levels a group may preempt at. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import chosen_level
from webhook.groups.decision.decision import Request
from webhook.groups.model.names import LEVELS, Level

OrderKey = tuple[int, str, str]


def order_key(members: Iterable[tuple[int, str, str]]) -> OrderKey:
    """From each member's (priority, creationTimestamp, uid): highest priority first, then the
    oldest (the first member's creation time, then its uid); never by name."""
    items = list(members)
    if not items:
        return 0, "", ""
    first = min(items, key=lambda m: (m[1], m[2]))
    return -max(m[0] for m in items), first[1], first[2]


def differ(members: Iterable[tuple[str, int, bool]]) -> list[str]:
    """From each member's (name, priority, preemptionPolicy Never): the problem when they differ,
    naming the pods."""
    says: dict[tuple[int, bool], list[str]] = {}
    for name, priority, never in members:
        says.setdefault((priority, never), []).append(name)
    if len(says) < 2:
        return []
    parts = [
        f"{', '.join(names)}: priority {p}, preemptionPolicy "
        f"{'Never' if never else 'PreemptLowerPriority'}"
        for (p, never), names in sorted(says.items())
    ]
    return ["members differ in priority or preemption policy: " + "; ".join(parts)]


def levels(view: CapacityView, req: Request, waited_at: Level) -> tuple[Level, ...]:
    """Where the group may preempt: `required` at the level it waits at; `preferred` from its
    own level up, as its placement climbs."""
    if req.locality != "preferred":
        return (waited_at,)
    start = chosen_level(view, req) or waited_at
    present = view.levels()
    return tuple(lv for lv in LEVELS[LEVELS.index(start) :] if lv in present)

"""What a waiting group is told about preemption it cannot start: the budgets that keep the
domains it would free, and the domains held for other groups. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook.groups.extensions.preempt.victims import Choice
from webhook.groups.framework.evictions import Use
from webhook.groups.model.names import GroupKey, Level

SHOWN = 4  # budgets or domains named in one message; the rest are counted


# Here rather than in state.py, which keeps them: the words describe holds, and state.py imports
# the words, so the record lives below both.
@dataclass(frozen=True, slots=True)
class Hold:
    """A domain held for a waiting group (preempt/state.py keeps them)."""

    priority: int
    level: Level
    domain: str
    preempting: bool  # victims were evicted for it: groups of equal priority stay out too


def _names(items: Sequence[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def blocked_words(choice: Choice, level: str) -> str:
    """'' when no budget kept a domain; else which budgets keep which domains (each budget with
    the smallest want among them: what the nearest domain needs of it)."""
    if not choice.refused:
        return ""
    uses: dict[tuple[str, str], Use] = {}
    domains: list[str] = []
    for r in choice.refused:
        domains.append(r.domain)
        for u in r.budgets:
            had = uses.get((u.namespace, u.name))
            if had is None or (u.wanted, u.shared) < (had.wanted, had.shared):
                uses[(u.namespace, u.name)] = u
    said = [u.words() for _, u in sorted(uses.items())]
    return (
        f"; no {level} can be freed without breaking a PodDisruptionBudget: "
        f"{_names(said)} keep victims in {level} {_names(domains)}; nothing evicted"
    )


def held_words(masked: Sequence[tuple[GroupKey, Hold]]) -> str:
    """'' when no domain was held from the group; else the held domains and their groups."""
    if not masked:
        return ""
    said = [
        f"{h.level} {h.domain} for {k[0]}/{k[1]} (priority {h.priority})"
        for k, h in sorted(masked, key=lambda kh: (-kh[1].priority, kh[0]))
    ]
    return f"; held for other groups: {_names(said)}"

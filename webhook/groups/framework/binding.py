"""Which groups are partly bound: some ungated members bound by kube-scheduler, others not,
past a stated time (PARTLY_BOUND_AFTER). Pure: the placer's records in, verdicts out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from webhook.groups.model.records import PodRecord

# How long ungated members may stay unbound while others of their group are bound before the
# placer calls the group partly bound (Event GroupPartlyBound; deleted when a controller
# recreates them). kube-scheduler retries an unschedulable pod within its podMaxBackoff (10 s)
# after a cluster event; 60 s is several retries, and short against the hours a gang holds nodes.
PARTLY_BOUND_AFTER: Final = 60.0


@dataclass(frozen=True, slots=True)
class Binding:
    """A group's ungated members: bound ones and the ones kube-scheduler has not bound yet;
    and how many members are still gated (replacements the placer has not seated yet)."""

    size: int
    bound: tuple[PodRecord, ...]
    unbound: tuple[PodRecord, ...]
    gated: int = 0

    @property
    def missing(self) -> int:
        """Members gated or not made again yet."""
        return max(0, self.size - len(self.bound) - len(self.unbound))

    @property
    def partly(self) -> bool:
        return bool(self.bound) and bool(self.unbound)

    @property
    def preempting(self) -> bool:
        """kube-scheduler keeps room for an unbound member (status.nominatedNodeName): it is
        evicting victims for it, so the member is on its way, not stuck."""
        return any(r.nominated for r in self.unbound)


def binding(recs: Sequence[PodRecord]) -> Binding:
    ungated = [r for r in recs if r.member and not r.gated and r.group is not None]
    size = next((r.group.size for r in recs if r.group is not None), 0)
    return Binding(
        size,
        tuple(r for r in ungated if r.node),
        tuple(sorted((r for r in ungated if not r.node), key=lambda r: r.name)),
        sum(1 for r in recs if r.member and r.gated),
    )


def partly_words(
    group: str, b: Binding, rec: PodRecord, waited: float, after: float, deleted: bool
) -> str:
    """GroupPartlyBound's message on one unbound member."""
    said = f'"{rec.unschedulable}"' if rec.unschedulable else "no PodScheduled message yet"
    text = (
        f"group {group}: {len(b.bound)} of {b.size} members bound, this one still not "
        f"{waited:.0f} s after the group was ungated (bound: {after:.0f} s); kube-scheduler: {said}"
    )
    if deleted and rec.owner is not None:
        return (
            f"{text}; deleted: its controller {rec.owner[1]} {rec.owner[2]} makes it again, gated, "
            f"and the placer seats it again in {rec.placement or 'the group domain'}"
        )
    return (
        f"{text}; a bare pod (no controller would make it again): not deleted, the group holds "
        f"{len(b.bound)} nodes and runs nothing; delete it or the group"
    )


def released_words(group: str, b: Binding, rec: PodRecord, waited: float) -> str:
    """GroupPartlyBound's message on a bound member evicted to release its gang whole."""
    return (
        f"group {group}: its {b.missing} evicted member(s) found no room again in "
        f"{rec.placement or 'the group domain'} {waited:.0f} s after the unbound ones were "
        f"evicted; released whole so the placer places it again: evicted, its controller "
        f"{rec.owner[1] if rec.owner else ''} {rec.owner[2] if rec.owner else ''} makes it again"
    )

"""Free capacity per domain, kept up to date node by node, so a decision reads domains, not nodes.

A Tally covers a set of usable nodes (all of them, or those a pod shape's constraints admit). Per
level and domain it keeps how many of its nodes have each amount of free GPUs (nodes with none
left out) and their free GPUs summed; and how many have each amount of allocatable GPUs, summed
too (what the domain holds when empty). A node's change touches one entry per level it is
labelled with; every question a decision asks of a domain (free GPUs, free GPUs on nodes with
room for the smallest pod, whole-pod slots) is a sum over a handful of distinct amounts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.groups.model.names import LEVELS

Counts = dict[int, int]  # GPU amount -> nodes with exactly that many


def _bump(table: dict[str, Counts], domain: str, amount: int, by: int) -> None:
    counts = table.get(domain)
    if counts is None:
        counts = table[domain] = {}
    left = counts.get(amount, 0) + by
    if left:
        counts[amount] = left
    else:
        del counts[amount]
        if not counts:
            del table[domain]


class Tally:
    def __init__(self) -> None:
        self.free: list[dict[str, Counts]] = [{} for _ in LEVELS]  # nodes by free GPUs (> 0)
        self.sums: list[dict[str, int]] = [{} for _ in LEVELS]  # free GPUs per domain
        self.alloc: list[dict[str, Counts]] = [{} for _ in LEVELS]  # nodes by allocatable GPUs
        self.size: list[dict[str, int]] = [{} for _ in LEVELS]  # allocatable GPUs per domain
        self.version = 0  # bumps at every change: what `most_free` answered holds until then
        self._most: tuple[tuple[int, int], dict[int, str | None]] = ((-1, -1), {})

    def add(self, where: Sequence[str | None], free: int, gpus: int, by: int = 1) -> None:
        """Count a usable node in (by=1) or out (by=-1) of every domain it is in."""
        self.version += 1
        for i, domain in enumerate(where):
            if domain is None:
                continue
            _bump(self.alloc[i], domain, gpus, by)
            size = self.size[i]
            if domain in self.alloc[i]:
                size[domain] = size.get(domain, 0) + by * gpus
            else:
                size.pop(domain, None)
            if free > 0:
                _bump(self.free[i], domain, free, by)
                sums = self.sums[i]
                left = sums.get(domain, 0) + by * free
                if left:
                    sums[domain] = left
                else:
                    del sums[domain]

    def move(self, where: Sequence[str | None], was: int, now: int) -> None:
        """A node's free GPUs went from `was` to `now` (pods came or went)."""
        self.version += 1
        for i, domain in enumerate(where):
            if domain is None:
                continue
            if was > 0:
                _bump(self.free[i], domain, was, -1)
            if now > 0:
                _bump(self.free[i], domain, now, 1)
            sums = self.sums[i]
            left = sums.get(domain, 0) + now - was
            if left:
                sums[domain] = left
            else:
                sums.pop(domain, None)

    def most_free(self, level: int, order: Mapping[str, int], generation: int) -> str | None:
        """The domain of the level (its index in LEVELS) with the most free GPUs, the first in
        fabric order (`order`) among equals. Kept until the tally changes or the fabric does
        (`generation`): the groups that wait after one event share one pass over the domains
        (4 ms a group at 65,536 nodes, for every waiting group at each event that frees room)."""
        key = (self.version, generation)
        if self._most[0] != key:
            self._most = (key, {})
        found = self._most[1]
        if level not in found:
            sums = self.sums[level]
            found[level] = min(sums, key=lambda d: (-sums[d], order.get(d, 0)), default=None)
        return found[level]


def free_for(counts: Mapping[int, int], smallest: int) -> int:
    """Free GPUs on the nodes that have room for a pod of `smallest` GPUs."""
    return sum(f * c for f, c in counts.items() if f >= smallest)


def slots(counts: Mapping[int, int], per: int, one: bool = False) -> int:
    """Pods of `per` GPUs the nodes take, each whole on one node (0 for `per` 0); `one`: at most
    one pod a node (a group with an IMEX channel)."""
    if per <= 0:
        return 0
    if one:
        return sum(c for f, c in counts.items() if f >= per)
    return sum((f // per) * c for f, c in counts.items())

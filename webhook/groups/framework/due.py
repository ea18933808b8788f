"""Keys by the time they come due, so a periodic look takes only those whose time came instead
of going over every key it follows (a tick at 65,536 nodes followed thousands of groups)."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Due(Generic[K]):
    """A heap of (when, key). A key set again keeps its earlier entry: the caller checks, for
    each key `until` gives, that its own time really came (the earlier entry is then stale)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._n = 0  # ties in time keep insertion order; keys need not be comparable

    def at(self, when: float, key: K) -> None:
        self._n += 1
        heapq.heappush(self._heap, (when, self._n, key))

    def until(self, now: float) -> set[K]:
        """The keys with an entry due at or before `now`, taken off the heap."""
        came: set[K] = set()
        while self._heap and self._heap[0][0] <= now:
            came.add(heapq.heappop(self._heap)[2])
        return came

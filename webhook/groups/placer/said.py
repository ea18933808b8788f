"""What the placer tells a waiting group's pods: an Event when the words for one reason changed,
at most once per EVENT_EVERY seconds per reason (capacity numbers move with every pod)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.groups.model.names import GroupKey

EVENT_EVERY = 30.0  # seconds between two waiting Events of one group for one reason
Event = Callable[[Mapping[str, Any], str, str, str], None]  # (pod, reason, message, type)


class Said:
    def __init__(self, event: Event, clock: Callable[[], float]) -> None:
        self.event, self.clock = event, clock
        self._last: dict[tuple[GroupKey, str], tuple[str, float]] = {}  # words, when

    def tell(
        self, key: GroupKey, pods: Iterable[Mapping[str, Any]], reason: str, message: str, kind: str
    ) -> None:
        said = self._last.get((key, reason))
        now = self.clock()
        if said is not None and (said[0] == message or now - said[1] < EVENT_EVERY):
            return
        self._last[(key, reason)] = (message, now)
        for pod in pods:
            self.event(pod, reason, message, kind)

    def forget(self, key: GroupKey) -> None:
        """The group is gone: its next namesake starts afresh."""
        self._last = {k: v for k, v in self._last.items() if k[0] != key}

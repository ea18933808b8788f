"""What the placer tells a waiting group's pods: an Event when the words for one reason changed,
at most once per EVENT_EVERY seconds per reason (capacity numbers move with every pod). A group
still waiting for its members is told so only once it has waited INCOMPLETE_AFTER seconds."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.model.names import GroupKey

EVENT_EVERY = 30.0  # seconds between two waiting Events of one group for one reason
# Why later: every group of a burst waits for its members a moment (its pods are created one
# after another), and an Event each was a write beside the burst's creates, patches and binds on
# a busy API server (bench/bind_bench.py) that no one reads once the group is placed
INCOMPLETE_AFTER = 5.0
Event = Callable[[Mapping[str, Any], str, str, str], None]  # (pod, reason, message, type)


@dataclass(frozen=True, slots=True)
class _Later:
    at: float  # told then, if still so
    pods: tuple[Mapping[str, Any], ...]
    reason: str
    message: str
    kind: str


class Said:
    def __init__(self, event: Event, clock: Callable[[], float]) -> None:
        self.event, self.clock = event, clock
        self._last: dict[tuple[GroupKey, str], tuple[str, float]] = {}  # words, when
        # in the order they are due (one delay for all): `due` stops at the first not due
        self._later: dict[GroupKey, _Later] = {}

    def tell(
        self, key: GroupKey, pods: Iterable[Mapping[str, Any]], reason: str, message: str, kind: str
    ) -> None:
        self._later.pop(key, None)  # the group waits for something else now
        said = self._last.get((key, reason))
        now = self.clock()
        if said is not None and (said[0] == message or now - said[1] < EVENT_EVERY):
            return
        self._last[(key, reason)] = (message, now)
        for pod in pods:
            self.event(pod, reason, message, kind)

    def tell_later(
        self, key: GroupKey, pods: Iterable[Mapping[str, Any]], reason: str, message: str, kind: str
    ) -> None:
        """Told by `due` once INCOMPLETE_AFTER seconds have passed since the first such call,
        in the words of the last, unless `tell` or `settled` came between."""
        was = self._later.get(key)
        at = was.at if was is not None else self.clock() + INCOMPLETE_AFTER
        self._later[key] = _Later(at, tuple(pods), reason, message, kind)  # keeps its place

    def due(self) -> None:
        """What `tell_later` held back and is due now, told (at each reconcile)."""
        now = self.clock()
        while self._later:  # the first is the next due: no pass over the rest
            key, later = next(iter(self._later.items()))
            if later.at > now:
                return
            del self._later[key]
            self.tell(key, later.pods, later.reason, later.message, later.kind)

    def settled(self, key: GroupKey) -> None:
        """The group is placed: nothing it waited for is told any more."""
        self._later.pop(key, None)

    def forget(self, key: GroupKey) -> None:
        """The group is gone: its next namesake starts afresh."""
        self._last = {k: v for k, v in self._last.items() if k[0] != key}
        self._later.pop(key, None)

"""Writes the API server refuses: never silent, and tried again only after a growing wait.

A refused write (any 4xx: 403 RBAC, 404 gone, 422 from a ValidatingAdmissionPolicy or a failed
`test` op) leaves the group gated, so an operator must learn why from the placer itself: one log
line and one Event with the API server's own message (once per distinct refusal, not once per
retry), the group's waiting message, and a counter. The group is then tried again after 5 s,
10 s, 20 s ... up to 5 minutes (the periodic retry would otherwise send the same refused write
every few seconds for good); a write that succeeds, or the group's end, clears it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from webhook.groups.model.names import GroupKey

log = logging.getLogger(__name__)
FIRST = 5.0  # seconds before the first retry
LONGEST = 300.0  # the wait stops doubling here
Event = Callable[[Mapping[str, Any], str, str, str], None]  # (pod, reason, message, type)


class Rejected(Exception):
    """The API server refused a write: `write` names it for the metric ("pods/patch"), `what`
    for people ("patch of pod team-a/w-0"), `code` is the HTTP status, `message` the API's own
    words (its Status message and causes); `pod` the pod's name where it was a pod's."""

    def __init__(self, write: str, what: str, code: int, message: str, pod: str = "") -> None:
        super().__init__(f"{what}: HTTP {code}: {message}")
        self.write, self.what, self.code, self.message, self.pod = write, what, code, message, pod


class RefusalMetrics(Protocol):
    def refused(self, write: str, code: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    failures: int  # refusals in a row
    until: float  # not tried again before this (the placer's clock)
    said: str  # the refusal last logged and told in an Event


def wait_after(failures: int) -> float:
    return min(LONGEST, FIRST * float(2 ** min(failures - 1, 16)))


class Refusals:
    """The groups whose last write was refused, and when each is tried again."""

    def __init__(
        self, event: Event, clock: Callable[[], float], metrics: RefusalMetrics | None = None
    ) -> None:
        self.event, self.clock, self.metrics = event, clock, metrics
        self.backoff: dict[GroupKey, Backoff] = {}

    def due(self, key: GroupKey) -> bool:
        b = self.backoff.get(key)
        return b is None or self.clock() >= b.until

    def refused(self, key: GroupKey, err: Rejected, pods: Sequence[Mapping[str, Any]]) -> str:
        """Count, log and tell (on the refused pod, else the group's first gated one) a
        refusal; what the group's waiting message says."""
        if self.metrics:
            self.metrics.refused(err.write, err.code)
        words = f"the API server refused the {err.what} (HTTP {err.code}): {err.message}"
        if err.write == "pods/patch-dry-run":  # asked before a preemption: it stopped there
            words += "; no pod is evicted for a placement it refuses"
        was = self.backoff.get(key)
        failures = was.failures + 1 if was is not None else 1
        wait = wait_after(failures)
        if was is None or was.said != words:
            log.warning(
                "write refused",
                extra={
                    "group": f"{key[0]}/{key[1]}",
                    "write": err.what,
                    "code": err.code,
                    "why": err.message,
                },
            )
            target = next((p for p in pods if p["metadata"].get("name") == err.pod), None)
            if target is None and pods:
                target = pods[0]
            if target is not None:
                self.event(target, "GroupWriteRefused", f"group {key[1]}: {words}", "Warning")
        self.backoff[key] = Backoff(failures, self.clock() + wait, words)
        again = f"refused {failures} time(s) in a row, tried again in {wait:.0f}s"
        return f"group {key[1]}: {words}; {again}"

    def failed(self, key: GroupKey) -> None:
        """A write that got no answer (a timeout, a 5xx): logged where it failed; only waits."""
        was = self.backoff.get(key)
        failures = was.failures + 1 if was is not None else 1
        said = was.said if was is not None else ""
        self.backoff[key] = Backoff(failures, self.clock() + wait_after(failures), said)

    def cleared(self, key: GroupKey) -> None:
        self.backoff.pop(key, None)

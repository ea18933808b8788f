"""Lease-based leader election as a small state machine: one `tick()` per round, clock and Lease
API injected, so tests drive it with a fake clock and a flaky fake server.

Safety, in the order the replicas see time (durations are measured on the local monotonic clock;
the Lease's renewTime is informational, so wall-clock skew between replicas cannot matter):
- A renewal that succeeds is counted from the moment this round STARTED (before the server
  committed it).
- Another replica may take the Lease only after it has seen the same record unchanged for the
  full lease duration, counted from when its read RETURNED (after the commit). So the earliest
  takeover is `last renewal start + lease_duration`.
- The leader stops its work when `renew_deadline` has passed since its last renewal start, and
  every request it makes is cut off at that deadline. It therefore has `lease_duration -
  renew_deadline` seconds for the work to wind down before anybody else could lead.
Within one replica the work is started only after the previous copy has returned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from webhook.leader.lease import Conflict, Lease, LeaseApi, LeaseError, micro_time
from webhook.leader.worker import Work, Worker

log = logging.getLogger(__name__)


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> datetime: ...


class SystemClock:
    def monotonic(self) -> float:
        import time

        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Timing:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")

    @property
    def wind_down(self) -> float:
        """How long stopped work may take before another replica could take the Lease."""
        return self.lease_duration - self.renew_deadline


class Elector:
    """Campaign for Lease `role` as `identity`; run `work(stop)` while leading, never twice."""

    def __init__(
        self,
        role: str,
        identity: str,
        api: LeaseApi,
        work: Work,
        *,
        clock: Clock | None = None,
        timing: Timing = Timing(),
        on_change: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        self.role, self.identity, self.api, self.work = role, identity, api, work
        self.clock = clock or SystemClock()
        self.timing = timing
        self.on_change = on_change
        self.leading = False
        self.renewed_at = 0.0  # start of the round of our last successful acquire/renew
        self.observed: Lease | None = None  # last record read, and when the read returned
        self.observed_at = 0.0
        self.worker: Worker | None = None
        self.failures = 0
        self.attempt: tuple[str, float] | None = None  # renewTime of our last write, its round

    # -- one round ---------------------------------------------------------------------------
    def tick(self) -> float:
        """One round: acquire or renew, start/stop the work. Returns seconds until the next."""
        t = self.timing
        now = self.clock.monotonic()
        if self.leading and now - self.renewed_at >= t.renew_deadline:
            self._step_down("could not renew the Lease within the renew deadline")
        budget = self.renewed_at + t.renew_deadline - now if self.leading else t.retry_period
        outcome = self._acquire_or_renew(now, min(t.retry_period, budget))
        if outcome == "held":
            self.failures = 0
            self.renewed_at = now
            if not self.leading:
                self.leading = True
                log.info("became leader", extra={"role": self.role, "identity": self.identity})
                self.on_change(True)
            if self.worker is None or not self.worker.alive:
                if self.worker is not None:
                    log.warning("leader work ended; starting it again", extra={"role": self.role})
                self.worker = Worker(self.role, self.work)
        elif outcome == "lost" and self.leading:
            self._step_down("another replica holds the Lease")
        return self._next_delay(outcome)

    def _acquire_or_renew(self, now: float, timeout: float) -> str:
        """'held' when we hold the Lease after this round, 'lost' when somebody else does,
        'waiting' while another's lease is fresh, 'conflict' when another wrote first,
        'failed' when the API did not answer."""
        if timeout <= 0:
            return "failed"
        try:
            current = self.api.get(self.role, timeout)
        except LeaseError as err:
            return self._failed("read", err)
        after = self.clock.monotonic()
        stamp = self.clock.wall()
        # A write whose answer was lost may still have landed: its renewTime is ours alone.
        sent = self.attempt
        ours = current is not None and current.holder == self.identity
        if sent is not None and ours and current is not None and current.renew_time == sent[0]:
            self.renewed_at = max(self.renewed_at, sent[1])
        self.attempt = None
        if current is None:
            fresh = Lease.new(self.role, self.identity, int(self.timing.lease_duration), stamp)
            return self._write(self.api.create, fresh, now, timeout - (after - now))
        if current != self.observed:
            self.observed, self.observed_at = current, after
        if current.holder and current.holder != self.identity:
            if self.leading:
                return "lost"
            duration = current.duration_s or self.timing.lease_duration
            if after < self.observed_at + duration:
                return "waiting"
        taken = current.taken_by(self.identity, int(self.timing.lease_duration), stamp)
        return self._write(self.api.replace, taken, now, timeout - (after - now))

    def _write(
        self, call: Callable[[Lease, float], Lease], lease: Lease, start: float, timeout: float
    ) -> str:
        if timeout <= 0:
            return "failed"
        self.attempt = (lease.renew_time, start)
        try:
            self.observed = call(lease, timeout)
        except Conflict:
            return "conflict"  # somebody wrote first; read again next round
        except LeaseError as err:
            return self._failed("write", err)
        self.observed_at = self.clock.monotonic()
        return "held"

    def _failed(self, what: str, err: Exception) -> str:
        self.failures += 1
        if self.failures == 1 or self.failures % 30 == 0:
            log.warning(
                "lease request failed",
                extra={"role": self.role, "op": what, "error": str(err), "failures": self.failures},
            )
        return "failed"

    def _next_delay(self, outcome: str) -> float:
        t, now = self.timing, self.clock.monotonic()
        if self.leading:
            # Wake at the renew deadline at the latest, so stepping down is never late.
            return max(0.0, min(t.retry_period, self.renewed_at + t.renew_deadline - now))
        if outcome == "waiting" and self.observed is not None:
            # Wake when the other holder's lease runs out, not up to a retry period later.
            duration = self.observed.duration_s or t.lease_duration
            return max(0.0, min(t.retry_period, self.observed_at + duration - now))
        return t.retry_period

    def _step_down(self, why: str) -> None:
        self.leading = False
        log.warning("stopped leading", extra={"role": self.role, "reason": why})
        self._stop_work()
        self.on_change(False)

    def _stop_work(self) -> None:
        if self.worker is not None:
            self.worker.stop(self.timing.wind_down)
            self.worker = None

    # -- lifetime ------------------------------------------------------------------------------
    def release(self) -> None:
        """Stop the work, then hand the Lease back so another replica takes over at once."""
        was_leading = self.leading
        self.leading = False
        self._stop_work()
        if not was_leading:
            return
        self.on_change(False)
        try:
            current = self.api.get(self.role, self.timing.retry_period)
            if current is not None and current.holder == self.identity:
                stamp = micro_time(self.clock.wall())
                released = replace(current, holder="", duration_s=1, renew_time=stamp)
                self.api.replace(released, self.timing.retry_period)
                log.info("released the Lease", extra={"role": self.role})
        except LeaseError as err:
            log.warning("could not release the Lease", extra={"role": self.role, "error": str(err)})

    def run(self, stop: threading.Event) -> None:
        """Campaign until `stop`; then release."""
        try:
            while not stop.is_set():
                stop.wait(self.tick())
        finally:
            self.release()

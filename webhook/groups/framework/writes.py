"""The placer's writes of one reconcile, made together at its end.

Why: on a real control plane each write is a round trip (10-50 ms on a busy API server). Made one
after another, a burst of 19 gangs (128 members) kept its last gang gated for seconds behind the
others' patches (docs/benchmarks.md, bench/bind_bench.py). So a decision only records what to
write (its members count as promised at once, so the next group is decided around them), and
`flush` hands the whole batch to a runner: the Kubernetes one (groups/placer/kube.py) starts them
concurrently on a bounded pool and returns at once, each answer coming back through the placer's
inbox (`start` and `post`), so a group completed while a batch is in flight is decided without
waiting for its answers; the default runner makes them one after another (tests, simulations).
Each write's `done` runs on the placer's own thread, with the call's result or its exception, so
the placer's state still has one writer and needs no locks.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from webhook.groups.model.records import PodRecord


class NotWritten(Exception):
    """A write not made: the placer was stopping (the next leader decides again)."""


Call = Callable[[], object]
# The runner: every call's result or the Exception it raised, in order. `stopping()` true: calls
# not started yet are not made (they answer NotWritten), so a demoted leader stops within its
# renew deadline (webhook/leader).
Runner = Callable[[Sequence[Call], Callable[[], bool]], list[object]]
# The runner that does not wait: starts every call and returns; each call's index and result (or
# the Exception it raised) go to `answer`, from the writer's thread, in any order.
Starter = Callable[[Sequence[Call], Callable[[], bool], Callable[[int, object], None]], None]


@dataclass(frozen=True, slots=True)
class Write:
    call: Call
    done: Callable[[object], None]  # with the result, or the Exception; on the placer's thread


def one_by_one(calls: Sequence[Call], stopping: Callable[[], bool]) -> list[object]:
    """The default runner: each call in turn (an Exception is its answer; a BaseException such
    as a test's simulated crash goes through)."""
    out: list[object] = []
    for call in calls:
        if stopping():
            out.append(NotWritten("the placer is stopping"))
            continue
        try:
            out.append(call())
        except Exception as err:  # noqa: BLE001 - handed to the write's done
            out.append(err)
    return out


@dataclass(frozen=True, slots=True)
class Placed:
    """A member being placed: as it was before (restored if its patch is refused), and what
    to tell once it is written."""

    rec: PodRecord
    promised: tuple[str, int] | None  # its room before (a seat written earlier)
    text: str  # GroupPlaced
    moved: str  # GroupRankMoved, if any
    recovery: bool


class Writes:
    """The batch of one reconcile, and the members it ungated that the watch has not shown
    without their gate yet."""

    def __init__(self, runner: Runner = one_by_one) -> None:
        self.runner = runner
        # Both set (groups/kube.py): a batch is started and not waited for, each answer handed
        # to `post`, which runs it on the placer's thread (its inbox)
        self.start: Starter | None = None
        self.post: Callable[[Callable[[], None]], None] | None = None
        self._pending: list[Write] = []
        self._unseen: dict[str, PodRecord] = {}

    def written(self, rec: PodRecord) -> None:
        """`rec` (ungated, placed) is written, or its write is on its way: events that still
        show its gate are older than the patch."""
        self._unseen[rec.uid] = rec

    def as_seen(self, rec: PodRecord) -> PodRecord:
        """The record to keep for a pod event. An event can be older than our patch (the
        scheduler's status write on the gated pod arrives after the patch's answer): it does
        not put back the gate, or the member would be seated a second time."""
        done = self._unseen.get(rec.uid)
        if done is None:
            return rec
        if not rec.gated:
            del self._unseen[rec.uid]
            return rec
        return replace(rec, gated=False, placement=done.placement, rank=done.rank)

    def forget(self, uid: str) -> None:
        self._unseen.pop(uid, None)

    def add(self, call: Call, done: Callable[[object], None]) -> None:
        self._pending.append(Write(call, done))

    def flush(self, stopping: Callable[[], bool]) -> None:
        """Start the batch. A write's `done` may add the next writes (a group's patches once its
        nominations are answered): the starter's answers come through the inbox, whose next
        reconcile flushes them; the runner's come here, so it runs until none is added."""
        if self.start is not None and self.post is not None:
            pending, self._pending = self._pending, []
            if pending:
                post = self.post
                self.start(
                    [w.call for w in pending],
                    stopping,
                    lambda i, result: post(partial(pending[i].done, result)),
                )
            return
        while self._pending:
            pending, self._pending = self._pending, []
            results = self.runner([w.call for w in pending], stopping)
            for w, result in zip(pending, results, strict=True):
                w.done(result)


class Quiet:
    """When a placed member's Events may go out: once no patch is in flight and none ended for
    `after` seconds, or `longest` seconds after the Event was told, whichever is first.

    Why: a burst's Events (GroupPlaced, one a member) are as many API writes as its patches,
    and on a busy API server they queued beside the creates, patches and binds the burst waits
    for (bench/bind_bench.py). Told a moment later they cost the same and delay nothing. The
    bound keeps them coming in a cluster that is never quiet."""

    def __init__(
        self,
        after: float = 0.3,
        longest: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.after, self.longest, self.clock, self.sleep = after, longest, clock, sleep
        self._lock = threading.Lock()
        self._busy = 0
        self._ended = -math.inf

    def begin(self) -> None:
        with self._lock:
            self._busy += 1

    def end(self) -> None:
        with self._lock:
            self._busy -= 1
            self._ended = self.clock()

    def wait(self, told: float) -> None:
        """Return once quiet, or `longest` after `told` (a clock() reading)."""
        while True:
            now = self.clock()
            with self._lock:
                quiet_at = math.inf if self._busy else self._ended + self.after
            until = min(quiet_at, told + self.longest)
            if now >= until:
                return
            self.sleep(min(until - now, 0.05))

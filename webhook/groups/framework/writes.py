"""The placer's writes of one reconcile, made together at its end.

Why: on a real control plane each write is a round trip (10-50 ms on a busy API server). Made one
after another, a burst of 19 gangs (128 members) kept its last gang gated for seconds behind the
others' patches (docs/benchmarks.md, bench/bind_bench.py). So a decision only records what to
write (its members count as promised at once, so the next group is decided around them), and
`flush` hands the whole batch to a runner: the Kubernetes one (groups/placer/kube.py) makes them
concurrently on a bounded pool, the default one after one another (tests, simulations). Each
write's `done` then runs on the placer's own thread, with the call's result or its exception,
so the placer's state still has one writer and needs no locks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from webhook.groups.model.records import PodRecord


class NotWritten(Exception):
    """A write not made: the placer was stopping (the next leader decides again)."""


Call = Callable[[], object]
# The runner: every call's result or the Exception it raised, in order. `stopping()` true: calls
# not started yet are not made (they answer NotWritten), so a demoted leader stops within its
# renew deadline (webhook/leader).
Runner = Callable[[Sequence[Call], Callable[[], bool]], list[object]]


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
        self._pending: list[Write] = []
        self._unseen: dict[str, PodRecord] = {}

    def written(self, rec: PodRecord) -> None:
        """`rec` (ungated, placed) is written."""
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
        pending, self._pending = self._pending, []
        if not pending:
            return
        results = self.runner([w.call for w in pending], stopping)
        for w, result in zip(pending, results, strict=True):
            w.done(result)

"""Replicas campaigning for one Lease on a shared fake clock, ticked in time order.

Each replica records when it led: from `on_change(True)` to `on_change(False)` (which the
elector calls only after its work has returned) or until it is killed. Intervals of different
replicas must never overlap; work copies inside one replica are counted separately.
"""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import dataclass, field

from tests.webhook.lease_fakes import FakeClock, LeaseServer, Network
from webhook.leader import Elector, Timing


@dataclass
class Replica:
    name: str
    clock: FakeClock
    net: Network
    stop_delay: float = 0.0  # fake seconds the work takes to wind down once told to stop
    next_at: float = 0.0
    alive: bool = True
    intervals: list[list[float]] = field(default_factory=list)
    running: int = 0
    max_running: int = 0
    starts: int = 0
    elector: Elector = field(init=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.elector = Elector(
            "gpufabric-labeler",
            self.name,
            self.net,
            self.work,
            clock=self.clock,
            timing=Timing(),
            on_change=self.changed,
        )

    def work(self, stop: threading.Event) -> None:
        with self._lock:
            self.running += 1
            self.starts += 1
            self.max_running = max(self.max_running, self.running)
        stop.wait()
        if self.alive:
            self.clock.advance(self.stop_delay)  # the elector is blocked joining us meanwhile
        with self._lock:
            self.running -= 1

    def changed(self, leading: bool) -> None:
        if leading:
            self.intervals.append([self.clock.monotonic(), float("inf")])
        else:
            self.intervals[-1][1] = self.clock.monotonic()

    def kill(self) -> None:
        """The process dies: no release, its work ends with it."""
        self.alive = False
        if self.elector.leading:
            self.intervals[-1][1] = self.clock.monotonic()
        if self.elector.worker is not None:
            self.elector.worker.stop_event.set()
            self.elector.worker = None


@dataclass
class Cluster:
    clock: FakeClock = field(default_factory=FakeClock)
    server: LeaseServer = field(default_factory=LeaseServer)
    replicas: list[Replica] = field(default_factory=list)

    def add(self, name: str, *, seed: int = 0, stop_delay: float = 0.0, **faults: float) -> Replica:
        net = Network(self.server, self.clock, random.Random(seed), **faults)  # type: ignore[arg-type]
        r = Replica(name, self.clock, net, stop_delay, next_at=self.clock.monotonic())
        self.replicas.append(r)
        return r

    def run_until(self, t_end: float) -> None:
        while True:
            live = [r for r in self.replicas if r.alive]
            if not live:
                self.clock.set(t_end)
                return
            r = min(live, key=lambda x: x.next_at)
            if r.next_at > t_end:
                self.clock.set(t_end)
                return
            self.clock.set(r.next_at)
            delay = r.elector.tick()
            r.next_at = self.clock.monotonic() + max(delay, 0.001)

    def leader(self) -> Replica | None:
        leading = [r for r in self.replicas if r.alive and r.elector.leading]
        assert len(leading) <= 1
        return leading[0] if leading else None

    def assert_one_leader_at_a_time(self) -> None:
        spans = sorted((s, e, r.name) for r in self.replicas for s, e in r.intervals)
        for (s1, e1, n1), (s2, _, n2) in itertools.pairwise(spans):
            assert s2 >= e1, f"{n1} led {s1:.3f}-{e1:.3f} and {n2} from {s2:.3f}"
        for r in self.replicas:
            assert r.max_running <= 1, f"{r.name} ran {r.max_running} copies of the work"

    def shutdown(self) -> None:
        for r in self.replicas:
            if r.alive:
                r.elector.release()
                r.alive = False

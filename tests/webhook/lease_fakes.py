"""A fake Lease endpoint that answers like kube-apiserver 1.36 did in the captured exchanges
(tests/fixtures/k8s-wire/leases/01..06), a fake clock, and a flaky network in between.

Server rules taken from the capture: GET of a missing Lease is 404; POST of an existing one 409
AlreadyExists; PUT with a stale resourceVersion 409 Conflict; every write bumps the
resourceVersion; a MicroTime without exactly six fractional digits is 400; `+00:00` is stored as `Z`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook.leader.lease import Conflict, Lease, LeaseError

NAMESPACE = "gpufabric-system"
_MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|\+00:00)$")


class FakeClock:
    """Monotonic seconds from 0; wall time starts on a whole second (microsecond == 0)."""

    def __init__(self, start: datetime = datetime(2026, 11, 22, 14, 26, 49, tzinfo=UTC)) -> None:
        self.t = 0.0
        self.start = start

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def set(self, t: float) -> None:
        self.t = max(self.t, t)


class LeaseServer:
    def __init__(self) -> None:
        self.body: dict[str, Any] | None = None
        self.rv = 1893
        self.writes = 0

    def _store(self, body: dict[str, Any]) -> Lease:
        for key in ("acquireTime", "renewTime"):
            value = body["spec"].get(key)
            if value is not None and not _MICRO.match(value):
                raise LeaseError(
                    f'HTTP 400: Lease in version "v1" cannot be handled as a Lease: parsing time '
                    f'"{value}" as "2006-01-02T15:04:05.000000Z07:00"'
                )
            if value is not None:
                body["spec"][key] = value.replace("+00:00", "Z")
        self.rv += 1
        self.writes += 1
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.body = body
        return Lease.from_body(body)

    def get(self, name: str, timeout: float) -> Lease | None:
        return None if self.body is None else Lease.from_body(self.body)

    def create(self, lease: Lease, timeout: float) -> Lease:
        if self.body is not None:
            raise Conflict(f'leases.coordination.k8s.io "{lease.name}" already exists')
        return self._store(lease.to_body(NAMESPACE))

    def replace(self, lease: Lease, timeout: float) -> Lease:
        if self.body is None:
            raise LeaseError(f'HTTP 404: leases.coordination.k8s.io "{lease.name}" not found')
        if lease.resource_version != self.body["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on leases.coordination.k8s.io "{lease.name}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again"
            )
        return self._store(lease.to_body(NAMESPACE))


@dataclass
class Network:
    """One replica's path to the server: down (connection refused), random 500s, writes that
    commit but whose answer is lost, and calls that hang until their timeout."""

    server: LeaseServer
    clock: FakeClock
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    down: bool = False
    p_error: float = 0.0
    p_lost: float = 0.0
    p_hang: float = 0.0
    latency: float = 0.0
    calls: int = 0

    def _before(self, timeout: float) -> None:
        self.calls += 1
        if self.down:
            raise LeaseError("connection refused")
        if self.rng.random() < self.p_hang:
            self.clock.advance(timeout)
            raise LeaseError(f"read timed out (timeout={timeout:.3f})")
        self.clock.advance(min(self.latency, timeout))
        if self.rng.random() < self.p_error:
            raise LeaseError("HTTP 500: etcdserver: request timed out")

    def _after(self) -> None:
        if self.rng.random() < self.p_lost:
            raise LeaseError("connection reset by peer (the write committed)")

    def get(self, name: str, timeout: float) -> Lease | None:
        self._before(timeout)
        return self.server.get(name, timeout)

    def create(self, lease: Lease, timeout: float) -> Lease:
        self._before(timeout)
        out = self.server.create(lease, timeout)
        self._after()
        return out

    def replace(self, lease: Lease, timeout: float) -> Lease:
        self._before(timeout)
        out = self.server.replace(lease, timeout)
        self._after()
        return out

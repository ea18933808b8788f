"""The Lease record the elector reads and writes, its wire form, and the API seam it goes through.

Wire facts (reference/k8s-wire/leases/): times are MicroTime, accepted only with exactly six
fractional digits (`datetime.isoformat()` drops them when microsecond == 0, and the server then
answers 400); a PUT with a stale resourceVersion is 409 Conflict, a POST of an existing Lease 409
AlreadyExists; GET of a missing Lease is 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def micro_time(when: datetime) -> str:
    """Kubernetes MicroTime: UTC, always six fractional digits, `Z`."""
    return when.astimezone(UTC).strftime(_MICRO_TIME)


class LeaseError(Exception):
    """The Lease API could not be reached or refused the request (connection, 5xx, 403, ...)."""


class Conflict(LeaseError):
    """409: somebody else wrote the Lease first (stale resourceVersion, or it already exists)."""


@dataclass(frozen=True, slots=True)
class Lease:
    name: str
    holder: str  # "" when released
    duration_s: int
    acquire_time: str
    renew_time: str
    transitions: int = 0
    resource_version: str = ""

    def to_body(self, namespace: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": namespace}
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        spec: dict[str, Any] = {
            "leaseDurationSeconds": self.duration_s,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }
        if self.holder:
            spec = {"holderIdentity": self.holder, **spec}
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Lease:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(
            name=str(meta.get("name", "")),
            holder=str(spec.get("holderIdentity") or ""),
            duration_s=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @classmethod
    def new(cls, name: str, holder: str, duration_s: int, now: datetime) -> Lease:
        stamp = micro_time(now)
        return cls(name, holder, duration_s, stamp, stamp)

    def taken_by(self, holder: str, duration_s: int, now: datetime) -> Lease:
        """This Lease renewed by `holder` at `now` (a new holder also starts a new term)."""
        stamp = micro_time(now)
        if holder == self.holder:
            return replace(self, duration_s=duration_s, renew_time=stamp)
        return replace(
            self,
            holder=holder,
            duration_s=duration_s,
            acquire_time=stamp,
            renew_time=stamp,
            transitions=self.transitions + 1,
        )


class LeaseApi(Protocol):
    """One namespace's Leases. Every call gives up after `timeout` seconds (raises LeaseError)."""

    def get(self, name: str, timeout: float) -> Lease | None:
        """The Lease, or None when it does not exist (404)."""
        ...

    def create(self, lease: Lease, timeout: float) -> Lease:
        """POST; Conflict when it already exists."""
        ...

    def replace(self, lease: Lease, timeout: float) -> Lease:
        """PUT with lease.resource_version; Conflict when that is stale."""
        ...

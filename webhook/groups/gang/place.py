"""The placer's side of native gangs and of the partly-bound watch.

`ensure` (before a group's gate is lifted): where its members name PodGroup gpufabric-<group>
(the webhook set it: the cluster serves PodGroups), that PodGroup exists, a gang of the group's
size, so kube-scheduler binds the members together or not at all; and the group's clock starts.
`tick` (each reconcile): our PodGroups whose group has no pod left are deleted, and every group
ungated since is watched until all its members are bound. Members still unbound
PARTLY_BOUND_AFTER seconds after the group was ungated while others are bound get Event
GroupPartlyBound with kube-scheduler's message; those with a controller (Job, JobSet, ...) are
deleted, so that it makes them again, gated, and the placer seats them again inside the group's
recorded domain (placer `within`). Bare pods are only reported (nothing would make them again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, runtime_checkable

from webhook.groups.gang.names import PARTLY_BOUND_AFTER, PG_PLURAL, podgroup_name
from webhook.groups.gang.podgroups import Book, Made, pod_group
from webhook.groups.gang.watch import Binding, binding, partly_words, released_words
from webhook.groups.preempt.state import Outcome
from webhook.groups.records import PodRecord, pod_ref
from webhook.groups.writes import Writes

log = logging.getLogger(__name__)
GroupKey = tuple[str, str]
SCAN_EVERY = 10.0  # seconds between looks at every group (those a previous leader ungated)
# After evicting a group's unbound members: how long the placer may say their remade pods wait
# (no room in the group's domain) before the whole gang is released. Long enough for their
# controller to make them again and for the placer to decide; a preemption in the domain that
# takes longer loses to the release, and the gang is placed anew.
RELEASE_AFTER = 15.0
SERVED = f"{PG_PLURAL}.scheduling.k8s.io/v1alpha2"


class GangApi(Protocol):
    def create_podgroup(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The created object (the one there already, when it exists)."""

    def delete_podgroup(self, namespace: str, name: str, uid: str) -> None:
        """Delete it if it is still that object (a precondition on the UID); gone is fine."""

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """The placer's Eviction (preempt/state.py Evictor): a pod goes through the Eviction API,
        so its PodDisruptionBudgets hold; `uid`: only that pod."""

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None: ...


@runtime_checkable
class GangMetrics(Protocol):
    def partly_bound(self, groups: int) -> None: ...

    def all_bound(self, seconds: float) -> None: ...


class Gang:
    def __init__(
        self,
        api: GangApi | None = None,
        metrics: GangMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        after: float = PARTLY_BOUND_AFTER,
    ) -> None:
        self.api, self.metrics, self.clock, self.after = api, metrics, clock, after
        self.book = Book()
        if api is None:
            self.book.unserved()  # no API: nothing is served (tests of plain groups)
        self.since: dict[GroupKey, float] = {}  # last ungating of a group not all bound yet
        self.partly: set[GroupKey] = set()  # partly bound past the bound, at the last tick
        self.told: set[str] = set()  # members reported (and deleted where they come back)
        self.recovering: dict[GroupKey, float] = {}  # groups whose unbound members we evicted
        self._scan_at = 0.0
        self._asked: set[tuple[str, str]] = set()  # PodGroups asked for early, not answered

    # -- before ungating ---------------------------------------------------------------------
    def early(self, key: GroupKey, size: int, recs: Sequence[PodRecord], writes: Writes) -> None:
        """As a group's first members arrive: its PodGroup asked for with the reconcile's other
        writes, so `ensure` finds it made once the group is whole (made there, its round trip
        stood between the last member and the ungating). Its owner: the controller the members
        so far share. A failure is only logged: `ensure` makes it then."""
        name = podgroup_name(key[1])
        where = (key[0], name or "")
        if name is None or self.api is None or not self.book.served or where in self._asked:
            return
        if where in self.book.by_name or not any(r.pod_group == name for r in recs):
            return
        self._asked.add(where)
        body = self._body(key, name, size, recs)
        writes.add(partial(self.api.create_podgroup, key[0], body), partial(self._made, where))

    def _made(self, where: tuple[str, str], result: object) -> None:
        self._asked.discard(where)
        if isinstance(result, Mapping):
            self.book.event("ADDED", result)
        else:
            log.warning("podgroup not made early", extra={"podgroup": where[1], "error": result})

    def _body(
        self, key: GroupKey, name: str, size: int, recs: Sequence[PodRecord]
    ) -> dict[str, Any]:
        owners = {r.owner for r in recs}
        owner = owners.pop() if len(owners) == 1 else None  # only a controller all share
        return pod_group(key[0], name, key[1], size, owner)

    def ensure(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> str | None:
        """Why the group must wait, or None once its PodGroup (where it has one) exists."""
        name = podgroup_name(key[1])
        if name is not None and any(r.pod_group == name for r in recs):
            have = self.book.by_name.get((key[0], name))
            if have is not None and have.deleting:
                return f"PodGroup {name} is being deleted; it is made again after"
            if have is None:
                if not self.book.served or self.api is None:
                    return f"its members name PodGroup {name}; this cluster serves no {SERVED}"
                body = self._body(key, name, size, recs)
                self.book.event("ADDED", self.api.create_podgroup(key[0], body))
        self.since[key] = self.clock()
        return None

    # -- each reconcile ----------------------------------------------------------------------
    def tick(
        self,
        groups: Mapping[GroupKey, set[str]],
        pods: Mapping[str, PodRecord],
        synced: bool,
        waiting: Container[GroupKey] = (),
    ) -> None:
        """`synced`: the pods are listed (a group without pods is truly gone); `waiting`: the
        groups the placer could not seat at its last try."""
        if synced:
            self._sweep(groups)
        now = self.clock()
        keys = set(self.since) | self.recovering.keys()
        if now >= self._scan_at:
            keys |= groups.keys()
            self._scan_at = now + SCAN_EVERY
        partly = set()
        for key in keys:
            b = binding([pods[u] for u in groups.get(key, ()) if u in pods])
            if self._stuck(key, b, now, key in waiting):
                partly.add(key)
            if not b.unbound:
                start = self.since.pop(key, None)
                if start is not None and b.size and len(b.bound) >= b.size and self.metrics:
                    self.metrics.all_bound(now - start)
                continue
            start = self.since.setdefault(key, now)
            if b.partly and now - start >= self.after:
                partly.add(key)
                for rec in b.unbound:
                    self._recover(key, b, rec, now - start)
        if self.metrics is not None and partly != self.partly:
            self.metrics.partly_bound(len(partly))
        self.partly = partly
        self.told = {u for u in self.told if u in pods}  # the few told, not every pod

    def _stuck(self, key: GroupKey, b: Binding, now: float, waits: bool) -> bool:
        """A group whose evicted members came back but cannot be seated in its domain (their
        room went to other pods): once the placer has said so for RELEASE_AFTER seconds (else
        after the same bound as before), its bound members are evicted too, so
        the whole gang comes back and is placed again (all or nothing: none left holding nodes
        for a gang that cannot run). True while it is partly bound that way."""
        start = self.recovering.get(key)
        if start is None:
            return False
        if not b.bound or not b.missing:
            del self.recovering[key]  # placed again, or seated: the watch goes on as usual
            return False
        if now - start < (min(RELEASE_AFTER, self.after) if waits else self.after):
            return True
        del self.recovering[key]
        assert self.api is not None  # noqa: S101 - recovering implies an API
        owned = [rec for rec in b.bound if rec.owner is not None]  # bare pods: nothing remakes
        for rec in owned:  # all go or none: every eviction asked as a dry run first
            outcome, why = self.api.evict_pod(rec.namespace, rec.name, True, rec.uid)
            if outcome == "blocked":  # e.g. a PodDisruptionBudget: asked again after the bound
                log.warning("partly bound gang not released", extra={"pod": rec.name, "why": why})
                self.recovering[key] = now
                return True
        for rec in owned:
            outcome, why = self.api.evict_pod(rec.namespace, rec.name, uid=rec.uid)
            if outcome == "blocked":  # a race the dry run could not see: stop at once
                log.warning("partly bound member not released", extra={"pod": rec.name, "why": why})
                break
            text = released_words(key[1], b, rec, now - start)
            self.api.event(pod_ref(rec), "GroupPartlyBound", text, "Warning")
        return True

    def _recover(self, key: GroupKey, b: Binding, rec: PodRecord, waited: float) -> None:
        if rec.uid in self.told or self.api is None:
            return
        deleted = rec.owner is not None
        if deleted:
            outcome, why = self.api.evict_pod(rec.namespace, rec.name, uid=rec.uid)
            if outcome == "blocked":  # tried again at the next tick
                log.warning("partly bound member not deleted", extra={"pod": rec.name, "why": why})
                return
        text = partly_words(key[1], b, rec, waited, self.after, deleted)
        self.api.event(pod_ref(rec), "GroupPartlyBound", text, "Warning")
        self.told.add(rec.uid)
        if deleted:
            self.recovering.setdefault(key, self.clock())

    def _sweep(self, groups: Mapping[GroupKey, object]) -> None:
        """Delete our PodGroups whose group has no pod left."""
        for m in list(self.book.by_name.values()):
            if (m.namespace, m.group) not in groups and not m.deleting:
                self._delete(m)

    def _delete(self, m: Made) -> None:
        assert self.api is not None  # noqa: S101 - a book with entries implies an API
        try:
            self.api.delete_podgroup(m.namespace, m.name, m.uid)
        except Exception:  # noqa: BLE001 - retried on the next reconcile
            log.warning("podgroup not deleted", extra={"podgroup": f"{m.namespace}/{m.name}"})
            return
        self.book.by_name[(m.namespace, m.name)] = replace(m, deleting=True)

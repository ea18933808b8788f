"""The placer's side of native gangs and of the partly-bound watch.

`ensure` (before a group's gate is lifted): where its members name PodGroup gpufabric-<group>
(the webhook set it: the cluster serves PodGroups), that PodGroup exists in the version the
cluster serves, a gang of the members that name it (all of them, unless some were admitted before
PodGroups were known served: a pod's spec.schedulingGroup never changes, and kube-scheduler counts
only the pods that name the group), so kube-scheduler binds them together or not at all; and the
group's clock starts. The PodGroup is the group's only while it is ours and names the members'
controller by UID (framework/lifecycle.py, as a ComputeDomain): one of an earlier controller is
adopted (made to name this one), as it can neither be made anew nor waited for while the members
name it; a lost one is made again.
`tick` (each reconcile): our PodGroups whose group has no pod left are deleted, and every group
ungated since is watched until all its members are bound. Members still unbound
PARTLY_BOUND_AFTER seconds after the group was ungated while others are bound get Event
GroupPartlyBound with kube-scheduler's message; those with a controller (Job, JobSet, ...) are
deleted, so that it makes them again, gated, and the placer seats them again inside the group's
recorded domain (placer `within`). Bare pods are only reported (nothing would make them again).
A member kube-scheduler is preempting for (status.nominatedNodeName) is not stuck: its group's
clock starts again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container, Mapping, Sequence
from functools import partial
from typing import Any, Protocol, runtime_checkable

from webhook.groups.framework.lifecycle import Lifecycle, OwnedApi
from webhook.groups.framework.owned import shared_owner
from webhook.groups.gang.names import (
    MUTABLE_MIN_COUNT,
    PARTLY_BOUND_AFTER,
    PODGROUPS,
    podgroup_name,
)
from webhook.groups.gang.podgroups import Book, Made, gang_spec, pod_group, too_large
from webhook.groups.gang.watch import Binding, binding, partly_words, released_words
from webhook.groups.names import GroupKey
from webhook.groups.preempt.budgets import Budgets, Ledger, Outcome
from webhook.groups.records import PodRecord, pod_ref
from webhook.groups.writes import Writes

log = logging.getLogger(__name__)
SCAN_EVERY = 10.0  # seconds between looks at every group (those a previous leader ungated)
# After evicting a group's unbound members: how long the placer may say their remade pods wait
# (no room in the group's domain) before the whole gang is released. Long enough for their
# controller to make them again and for the placer to decide; a preemption in the domain that
# takes longer loses to the release, and the gang is placed anew.
RELEASE_AFTER = 15.0


class GangApi(Protocol):
    """The placer's Evictions and Events (groups/kube.py KubePlacerApi)."""

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """The placer's Eviction (preempt/budgets.py Evictor): a pod goes through the Eviction API,
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
        owned: OwnedApi | None = None,
    ) -> None:
        """`owned`: the PodGroups' writes (none: PodGroups are not served)."""
        self.api, self.metrics, self.clock, self.after = api, metrics, clock, after
        self.book = Book()
        self.podgroups = Lifecycle(self.book, owned)  # made, adopted, made again, deleted
        self.since: dict[GroupKey, float] = {}  # last ungating of a group not all bound yet
        self.partly: set[GroupKey] = set()  # partly bound past the bound, at the last tick
        self.told: set[str] = set()  # members reported (and deleted where they come back)
        self.recovering: dict[GroupKey, float] = {}  # groups whose unbound members we evicted
        self._scan_at = 0.0

    # -- before ungating ---------------------------------------------------------------------
    def early(self, key: GroupKey, size: int, recs: Sequence[PodRecord], writes: Writes) -> None:
        """As a group's first members arrive: its PodGroup asked for with the reconcile's other
        writes, so `ensure` finds it made once the group is whole (made there, its round trip
        stood between the last member and the ungating; issue 38). Its owner: the controller the
        members so far share. A failure is only logged: `ensure` makes it then."""
        name = podgroup_name(key[1])
        if name is None or not any(r.pod_group == name for r in recs):
            return
        want = max(1, size - sum(1 for r in recs if r.pod_group != name))
        owner = shared_owner(r.owner for r in recs)
        body = partial(pod_group, key[0], name, key[1], want, owner, self.book.version)
        self.podgroups.early(key[0], name, body, writes.add)

    def ensure(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> str | None:
        """Why the group must wait, or None once its PodGroup (where it has one) exists."""
        why = self._own(key, size, recs)
        if why is None:
            self.since[key] = self.clock()
        return why

    def _own(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> str | None:
        """Make, keep or adopt the PodGroup the members name (a v1beta1 gang larger than they
        can make shrunk to them); why the group waits, if it does. `recs`: its live members."""
        name = podgroup_name(key[1])
        if name is None or not any(r.pod_group == name for r in recs):
            return None
        if self.book.served is None:
            listed = PODGROUPS.resource
            return f"its members name PodGroup {name}; waiting for the first list of {listed}"
        if not self.book.served or self.podgroups.api is None:
            return None  # none served: kube-scheduler gates on no PodGroup, nothing to wait for
        owner = shared_owner(r.owner for r in recs)
        # the members that do not name it never will (spec.schedulingGroup is immutable) and
        # kube-scheduler's PreEnqueue waits for minCount pods that do: the gang is the others
        want = max(1, size - sum(1 for r in recs if r.pod_group != name))
        version = self.book.version

        def fit(have: Made) -> Mapping[str, Any] | str:
            """A gang larger than the members that can join never binds: shrunk where its
            minCount may change, else the group waits and says so."""
            if have.min_count <= want:
                return {}
            if version not in MUTABLE_MIN_COUNT:
                return too_large(name, have.min_count, want)
            return {"spec": gang_spec(want)}

        body = partial(pod_group, key[0], name, key[1], want, owner, version)
        got = self.podgroups.own(key, name, owner, body, fit=fit)
        return got if isinstance(got, str) else None

    # -- each reconcile ----------------------------------------------------------------------
    def tick(
        self,
        groups: Mapping[GroupKey, set[str]],
        pods: Mapping[str, PodRecord],
        synced: bool,
        waiting: Container[GroupKey] = (),
        budgets: Budgets | None = None,
    ) -> None:
        """`synced`: the pods are listed (a group without pods is truly gone); `waiting`: the
        groups the placer could not seat at its last try; `budgets`: the cluster's
        PodDisruptionBudgets (preempt/budgets.py), counted over a whole release."""
        if synced:
            self.podgroups.sweep(groups)  # ours whose group has no pod left: deleted
        now = self.clock()
        keys = set(self.since) | self.recovering.keys()
        if now >= self._scan_at:
            keys |= groups.keys()
            self._scan_at = now + SCAN_EVERY
        partly = set()
        for key in keys:
            recs = [pods[u] for u in groups.get(key, ()) if u in pods]
            b = binding(recs)
            if synced and b.unbound and not any(r.gated for r in recs):
                self._lost(key, b.size, recs)
            if b.preempting:  # kube-scheduler makes room for a member: not stuck, clock anew
                self.since[key] = now
                if key in self.recovering:
                    self.recovering[key] = now
                continue
            if self._stuck(key, b, now, key in waiting, budgets):
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

    def _lost(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> None:
        """Ungated members waiting for a PodGroup that is gone (deleted by hand, or by the
        garbage collector): it is made again (gated ones get it from `ensure`)."""
        name = podgroup_name(key[1])
        if name is not None:
            live = [r for r in recs if r.member]
            self.podgroups.again(key, name, lambda: self._own(key, size, live))

    def _stuck(
        self, key: GroupKey, b: Binding, now: float, waits: bool, budgets: Budgets | None
    ) -> bool:
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
        if not self._release(key, b, now - start, budgets):
            self.recovering[key] = now  # asked again after the bound
        return True

    def _release(self, key: GroupKey, b: Binding, waited: float, budgets: Budgets | None) -> bool:
        """Evict the bound members that a controller makes again, all or none: False, nothing
        evicted, where a PodDisruptionBudget (counted over the whole release, as a preemption
        plan counts them) or a dry run refuses one."""
        assert self.api is not None  # noqa: S101 - recovering implies an API
        owned = [rec for rec in b.bound if rec.owner is not None]  # bare pods: nothing remakes
        ledger = Ledger(budgets)
        if not ledger.take((rec.namespace, rec.name, rec.labels) for rec in owned):
            words = "; ".join(u.words() for u in ledger.blocking())
            log.warning("partly bound gang not released", extra={"group": key[1], "why": words})
            return False
        for rec in owned:  # then every eviction asked as a dry run (what the budgets miss)
            outcome, why = self.api.evict_pod(rec.namespace, rec.name, True, rec.uid)
            if outcome == "blocked":
                log.warning("partly bound gang not released", extra={"pod": rec.name, "why": why})
                return False
        for rec in owned:
            outcome, why = self.api.evict_pod(rec.namespace, rec.name, uid=rec.uid)
            if outcome == "blocked":  # a race neither could see: stop at once
                log.warning("partly bound member not released", extra={"pod": rec.name, "why": why})
                break
            if budgets is not None and outcome == "evicted":
                for bud in budgets.covering(rec.namespace, rec.labels):
                    budgets.spent(bud.key, rec.name)  # until the watch says (as preempt/state.py)
            text = released_words(key[1], b, rec, waited)
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

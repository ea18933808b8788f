"""The partly-bound watch, for every group the placer ungates, native gang or not.

Every group ungated (PreBind starts its clock) is followed until all its members are bound,
looked at when its pods change and when its bound comes (framework/due.py), not at every Tick:
thousands of groups ungated and not yet bound cost a tick nothing. Members still unbound
PARTLY_BOUND_AFTER seconds after the group was ungated while others are bound get Event
GroupPartlyBound with kube-scheduler's message; those with a controller (Job, JobSet, ...) are
deleted, so that it makes them again, gated, and the placer seats them again inside the group's
recorded domain (placer `within`). Bare pods are only reported (nothing would make them again).
A member kube-scheduler is preempting for (status.nominatedNodeName) is not stuck: its group's
clock starts again. A group whose evicted members came back but cannot be seated in its domain
is released whole after RELEASE_AFTER.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from webhook.groups.framework.binding import (
    PARTLY_BOUND_AFTER,
    Binding,
    binding,
    partly_words,
    released_words,
)
from webhook.groups.framework.due import Due
from webhook.groups.framework.evictions import Budgets, Ledger, Outcome
from webhook.groups.framework.points import Cycle, Host
from webhook.groups.model.names import GroupKey
from webhook.groups.model.records import PodRecord, pod_ref

log = logging.getLogger(__name__)
# After evicting a group's unbound members: how long the placer may say their remade pods wait
# (no room in the group's domain) before the whole gang is released. Long enough for their
# controller to make them again and for the placer to decide; a preemption in the domain that
# takes longer loses to the release, and the gang is placed anew.
RELEASE_AFTER = 15.0


class BoundApi(Protocol):
    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """The placer's Eviction (framework/evictions.py Evictor): a pod goes through the Eviction
        API, so its PodDisruptionBudgets hold; `uid`: only that pod."""

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None: ...


@runtime_checkable
class BoundMetrics(Protocol):
    def partly_bound(self, groups: int) -> None: ...

    def all_bound(self, seconds: float) -> None: ...


class PartlyBound:
    def __init__(
        self,
        api: BoundApi | None = None,
        metrics: BoundMetrics | None = None,
        after: float = PARTLY_BOUND_AFTER,
    ) -> None:
        self.api, self.metrics, self.after = api, metrics, after
        self.clock: Callable[[], float] = time.monotonic
        self.host: Host | None = None
        self.since: dict[GroupKey, float] = {}  # last ungating of a group not all bound yet
        self.partly: set[GroupKey] = set()  # partly bound past the bound, as last looked at
        self.told: set[str] = set()  # members reported (and deleted where they come back)
        self.recovering: dict[GroupKey, float] = {}  # groups whose unbound members we evicted
        self.unbound: set[GroupKey] = set()  # none bound past the bound: logged once
        self.due: Due[GroupKey] = Due()  # when each followed group comes past the bound
        self.overdue: set[GroupKey] = set()  # past the bound, a member not told yet: each tick
        self.preempting: set[GroupKey] = set()  # kube-scheduler makes room: each tick
        self.again: set[GroupKey] = set()  # followed groups a Pod list may have taken away

    def attach(self, host: Host) -> None:
        self.host, self.clock = host, host.clock

    def relisting(self) -> None:
        """A Pod list begins: every group followed is looked at once (a listed one is also
        among the host's changed; one the list left out is gone)."""
        self.again |= self.since.keys()  # `overdue` and `preempting` are among them

    def prebind(self, cycle: Cycle) -> str:
        """The last point before the gates come off: the group's clock starts."""
        self._start(cycle.key, self.clock())
        return ""

    def _start(self, key: GroupKey, now: float) -> None:
        self.since[key] = now
        self.due.at(now + self.after, key)

    def tick(self) -> None:
        """Each tick: the groups whose pods changed since (after a Pod list: all of them), those
        past the bound or recovering, and those whose bound came; not every group followed. A
        group the placer could not seat at its last try (its `waiting`) is released sooner; a
        release counts the cluster's PodDisruptionBudgets over all of it."""
        if self.host is None:
            return
        now = self.clock()
        came = {k for k in self.due.until(now) if self.since.get(k, now) + self.after <= now}
        keys = self.host.changed | self.again | came
        keys |= self.overdue | self.preempting | self.recovering.keys()  # the few: each tick
        self.again = set()
        partly = self.partly - keys
        for key in keys:
            if self._look(key, now):
                partly.add(key)
        if self.metrics is not None and partly != self.partly:
            self.metrics.partly_bound(len(partly))
        self.partly = partly
        pods = self.host.pods
        self.told = {u for u in self.told if u in pods}  # the few told, not every pod
        self.unbound &= self.since.keys()  # said until bound or gone

    def _look(self, key: GroupKey, now: float) -> bool:
        """One group now; whether it is partly bound past the bound (or stuck recovering)."""
        assert self.host is not None  # noqa: S101 - tick checked
        groups, pods = self.host.groups, self.host.pods
        waiting, budgets = self.host.waiting, self.host.budgets
        b = binding([pods[u] for u in groups.get(key, ()) if u in pods])
        self.overdue.discard(key)
        was = key in self.preempting
        self.preempting.discard(key)
        if b.preempting:  # kube-scheduler makes room for a member: not stuck, clock anew
            self.preempting.add(key)  # looked at each tick: the bound counts from the last one
            self.since[key] = now
            if key in self.recovering:
                self.recovering[key] = now
            return False
        if was and key in self.since:  # it stopped: due from the last time it made room
            self.due.at(self.since[key] + self.after, key)
        stuck = self._stuck(key, b, now, key in waiting, budgets)
        if not b.unbound:
            start = self.since.pop(key, None)
            if start is not None and b.size and len(b.bound) >= b.size and self.metrics:
                self.metrics.all_bound(now - start)
            return stuck
        if key not in self.since:
            self._start(key, now)
        start = self.since[key]
        if now - start < self.after:
            return stuck
        if b.partly:
            for rec in b.unbound:
                self._recover(key, b, rec, now - start)
            if any(r.uid not in self.told for r in b.unbound):
                self.overdue.add(key)  # an eviction refused: asked again at the next tick
            return True
        if not b.bound:
            self._none_bound(key, b, now - start)  # said once; its next event brings it back
        return stuck

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

    def _none_bound(self, key: GroupKey, b: Binding, waited: float) -> None:
        """A group none of whose ungated members kube-scheduler has bound past the bound: it
        holds no node, so nothing is released, but it is said once in the log with the
        scheduler's word. Where that word is "Insufficient" on nodes nothing runs on,
        kube-scheduler may hold a deleted pod there (docs/usage.md: 1.36.2 keeps a gang member
        deleted in its binding cycle); otherwise other pods took the group's room."""
        if key in self.unbound:
            return
        self.unbound.add(key)
        said = next((r.unschedulable for r in b.unbound if r.unschedulable), "")
        log.warning(
            "group ungated, none of its members bound",
            extra={
                "group": f"{key[0]}/{key[1]}",
                "members": len(b.unbound),
                "seconds": round(waited),
                "scheduler": said or "no PodScheduled message yet",
            },
        )

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

"""The placer's inputs: Node, PodDisruptionBudget and Pod lists and watch events, kept as the
capacity view, the pod records and the groups, and the groups they make worth deciding again.
Transport-free, like placer.py, whose `Placer` is this with the decisions added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.framework.evictions import Budget, Budgets, budget_of
from webhook.groups.framework.points import Points
from webhook.groups.framework.refusals import Refusals
from webhook.groups.framework.writes import Writes
from webhook.groups.model.names import GroupKey
from webhook.groups.model.records import PodRecord, pod_record
from webhook.groups.placer.recovery import repromise
from webhook.groups.placer.said import Said


class Inputs:
    """What the placer keeps of the cluster, and how each list and event changes it. Placer
    (placer.py) sets every attribute below in its __init__."""

    clock: Callable[[], float]
    view: CapacityView
    budgets: Budgets
    points: Points  # the extensions' (framework/points.py), told of each input
    writes: Writes
    refusals: Refusals
    said: Said
    pods: dict[str, PodRecord]  # written through `set_pod` and `drop_pod` only
    groups: dict[GroupKey, set[str]]
    gated_groups: dict[GroupKey, set[str]]  # each group's gated members, kept by `set_pod`
    changed: set[GroupKey]  # groups a pod of which was seen or gone since the extensions' tick
    dirty: set[GroupKey]
    waiting: dict[GroupKey, str]
    _listing: dict[str, PodRecord]
    _budgets: list[Budget]

    def nodes_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.nodes_start()
        self.nodes_page(items)
        self.nodes_done()

    def nodes_start(self) -> None:
        """A Node list, page by page (the view changes only at nodes_done)."""
        self.view.start_nodes()

    def nodes_page(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.view.page_nodes(items)

    def nodes_done(self) -> None:
        self.view.end_nodes()
        self.retry_all()

    def node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        generation = self.view.generation
        if kind == "DELETED":
            self.view.delete_node(str((obj.get("metadata") or {}).get("name", "")))
        else:
            self.view.put_node(obj)
        if self.view.generation != generation:
            self.retry_all()

    def budgets_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.budgets_start()
        self.budgets_page(items)
        self.budgets_done()

    def budgets_start(self) -> None:
        """A PodDisruptionBudget list, page by page (a preemption counts them)."""
        self._budgets = []

    def budgets_page(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._budgets += [b for obj in items if (b := budget_of(obj)) is not None]

    def budgets_done(self) -> None:
        self.budgets.reset(self._budgets)
        self._budgets = []
        self.retry_all()

    def budget_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        b = budget_of(obj)
        if b is None:
            return
        if kind == "DELETED":
            self.budgets.remove(b.namespace, b.name)
        else:
            self.budgets.put(b)
        self.retry_all()  # a budget that allows more may let a waiting group preempt

    def pods_listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.pods_start()
        self.pods_page(items)
        self.pods_done()

    def pods_start(self) -> None:
        """A Pod list, page by page: only each pod's record is kept until pods_done applies them
        all at once (as the whole list did)."""
        self._listing = {}

    def pods_page(self, items: Iterable[Mapping[str, Any]]) -> None:
        for obj in items:
            rec = pod_record(obj, 0.0)
            self._listing[rec.uid] = rec

    def pods_done(self) -> None:
        old, listed, now = self.pods, self._listing, self.clock()
        self.pods, self.groups, self._listing, self.gated_groups = {}, {}, {}, {}
        self.view.reset_pods()
        self.points.relisting()  # e.g. the IMEX channels taken: from the listed pods again
        for rec in listed.values():
            was = old.get(rec.uid)
            self._keep(replace(rec, seen=was.seen if was is not None else now))
        repromise(self.view, self.pods.values(), self.points.fits, self.points.reserve)
        self.points.synced()  # from now on a group without pods is gone
        self.retry_all()

    def pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """A pod's change. The waiting groups are decided again only where it frees room (a bind
        where its room was kept, a burst's usual event, frees none) or a node now reads
        differently to a selector (an IMEX channel let go); the pod's own group always."""
        generation = self.view.generation
        self.view.mark()
        if kind == "DELETED":
            key, everyone = self._gone(str((obj.get("metadata") or {}).get("uid", "")))
        else:
            key, everyone = self._changed(obj)
        if self.view.freed() or self.view.generation != generation or everyone:
            self.retry_all()
        elif key is not None:
            self.dirty.add(key)

    def _gone(self, uid: str) -> tuple[GroupKey | None, bool]:
        """A pod deleted: its group, and whether that group is gone with it (what it held for
        itself, such as a domain freed by preemption, is let go: everyone tries again)."""
        rec = self.drop_pod(uid)
        self.view.delete_pod(uid)
        self.points.gone(uid)
        self.writes.forget(uid)
        if rec is None or rec.group is None:
            return None, False
        key = (rec.namespace, rec.group.name)
        self.groups.get(key, set()).discard(uid)
        if self.groups.get(key):
            return key, False
        self.groups.pop(key, None)
        self.waiting.pop(key, None)
        self.points.settled(key)
        self.refusals.cleared(key)
        self.said.forget(key)
        return None, True

    def _changed(self, obj: Mapping[str, Any]) -> tuple[GroupKey | None, bool]:
        """A pod added or changed: its group, and whether every waiting group should be decided
        again whatever the room (a pod that left a budget may let a waiting group preempt)."""
        before = self.pods.get(str((obj.get("metadata") or {}).get("uid", "")))
        rec = self._put(obj, self.pods)
        if not rec.gated and rec.uid not in self.view.promised:  # ungated, not bound: its room
            repromise(self.view, [rec], self.points.fits, self.points.reserve)  # (answer lost)
        relabelled = before is not None and before.labels != rec.labels
        key = (rec.namespace, rec.group.name) if rec.group is not None else None
        return key, relabelled and bool(self.budgets.by_namespace)

    def _put(self, obj: Mapping[str, Any], known: Mapping[str, PodRecord]) -> PodRecord:
        rec = self.writes.as_seen(pod_record(obj, self.clock()))
        old = known.get(rec.uid)
        if old is not None:
            rec = replace(rec, seen=old.seen)
        return self._keep(rec)

    def _keep(self, rec: PodRecord) -> PodRecord:
        self.set_pod(rec)
        self.view.put_pod(
            rec.uid, rec.node, rec.gpus, rec.holds, rec.nominated if rec.member else ""
        )
        self.points.seen(rec)  # e.g. the IMEX channel it holds or was promised, if any
        if rec.group is not None:
            self.groups.setdefault((rec.namespace, rec.group.name), set()).add(rec.uid)
        return rec

    def set_pod(self, rec: PodRecord) -> None:
        """The pod's record now, and the indexes kept with it: the gated members, the groups
        changed since the extensions' last tick."""
        self.drop_pod(rec.uid)
        self.pods[rec.uid] = rec
        if rec.group is not None:
            key = (rec.namespace, rec.group.name)
            self.changed.add(key)
            if rec.gated and rec.member:
                self.gated_groups.setdefault(key, set()).add(rec.uid)

    def drop_pod(self, uid: str) -> PodRecord | None:
        rec = self.pods.pop(uid, None)
        if rec is not None and rec.group is not None:
            key = (rec.namespace, rec.group.name)
            self.changed.add(key)
            if (gated := self.gated_groups.get(key)) is not None:
                gated.discard(uid)
                if not gated:
                    del self.gated_groups[key]
        return rec

    def retry_all(self) -> None:
        """Every group with a gated member is decided again. From the index: a pass over every
        group at each bind was 23 ms at 8,192 groups of 8 (docs/benchmarks.md "Fifth pass")."""
        self.dirty.update(self.gated_groups)

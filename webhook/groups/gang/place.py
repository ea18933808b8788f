"""The native gang (PodGroup) as an extension of the placer (framework/points.py).

`permit` then `prebind` (before a group's gate is lifted): where its members name PodGroup
gpufabric-<group> (the webhook set it: the cluster serves PodGroups), that PodGroup exists in the
version the cluster serves, a gang of the members that name it (all of them, unless some were
admitted before PodGroups were known served: a pod's spec.schedulingGroup never changes, and
kube-scheduler counts only the pods that name the group), so kube-scheduler binds them together
or not at all. Every check that can make the group wait runs at `permit`, before any extension
makes anything. The PodGroup is the group's only while it is ours and names the members'
controller by UID (owned.py): one of an earlier controller is adopted (made to name this one), as
it can neither be made anew nor waited for while the members name it; a lost one is made again.
`tick` (each reconcile): our PodGroups whose group has no pod left are deleted, and one an
ungated group's unbound members still name is made again when it is lost. The partly-bound watch,
for every group native or not, is extensions/partly/bound.py.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from webhook.groups.framework.points import Cycle, Host
from webhook.groups.gang.names import MUTABLE_MIN_COUNT, PG_GROUP, PG_PLURAL, podgroup_name
from webhook.groups.gang.podgroups import Book, Made, gang_spec, made_of, pod_group, too_large
from webhook.groups.gang.watch import binding
from webhook.groups.names import GroupKey
from webhook.groups.owned import adoption, shared_owner, verdict, waiting_words
from webhook.groups.records import PodRecord

log = logging.getLogger(__name__)
SCAN_EVERY = 10.0  # seconds between looks at every group (those a previous leader ungated)
SERVED = f"{PG_PLURAL}.{PG_GROUP}"


class GangApi(Protocol):
    def create_podgroup(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The created object (the one there already, when it exists)."""

    def delete_podgroup(self, namespace: str, name: str, uid: str, version: str) -> None:
        """Delete it if it is still that object (a precondition on the UID); gone is fine."""

    def patch_podgroup(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch (metadata.uid in it: only that object); the object as patched."""


class NativeGang:
    """Groups whose members name a PodGroup: kube-scheduler's own gang scheduling."""

    def __init__(self, api: GangApi | None = None) -> None:
        self.api = api
        self.book = Book()
        if api is None:
            self.book.unserved()  # no API: nothing is served (tests of plain groups)
        self.host: Host | None = None
        self.pods_listed = False  # a group without pods is truly gone (its PodGroup too)
        self.ungated: set[GroupKey] = set()  # groups with ungated members not all bound yet
        self._scan_at = 0.0
        self._asked: set[tuple[str, str]] = set()  # PodGroups asked for early, not answered

    def attach(self, host: Host) -> None:
        self.host = host

    def synced(self) -> None:
        self.pods_listed = True

    # -- before ungating ---------------------------------------------------------------------
    def incomplete(self, cycle: Cycle) -> None:
        """As a group's first members arrive: its PodGroup asked for with the reconcile's other
        writes, so `prebind` finds it made once the group is whole (made there, its round trip
        stood between the last member and the ungating; issue 38). Its owner: the controller the
        members so far share. A failure is only logged: `prebind` makes it then."""
        key, recs = cycle.key, cycle.recs
        name = podgroup_name(key[1])
        where = (key[0], name or "")
        if name is None or self.api is None or self.book.served is not True:
            return
        if where in self._asked or where in self.book.by_name:
            return
        if not any(r.pod_group == name for r in recs):
            return
        self._asked.add(where)
        want = max(1, cycle.size - sum(1 for r in recs if r.pod_group != name))
        owner = shared_owner(r.owner for r in recs)
        body = pod_group(key[0], name, key[1], want, owner, self.book.version)
        call = partial(self.api.create_podgroup, key[0], body)
        cycle.writes.add(call, partial(self._made, where))

    def _made(self, where: tuple[str, str], result: object) -> None:
        self._asked.discard(where)
        if isinstance(result, Mapping) and made_of(result) is not None:
            self.book.event("ADDED", result)
        elif isinstance(result, Exception):
            log.warning("podgroup not made early", extra={"podgroup": where[1], "error": result})

    def permit(self, cycle: Cycle) -> str:
        """Why the group must wait for its PodGroup, as far as the book tells without a write."""
        return self._own(cycle.key, cycle.size, cycle.recs, make=False) or ""

    def prebind(self, cycle: Cycle) -> str:
        """Why the group must wait, or '' once its PodGroup (where it has one) exists."""
        why = self._own(cycle.key, cycle.size, cycle.recs)
        name = podgroup_name(cycle.key[1])
        if why is None and any(r.pod_group == name for r in cycle.recs):
            self.ungated.add(cycle.key)  # its PodGroup made again if lost, until all bound
        return why or ""

    def _own(
        self, key: GroupKey, size: int, recs: Sequence[PodRecord], make: bool = True
    ) -> str | None:
        """Make, keep or adopt the PodGroup the members name (a v1beta1 gang larger than they
        can make shrunk to them); why the group waits, if it does. `recs`: its live members.
        `make` False: only the checks, no write (a create's own answer is not known then)."""
        name = podgroup_name(key[1])
        if name is None or not any(r.pod_group == name for r in recs):
            return None
        if self.book.served is None:
            return f"its members name PodGroup {name}; waiting for the first list of {SERVED}"
        if not self.book.served or self.api is None:
            return None  # none served: kube-scheduler gates on no PodGroup, nothing to wait for
        owner = shared_owner(r.owner for r in recs)
        # the members that do not name it never will (spec.schedulingGroup is immutable) and
        # kube-scheduler's PreEnqueue waits for minCount pods that do: the gang is the others
        want = max(1, size - sum(1 for r in recs if r.pod_group != name))
        have = self.book.by_name.get((key[0], name))
        if have is None:
            if not make:
                return None
            body = pod_group(key[0], name, key[1], want, owner, self.book.version)
            made = self.api.create_podgroup(key[0], body)
            have = made_of(made)
            if have is None:  # one of the name that is not ours (create answered 409)
                return waiting_words("foreign", "PodGroup", name, key[0])
            self.book.event("ADDED", made)
        v = verdict(have.found, key[1], owner)
        if v == "foreign":
            return waiting_words(v, "PodGroup", name, key[0])
        # Neither made anew nor waited for: kube-controller-manager's podgroup-protection
        # finalizer keeps a PodGroup while pods name it (ours do, gated or not), and
        # kube-scheduler goes on using it meanwhile, deleted or not.
        patch = adoption(have.uid, owner) if v == "earlier" else {}
        if have.min_count > want:  # a gang larger than the members that can join never binds
            if self.book.version not in MUTABLE_MIN_COUNT:
                return too_large(name, have.min_count, want)
            patch = {**(patch or {"metadata": {"uid": have.uid}}), "spec": gang_spec(want)}
        if patch and make:
            self.book.event(
                "MODIFIED", self.api.patch_podgroup(key[0], name, self.book.version, patch)
            )
        return None

    # -- each reconcile ----------------------------------------------------------------------
    def tick(self) -> None:
        """Our PodGroups whose group has no pod left deleted, once the pods are listed; a lost
        one that ungated members still wait for made again (looked at: the groups ungated
        since, and every group each SCAN_EVERY seconds, for those a previous leader ungated)."""
        if self.host is None or not self.pods_listed:
            return
        groups, pods = self.host.groups, self.host.pods
        self._sweep(groups)
        keys = set(self.ungated)
        if (now := self.host.clock()) >= self._scan_at:
            keys |= groups.keys()
            self._scan_at = now + SCAN_EVERY
        for key in keys:
            recs = [pods[u] for u in groups.get(key, ()) if u in pods]
            b = binding(recs)
            if not b.unbound:
                self.ungated.discard(key)  # all bound (or gone): kube-scheduler is done with it
                continue
            self.ungated.add(key)
            if not any(r.gated for r in recs):
                self._lost(key, b.size, recs)

    def _lost(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> None:
        """Ungated members waiting for a PodGroup that is gone (deleted by hand, or by the
        garbage collector): it is made again (gated ones get it from `prebind`)."""
        name = podgroup_name(key[1])
        if name is None or (key[0], name) in self.book.by_name:
            return
        try:
            why = self._own(key, size, [r for r in recs if r.member])
        except Exception:  # noqa: BLE001 - asked again at the next look
            log.warning("podgroup not made again", extra={"podgroup": f"{key[0]}/{name}"})
            return
        if why is not None:
            log.info("podgroup not made again", extra={"podgroup": f"{key[0]}/{name}", "why": why})

    def _sweep(self, groups: Mapping[GroupKey, object]) -> None:
        """Delete our PodGroups whose group has no pod left."""
        for m in list(self.book.by_name.values()):
            if (m.namespace, m.group) not in groups and not m.deleting:
                self._delete(m)

    def _delete(self, m: Made) -> None:
        assert self.api is not None  # noqa: S101 - a book with entries implies an API
        try:
            self.api.delete_podgroup(m.namespace, m.name, m.uid, self.book.version)
        except Exception:  # noqa: BLE001 - retried on the next reconcile
            log.warning("podgroup not deleted", extra={"podgroup": f"{m.namespace}/{m.name}"})
            return
        self.book.by_name[(m.namespace, m.name)] = replace(m, deleting=True)

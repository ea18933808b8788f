"""The native gang (PodGroup) as an extension of the placer (framework/points.py).

`permit` then `prebind` (before a group's gate is lifted): where its members name PodGroup
gpufabric-<group> (the webhook set it: the cluster serves PodGroups), that PodGroup exists in the
version the cluster serves, a gang of the members that name it (all of them, unless some were
admitted before PodGroups were known served: a pod's spec.schedulingGroup never changes, and
kube-scheduler counts only the pods that name the group), so kube-scheduler binds them together
or not at all. Every check that can make the group wait runs at `permit`, before any extension
makes anything. The PodGroup is the group's only while it is ours and names the members'
controller by UID (framework/lifecycle.py, as a ComputeDomain): one of an earlier controller is
adopted (made to name this one), as it can neither be made anew nor waited for while the members
name it; a lost one is made again.
`tick` (each reconcile): our PodGroups whose group has no pod left are deleted, and one an
ungated group's unbound members still name is made again when it is lost. The partly-bound watch,
for every group native or not, is extensions/partly/bound.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from webhook.groups.extensions.gang.names import MUTABLE_MIN_COUNT, PODGROUPS, podgroup_name
from webhook.groups.extensions.gang.podgroups import Book, Made, gang_spec, pod_group, too_large
from webhook.groups.framework.binding import binding
from webhook.groups.framework.lifecycle import AddWrite, Lifecycle, OwnedApi
from webhook.groups.framework.owned import shared_owner
from webhook.groups.framework.ownedkube import owned_watch
from webhook.groups.framework.points import Cycle, Feeds, Host, Ready, Watch
from webhook.groups.model.names import GroupKey
from webhook.groups.model.records import PodRecord


class NativeGang:
    """Groups whose members name a PodGroup: kube-scheduler's own gang scheduling."""

    def __init__(self, api: OwnedApi | None = None) -> None:
        """`api`: the PodGroups' writes (none: PodGroups are not served)."""
        self.book = Book()
        self.podgroups = Lifecycle(self.book, api)  # made, adopted, made again, deleted
        self.host: Host | None = None
        self.pods_listed = False  # a group without pods is truly gone (its PodGroup too)
        self.ungated: set[GroupKey] = set()  # groups with ungated members not all bound yet
        self.again: set[GroupKey] = set()  # followed groups a Pod list may have taken away
        self.full = True  # the next sweep looks at every PodGroup (after a Pod list)

    def watches(self, feeds: Feeds) -> Sequence[Watch]:
        return (owned_watch("placer-podgroups", feeds.api_client, self.book, feeds.put),)

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
        if name is None or not any(r.pod_group == name for r in recs):
            return
        want = max(1, cycle.size - sum(1 for r in recs if r.pod_group != name))
        owner = shared_owner(r.owner for r in recs)
        body = partial(pod_group, key[0], name, key[1], want, owner, self.book.version)
        self.podgroups.early(key, name, body, cycle.writes.add)

    def permit(self, cycle: Cycle) -> str:
        """Why the group must wait for its PodGroup, as far as the book tells without a write."""
        why = self._own(cycle.key, cycle.size, cycle.recs, make=False)
        return why if isinstance(why, str) else ""

    def prebind(self, cycle: Cycle) -> str | Ready:
        """Why the group must wait, or '' once its PodGroup (where it has one) exists, or a
        Ready where it is being made (the group's writes wait for its answer, not the
        placer)."""
        why = self._own(cycle.key, cycle.size, cycle.recs, add=cycle.writes.add)
        name = podgroup_name(cycle.key[1])
        if not isinstance(why, str) and any(r.pod_group == name for r in cycle.recs):
            self.ungated.add(cycle.key)  # its PodGroup made again if lost, until all bound
        return why or ""

    def _own(
        self,
        key: GroupKey,
        size: int,
        recs: Sequence[PodRecord],
        make: bool = True,
        add: AddWrite | None = None,
    ) -> str | Ready | None:
        """Make, keep or adopt the PodGroup the members name (a v1beta1 gang larger than they
        can make shrunk to them); why the group waits, if it does. `recs`: its live members.
        `make` False: only the checks, no write (a create's own answer is not known then).
        `add` (the reconcile's writes): one not made yet is asked for there, and a Ready
        answered, not made on the placer's thread."""
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

        if not make:
            return self.podgroups.blocked(key, name, owner, fit=fit) or None
        body = partial(pod_group, key[0], name, key[1], want, owner, version)
        if add is not None and (ready := self.podgroups.making(key, name, owner, body, add, fit)):
            return ready
        got = self.podgroups.own(key, name, owner, body, fit=fit)
        return got if isinstance(got, str) else None

    def nominates(self, rec: PodRecord) -> bool:
        """A member of a native gang is nominated to the node chosen for it before its gate
        goes. Why: kube-scheduler 1.36 writes status.nominatedNodeName of every member that
        waits at Permit for its siblings, through a client rate limited to 50 requests/s (100
        at once), and in a burst that limit, not the search, held the binds back
        (bench/bind_bench.py --sched-v 5). It writes nothing where the field already names its
        choice, and it counts the siblings' nominations as taken when it filters a member
        (NominatedNodeNameForExpectation, beta and on in 1.36), so in a domain the group fills
        its choice is ours. A member it tries alone, before its siblings' gates are gone, loses
        the nomination with that failure. A pod outside a gang never waits at Permit: its
        nomination would be a write that saves the scheduler none."""
        return bool(rec.pod_group) and bool(self.book.served)

    # -- each reconcile ----------------------------------------------------------------------
    def tick(self) -> None:
        """Our PodGroups whose group has no pod left deleted, once the pods are listed; a lost
        one that ungated members still wait for made again. Looked at: the groups whose pods
        changed since (after a Pod list, every group: those a previous leader ungated), and the
        followed groups whose PodGroup changed (after a list of them, every followed group)."""
        if self.host is None or not self.pods_listed:
            return
        groups, pods = self.host.groups, self.host.pods
        book = self.book  # whose PodGroup changed (lost), read before the sweep takes them
        lost = set(self.ungated) if book.fresh else self.ungated & book.touched
        changed = None if self.full else self.host.changed  # after a Pod list: every group
        self.podgroups.sweep(groups, changed=changed)  # ours whose group has no pod left: deleted
        keys, self.again, self.full = self.host.changed | self.again, set(), False
        for key in keys:
            recs = [pods[u] for u in groups.get(key, ()) if u in pods]
            b, name = binding(recs), podgroup_name(key[1])
            if not b.unbound or not any(r.pod_group == name for r in recs):
                self.ungated.discard(key)  # all bound (or gone, or no gang): nothing to keep
                continue
            self.ungated.add(key)
            if not any(r.gated for r in recs):
                self._lost(key, b.size, recs)
        if not book.served:
            return
        for key in lost - keys:  # its pods unchanged, its PodGroup changed: lost?
            name = podgroup_name(key[1])
            if name is None or (key[0], name) in book.by_name:
                continue
            recs = [pods[u] for u in groups.get(key, ()) if u in pods]
            if not any(r.gated for r in recs):
                self._lost(key, binding(recs).size, recs)

    def relisting(self) -> None:
        """A Pod list begins: every group followed is looked at once, every PodGroup swept."""
        self.again |= self.ungated
        self.full = True

    def _lost(self, key: GroupKey, size: int, recs: Sequence[PodRecord]) -> None:
        """Ungated members waiting for a PodGroup that is gone (deleted by hand, or by the
        garbage collector): it is made again (gated ones get it from `prebind`)."""
        name = podgroup_name(key[1])
        if name is not None:
            live = [r for r in recs if r.member]
            self.podgroups.again(key, name, lambda: self._own(key, size, live))

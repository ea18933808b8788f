"""The placer's side of IMEX channels: which groups need a ComputeDomain, how their request
changes (the NVLink domain as level, one member a node, nodes of other ComputeDomains skipped),
the ComputeDomain made before the gate is lifted, and deleted once the last member is gone.

The placer's extension points (framework/points.py) are in imex/extension.py: `request_for`
before deciding, `judge` then `made` before ungating (it waits for the channel template too),
`placed_words` for GroupPlaced, `track`/`forget` as pods come, bind and go (which nodes'
channels are taken, before the driver labels them) and `sweep` on each reconcile. Deletion is
read from listed state (the group's pods and the ComputeDomains labelled as ours), so a restarted
placer deletes what its predecessor left and never one whose group still has a pod.

The ComputeDomain follows the one lifecycle of the placer's owned objects
(framework/lifecycle.py), as the PodGroup does: one of the group's name is the group's only while
it is ours and names the members' controller by UID; one of an earlier controller is adopted; one
the group's placed members still claim is made again when it is lost; one being deleted while
none of the group holds its channel (the members' controller was made again) is let go (the
placer's finalizer off), and made anew once gone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Request
from webhook.groups.extensions.imex.channels import Channels, channel_id
from webhook.groups.extensions.imex.domains import Book, Domain, compute_domain
from webhook.groups.extensions.imex.names import (
    ANN_COMPUTE_DOMAIN,
    CD_CRD,
    MODES,
    NODE_LABEL,
    TEMPLATES,
    Mode,
    template_name,
)
from webhook.groups.extensions.imex.nodes import excluding
from webhook.groups.extensions.imex.templates import Templates
from webhook.groups.framework.lifecycle import AddWrite, Lifecycle, OwnedApi
from webhook.groups.framework.owned import shared_owner
from webhook.groups.model.names import NVLINK_LEVEL, GroupKey, choice
from webhook.groups.model.pods import Owner
from webhook.groups.model.records import PodRecord


class ImexMetrics(Protocol):
    def domain_made(self, created: int, deleted: int) -> None: ...

    def domains_left_over(self, count: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Need:
    """What a group asks of IMEX: its mode, the ComputeDomain and the template its pods claim."""

    mode: Mode
    name: str
    template: str
    user: bool  # a ComputeDomain of the user's: the placer neither creates nor deletes it


def mode_of(annotations: Mapping[str, Any]) -> Mode | None:
    value = annotations.get(ANN_COMPUTE_DOMAIN)
    return None if value is None else choice(value, MODES)  # type: ignore[return-value]


class Imex:
    def __init__(self, api: OwnedApi | None = None, metrics: ImexMetrics | None = None) -> None:
        self.metrics = metrics
        self.book = Book()
        # made, adopted, made again, released and deleted (counted: the ComputeDomains metric)
        self.domains = Lifecycle(self.book, api, self._counted)
        self.templates = Templates()  # the channel templates NVIDIA's controller made
        if api is None:
            self.templates.set_served(False)  # no API: nothing is served (plain groups' tests)
        self.pods_listed = False  # the pods are listed: an empty group is truly empty
        self.needs: dict[GroupKey, Need] = {}
        self.left_over = 0  # our ComputeDomains whose group is gone, not deleted yet
        self.channels = Channels()  # which node's channel which pod holds or was promised
        self.holding: dict[str, PodRecord] = {}  # the pods in `channels`, whose groups need one
        self.unresolved: dict[str, PodRecord] = {}  # pods claiming templates no CD declares yet
        self._resolved_at = -1  # the book's changes the unresolved pods were last tried with
        self.view = CapacityView()  # the placer's, whose node labels the channels go into

    def need(self, key: GroupKey, recs: Sequence[PodRecord]) -> Need | None:
        """None for a plain group (most): no annotation, no claim of a ComputeDomain's template."""
        mode = next((m for r in recs if (m := mode_of(_annotations(r))) is not None), None)
        claimed = {t for r in recs for t in r.templates}
        if mode is None and not claimed:
            return None
        own = template_name(key[1])
        user = self.book.declaring(key[0], sorted(claimed))
        if user is not None and user.group != key[1]:  # not ours: placed as required, no more
            return Need("required", user.name, user.template, True)
        if mode is None or (mode == "preferred" and own not in claimed):
            return None  # preferred on a cluster without the CRD: nothing was injected
        return Need(mode, key[1], own, False)

    def request_for(
        self,
        key: GroupKey,
        request: Request,
        recs: Sequence[PodRecord],
    ) -> Request | str:
        """The request as IMEX needs it, or why the group must wait."""
        need = self.need(key, recs)
        if need is None:
            self.needs.pop(key, None)
            return request
        self.refresh()  # before an IMEX group reads which channels are taken
        if self.book.served is None:
            return f"compute-domain {need.mode}: waiting for the first list of {CD_CRD}"
        if not self.book.served:
            return f"compute-domain {need.mode}: this cluster does not serve {CD_CRD}"
        have = self.book.by_name.get((key[0], need.name))
        if not need.user:
            why = self.domains.blocked(key, need.name, _owner(recs), partial(_declares, need))
            if why:
                return why
        self.needs[key] = need
        uid = have.uid if have is not None else ""
        own = channel_id(key[0], need.template)
        taken = frozenset(
            node
            for r in recs
            if not r.gated and (node := r.node or self.view.promised.get(r.uid, ("", 0))[0])
        )
        members = tuple(
            replace(m, whole=True, selector=excluding(m.selector, uid, own), avoid=taken)
            for m in request.members
        )
        return replace(request, members=members, level=NVLINK_LEVEL, locality=need.mode)

    def judge(self, key: GroupKey, recs: Sequence[PodRecord]) -> str:
        """Why the group may not have the ComputeDomain of its name, '' when it may (nothing is
        made here: the placer asks every extension's checks before the first is made)."""
        need = self.needs.get(key)
        if need is None or need.user:
            return ""
        return self.domains.blocked(key, need.name, _owner(recs), partial(_declares, need))

    def early(self, key: GroupKey, recs: Sequence[PodRecord], add: AddWrite) -> None:
        """As a group's first members arrive: its ComputeDomain asked for with the reconcile's
        other writes, so that NVIDIA's controller makes the channel template while the rest
        arrive (the group is ungated only once it exists). A failure is only logged: `made`
        makes it then, where a refusal reaches the group."""
        need = self.need(key, recs)
        if need is None or need.user or self.book.served is not True:
            return
        if self.domains.blocked(key, need.name, _owner(recs), partial(_declares, need)):
            return
        self.domains.early(key, need.name, self._body(key, recs), add)

    def made(self, key: GroupKey, recs: Sequence[PodRecord], add: AddWrite | None = None) -> str:
        """The group's ComputeDomain exists and NVIDIA's controller has made its channel template
        before the gate is lifted: '' when both are there, else why the group waits (raises
        when the ComputeDomain is not made). `judge` said it may have it. `add` (the reconcile's
        writes): one not made yet is asked for there, not made on the placer's thread (the
        group waits for its template anyway)."""
        need = self.needs.get(key)
        if need is None:
            return ""
        have = self.book.by_name.get((key[0], need.name))
        if not need.user and have is None and add is not None:
            body = self._body(key, recs)
            if self.domains.making(key, need.name, _owner(recs), body, add) is not None:
                return (
                    f"compute-domain {need.mode}: ComputeDomain {need.name} asked for; waiting "
                    f"for NVIDIA's ComputeDomain controller to make ResourceClaimTemplate "
                    f"{need.template} for it (members are ungated once it exists)"
                )
        if not need.user:
            got = self._own(key, need, recs)
            if isinstance(got, str):
                return got
            have = got
        if have is None or self.templates.ready(key[0], need.template, have.uid):
            return ""
        if self.templates.served is None:
            return f"compute-domain {need.mode}: waiting for the first list of {TEMPLATES}"
        return (
            f"compute-domain {need.mode}: waiting for NVIDIA's ComputeDomain controller to make "
            f"ResourceClaimTemplate {need.template} for ComputeDomain {need.name} (members are "
            "ungated once it exists)"
        )

    def _counted(self, made: int, deleted: int) -> None:
        if self.metrics is not None:
            self.metrics.domain_made(made, deleted)

    def _own(self, key: GroupKey, need: Need, recs: Sequence[PodRecord]) -> Domain | str:
        """The group's ComputeDomain made, adopted or kept (framework/lifecycle.py), or why the
        group waits: one of its name not ours, or not declaring the template the members claim,
        or being deleted. Raises refusals.Rejected."""
        body = self._body(key, recs)
        return self.domains.own(key, need.name, _owner(recs), body, partial(_declares, need))

    def _body(self, key: GroupKey, recs: Sequence[PodRecord]) -> Callable[[], Mapping[str, Any]]:
        """The group's ComputeDomain as it is created: one member a node, owned as they are."""
        size = max((r.group.size for r in recs if r.group is not None), default=len(recs))
        return partial(compute_domain, key[0], key[1], _owner(recs), size)

    # -- channels: which nodes' channel is taken (imex/channels.py) ----------------------------
    def track(self, rec: PodRecord, node: str = "") -> None:
        """Where the pod holds its channel now: its node while bound, else the node the placer
        promised it (`node`, or the view's promise) while ungated; into the view's node
        labels."""
        channel = self._channel(rec)
        if channel is None and rec.templates and rec.member:
            self.unresolved[rec.uid] = rec  # a ComputeDomain may declare it later
        else:
            self.unresolved.pop(rec.uid, None)
        if rec.holds:
            node = rec.node
        elif rec.gated or not rec.member:
            node = ""
        else:
            node = node or self.view.promised.get(rec.uid, ("", 0))[0]
        self._show(self.channels.put(rec.uid, node, channel or ""))
        if rec.uid in self.channels.of:
            self.holding[rec.uid] = rec
        else:
            self.holding.pop(rec.uid, None)

    def forget(self, uid: str) -> None:
        self.unresolved.pop(uid, None)
        self.holding.pop(uid, None)
        self._show(self.channels.put(uid, "", ""))

    def reset(self) -> None:
        """A pod relist: every pod is tracked anew."""
        self.unresolved, self.holding = {}, {}
        self._show(self.channels.reset())

    def channel_free(self, rec: PodRecord, node: str) -> bool:
        """No pod holds the node's channel, or the pod claims none."""
        return not self.channels.holder(node) or self._channel(rec) is None

    def refresh(self) -> None:
        """Pods whose templates no ComputeDomain declared, tried again once the book changed."""
        if self._resolved_at != self.book.changes:
            self._resolved_at = self.book.changes
            for rec in list(self.unresolved.values()):
                self.track(rec)

    def _channel(self, rec: PodRecord) -> str | None:
        """The channel the pod claims: its group's own, or a ComputeDomain's template."""
        if not rec.templates:
            return None
        if rec.group is not None and mode_of(_annotations(rec)) is not None:
            own = template_name(rec.group.name)
            if own in rec.templates:
                return channel_id(rec.namespace, own)
        d = self.book.declaring(rec.namespace, rec.templates)
        return None if d is None else channel_id(rec.namespace, d.template)

    def _show(self, nodes: Iterable[str]) -> None:
        for n in nodes:
            holder = self.channels.holder(n)
            self.view.overlay(n, {NODE_LABEL: holder} if holder else {})

    def placed_words(
        self, key: GroupKey, nodes: Sequence[str], where: Callable[[str], Sequence[str | None]]
    ) -> str:
        """GroupPlaced's words on the ComputeDomain and, where the members' nodes span several
        NVLink domains (`where(node)[0]`), that each forms its own IMEX domain."""
        need = self.needs.get(key)
        if need is None:
            return ""
        text = f"; ComputeDomain {need.name} (template {need.template})"
        spans = {w[0] for n in nodes if (w := where(n)) and w[0]}
        if len(spans) > 1:
            text += (
                f": it spans {len(spans)} NVLink domains, each forms its own IMEX domain "
                "(no NVLink between them)"
            )
        return text

    def sweep(
        self,
        groups: Mapping[GroupKey, Collection[str]],
        changed: Collection[GroupKey] | None = None,
    ) -> None:
        """Our ComputeDomains whose group has no pod left (none runs under it any more): the
        placer's finalizer off, deleted; one being deleted while none of its live group holds
        its channel: let go, made anew after (framework/lifecycle.py). `changed`: the groups
        whose pods changed since the last sweep (None: every group), with those whose
        ComputeDomain changed: only those are looked at."""
        if not self.pods_listed or not self.book.served:
            return
        fresh = changed is None or self.book.fresh
        # the groups whose ComputeDomain changed, read before the lifecycle's sweep takes them
        self._remake(groups, None if fresh else {*(changed or ()), *self.book.touched})
        taken = self.channels.taken
        gone = self.domains.sweep(
            groups, lambda d: taken(channel_id(d.namespace, d.template)), changed
        )
        for d in gone:  # left over until the watch says it is gone (the driver's finalizer first)
            self.needs.pop((d.namespace, str(d.group)), None)
        if self.metrics is not None and len(gone) != self.left_over:
            self.metrics.domains_left_over(len(gone))
        self.left_over = len(gone)

    def _remake(
        self, groups: Mapping[GroupKey, Collection[str]], keys: Collection[GroupKey] | None
    ) -> None:
        """The ComputeDomain of a live group whose placed members claim its channel, made again
        where it is lost (deleted by hand, or its finalizer taken off): the members' claims
        not made yet, and the members their controller makes again, need its template.
        `keys`: the groups to look at (None: every group holding a channel)."""
        holding = self.holding
        if keys is None:
            recs: Iterable[PodRecord] = holding.values()
        else:
            recs = [holding[u] for k in keys for u in groups.get(k, ()) if u in holding]
        placed: dict[GroupKey, list[PodRecord]] = {}
        for rec in recs:
            if rec.group is not None and rec.member:
                placed.setdefault((rec.namespace, rec.group.name), []).append(rec)
        for key, members in placed.items():
            if key not in groups or (key[0], key[1]) in self.book.by_name:
                continue
            need = self.need(key, members)
            if need is not None and not need.user and need.name == key[1]:
                self.domains.again(key, need.name, partial(self._own, key, need, members))


def _owner(recs: Sequence[PodRecord]) -> Owner | None:
    """The members' shared controller (None for bare pods, or members of several)."""
    return shared_owner(r.owner for r in recs)


def _declares(need: Need, d: Domain) -> bool:
    """Ours by its labels is not enough: it declares the template the members claim."""
    return d.template == need.template


def _annotations(rec: PodRecord) -> Mapping[str, Any]:
    return rec.body.get("metadata", {}).get("annotations") or {}

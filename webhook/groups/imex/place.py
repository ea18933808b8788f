"""The placer's side of IMEX channels: which groups need a ComputeDomain, how their request
changes (the NVLink domain as level, one member a node, nodes of other ComputeDomains skipped),
the ComputeDomain made before the gate is lifted, and deleted once the last member is gone.

Placer calls `adjust` before deciding, `ensure` before ungating, `words` for GroupPlaced and
`sweep` on each reconcile. Deletion is read from listed state (the group's pods and the
ComputeDomains labelled as ours), so a restarted placer deletes what its predecessor left and
never one whose group still has a pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from webhook.groups.decision import Request
from webhook.groups.imex.domains import Book, Domain, compute_domain
from webhook.groups.imex.names import ANN_COMPUTE_DOMAIN, CD_CRD, MODES, Mode, template_name
from webhook.groups.imex.nodes import excluding
from webhook.groups.names import NVLINK_LEVEL, choice
from webhook.groups.records import PodRecord

log = logging.getLogger(__name__)
GroupKey = tuple[str, str]


class DomainApi(Protocol):
    def create_domain(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The created object; raises refusals.Rejected when the API server refuses it."""

    def delete_domain(self, namespace: str, name: str, uid: str) -> None:
        """Delete it if it is still that object (a precondition on the UID); gone is fine."""


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
    def __init__(self, api: DomainApi | None = None, metrics: ImexMetrics | None = None) -> None:
        self.api, self.metrics = api, metrics
        self.book = Book()
        if api is None:
            self.book.unserved()  # no API: nothing is served (tests of plain groups)
        self.synced = False  # the pods are listed: an empty group is truly empty
        self.needs: dict[GroupKey, Need] = {}
        self.left_over = 0  # our ComputeDomains whose group is gone, not deleted yet

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

    def adjust(
        self,
        key: GroupKey,
        request: Request,
        recs: Sequence[PodRecord],
        promised: Mapping[str, tuple[str, int]],
    ) -> Request | str:
        """The request as IMEX needs it, or why the group must wait. `promised`: the view's
        pod uid -> (node, GPUs) of ungated members not bound yet."""
        need = self.need(key, recs)
        if need is None:
            self.needs.pop(key, None)
            return request
        if self.book.served is None:
            return f"compute-domain {need.mode}: waiting for the first list of {CD_CRD}"
        if not self.book.served:
            return f"compute-domain {need.mode}: this cluster does not serve {CD_CRD}"
        have = self.book.by_name.get((key[0], need.name))
        if not need.user and have is not None:
            if have.group != key[1] or have.template != need.template:
                return (
                    f"ComputeDomain {need.name} exists in {key[0]} and is not this group's "
                    f"(it declares template {have.template or 'none'}); rename one of them"
                )
            if have.deleting:
                return f"ComputeDomain {need.name} is being deleted; it is made again after"
        self.needs[key] = need
        uid = have.uid if have is not None else ""
        taken = frozenset(
            node
            for r in recs
            if not r.gated and (node := r.node or promised.get(r.uid, ("", 0))[0])
        )
        members = tuple(
            replace(m, whole=True, selector=excluding(m.selector, uid), avoid=taken)
            for m in request.members
        )
        return replace(request, members=members, level=NVLINK_LEVEL, locality=need.mode)

    def ensure(self, key: GroupKey, recs: Sequence[PodRecord]) -> None:
        """The group's ComputeDomain exists before its gate is lifted (raises when not made)."""
        need = self.needs.get(key)
        if need is None or need.user or (key[0], need.name) in self.book.by_name:
            return
        owners = {r.owner for r in recs}
        owner = owners.pop() if len(owners) == 1 else None  # only a controller all share
        assert self.api is not None  # noqa: S101 - served implies an API
        made = self.api.create_domain(key[0], compute_domain(key[0], key[1], owner))
        self.book.event("ADDED", made)
        if self.metrics is not None:
            self.metrics.domain_made(1, 0)

    def words(
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

    def sweep(self, groups: Mapping[GroupKey, object]) -> None:
        """Delete our ComputeDomains whose group has no pod left (none runs under it any more)."""
        if not self.synced or not self.book.served:
            return
        deleted = left = 0
        for d in self.book.ours():
            if (d.namespace, str(d.group)) in groups:
                continue
            self.needs.pop((d.namespace, str(d.group)), None)
            left += 1  # until the watch says it is gone (the driver's finalizer runs first)
            if not d.deleting and self._delete(d):
                deleted += 1
        if self.metrics is not None:
            if deleted:
                self.metrics.domain_made(0, deleted)
            if left != self.left_over:
                self.metrics.domains_left_over(left)
        self.left_over = left

    def _delete(self, d: Domain) -> bool:
        assert self.api is not None  # noqa: S101 - served implies an API
        try:
            self.api.delete_domain(d.namespace, d.name, d.uid)
        except Exception:  # noqa: BLE001 - retried on the next reconcile; counted as left over
            log.warning("computedomain not deleted", extra={"domain": f"{d.namespace}/{d.name}"})
            return False
        self.book.by_name[(d.namespace, d.name)] = replace(d, deleting=True)
        return True


def _annotations(rec: PodRecord) -> Mapping[str, Any]:
    return rec.body.get("metadata", {}).get("annotations") or {}

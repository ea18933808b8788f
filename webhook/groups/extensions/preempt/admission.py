"""A preemption's placement, asked before anything is evicted: each gated member's own patch
into the domain the plan frees, sent as a server dry run (dryRun=All: the API server runs its
webhooks and admission policies and stores nothing). A refusal raises refusals.Rejected, which
stops the plan with nothing evicted; the placer then says why as for any refused write. Victims
evicted for a placement the API server would refuse would be evicted for nothing (issue 36: an
install whose policy refused the placer's patch evicted 4 pods and kept the group gated).

The patch is the one enforce.place_ops sends: the group's level and domain, the member's own
lowest domain (here that of the first victim's node in the domain, where the members go), and
a rank (the member's order; the real ranks are only known once seated: the form is what
admission sees)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.extensions.preempt.state import Group
from webhook.groups.extensions.preempt.victims import Plan
from webhook.groups.framework.enforce import place_ops
from webhook.groups.model.records import PodRecord


class PodPatchApi(Protocol):
    def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        """A JSONPatch of a pod; raises refusals.Rejected when the API server refuses it.
        `dry_run`: dryRun=All, admission runs and nothing is stored."""


def admit_placement(
    api: PodPatchApi, view: CapacityView, pods: Mapping[str, PodRecord], g: Group, plan: Plan
) -> None:
    """Raises Rejected at the first member whose placement patch the API server refuses."""
    inside = view.domain_nodes(plan.level, plan.domain)
    # a victim's node in the domain (a gang victim may also run outside it), else the domain's
    where = set(inside)
    nodes = [v.node for v in plan.victims if v.node in where] + list(inside)
    hold = next((low for n in nodes if (low := view.lowest(n)) is not None), None)
    members = [pods[uid] for ref in g.pods if (uid := str(ref["metadata"]["uid"])) in pods]
    for rank, rec in enumerate(sorted(members, key=lambda r: r.name)):
        ops = place_ops(rec.body, plan.level, plan.domain, hold, rank)
        if ops is not None:
            api.patch_pod(rec.namespace, rec.name, ops, dry_run=True)

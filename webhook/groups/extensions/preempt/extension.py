"""Preemption as an extension of the placer (framework/points.py): while a group is decided the
domains held for groups it must not pass are hidden (Hide); a group that fits nowhere preempts,
or holds the domain nearest to fitting it (NothingFits); the running pods are indexed as they
come and go. The plans, holds and evictions are preempt/state.py's."""

from __future__ import annotations

from functools import partial

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Request, Waiting
from webhook.groups.decision.priority import levels
from webhook.groups.extensions.preempt.admission import admit_placement
from webhook.groups.extensions.preempt.index import as_running
from webhook.groups.extensions.preempt.state import Group, PreemptMetrics, Preemptor
from webhook.groups.framework.evictions import Evictor
from webhook.groups.framework.points import Cycle, Host, Undo
from webhook.groups.model.names import GroupKey
from webhook.groups.model.records import PodRecord, pod_ref


class Preemption(Preemptor):
    """No evictor: no preemption (a waiting group only holds its closest domain)."""

    def __init__(
        self, evictor: Evictor | None = None, metrics: PreemptMetrics | None = None
    ) -> None:
        super().__init__(evictor, lambda *_: None, lambda: 0.0, metrics)
        self.view = CapacityView()  # the placer's, once attached

    def attach(self, host: Host) -> None:
        self.view, self.event, self.clock = host.view, host.api.event, host.clock
        self.budgets = host.budgets  # the placer's PodDisruptionBudget list and watch
        # the plan's placement asked first: the members' own patches as dry runs
        self.admits = lambda g, p: admit_placement(host.api, host.view, host.pods, g, p)

    # -- inputs: the running pods, per domain and priority (index.py) --------------------------
    def relisting(self) -> None:
        self.index.reset()

    def seen(self, rec: PodRecord) -> None:
        if rec.holds and rec.gpus:
            self.index.put(as_running(rec))
        else:
            self.index.remove(rec.uid)

    def gone(self, uid: str) -> None:
        self.index.remove(uid)

    # -- one group's decision ------------------------------------------------------------------
    def hide(self, cycle: Cycle) -> Undo:
        masked = self.mask(self.view, cycle.key, cycle.gated[0].priority)
        return partial(self.unmask, self.view, masked)

    def nothing_fits(self, cycle: Cycle, request: Request, decided: Waiting) -> str:
        first, within = cycle.gated[0], cycle.within
        at = levels(self.view, request, decided.level) if decided.level else ()
        g = Group(
            cycle.key,
            first.priority,
            not first.never,
            request.members,
            (within[0],) if within is not None else at,
            tuple(pod_ref(r) for r in cycle.gated),
            within[1] if within is not None else None,  # replacements: its own domain
        )
        more = self.waiting(self.view, g) if g.levels else ""
        return more + self.held_for_others()

    def settled(self, key: GroupKey) -> bool:
        return self.done(key)

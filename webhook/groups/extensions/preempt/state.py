"""The waiting groups' preemptions: plans under way, held domains, evictions and their Events.

Transport-free: evictions go through an `Evictor` (groups/placer/kube.py: the Eviction API, so
PodDisruptionBudgets hold) and Events through the placer's API. A plan is whole before it starts:
victims.py picks a domain only where every victim's budgets allow it, and every eviction of the
plan is then tried as a dry run before the first real one. One group has at most one plan under
way and opens no second domain while victims of the first are terminating: a refusal mid-plan
stops it, and what it evicted stays held for the group, so the next plan finishes that domain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.extensions.preempt.index import RunningIndex
from webhook.groups.extensions.preempt.victims import Choice, Plan, choose, closest, describe
from webhook.groups.extensions.preempt.words import Hold, blocked_words, held_words
from webhook.groups.framework.evictions import Budgets, Evictor
from webhook.groups.model.names import GroupKey, Level

log = logging.getLogger(__name__)
BOUND = 30.0  # seconds past the victims' longest grace period before they are called stalled
RETRY = 10.0  # seconds before a domain the API server refused is tried again
HOLD = "gpufabric-hold/"  # promise ids that keep a held domain's free GPUs from other groups


@runtime_checkable
class PreemptMetrics(Protocol):
    def preempted(self, plans: int, pods: int, gpus: int) -> None: ...


Event = Callable[[Mapping[str, Any], str, str, str], None]  # (pod, reason, message, type)
# The plan's placement patches as server dry runs (preempt/admission.py); raises Rejected.
Admits = Callable[["Group", Plan], None]


@dataclass(frozen=True, slots=True)
class Ongoing:
    plan: Plan
    deadline: float  # past it, victims still terminating are reported stalled (once)
    pending: tuple[str, ...]  # victims not evicted: a refusal stopped the plan before them
    retry_at: float = 0.0  # when the domain is planned again after such a refusal
    refusal: str = ""  # the API server's words
    stalled: bool = False  # GroupPreemptionStalled was said
    generation: int = 0  # of the budgets then: a budget that changes retries at once


@dataclass(frozen=True, slots=True)
class Group:
    """What the preemption reads of the waiting group."""

    key: GroupKey
    priority: int
    may_preempt: bool  # preemptionPolicy is not Never
    members: tuple[Member, ...]
    levels: tuple[Level, ...]  # its level; for `preferred`, those above it too, in order
    pods: tuple[Mapping[str, Any], ...]  # references of its gated pods, for Events
    only: str | None = None  # a placed group's replacements: its recorded domain, at levels[0]


def ref(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid}}


class Preemptor:
    def __init__(
        self,
        evictor: Evictor | None,
        event: Event,
        clock: Callable[[], float],
        metrics: PreemptMetrics | None = None,
        admits: Admits | None = None,
    ) -> None:
        self.evictor, self.event, self.clock, self.metrics = evictor, event, clock, metrics
        self.admits = admits
        self.index = RunningIndex()
        self.budgets = Budgets()
        self.holds: dict[GroupKey, Hold] = {}
        self.ongoing: dict[GroupKey, Ongoing] = {}
        self.committed: dict[GroupKey, tuple[Level, str]] = {}  # where it evicted: finish there
        self.blocked: dict[GroupKey, set[str]] = {}  # domains where a real eviction was refused
        # domains a dry run refused: (budgets generation, until): skipped while both hold
        self.refused: dict[GroupKey, dict[str, tuple[int, float]]] = {}
        self._held: set[str] = set()  # nodes held for groups the one deciding must not pass
        self._masked: list[tuple[GroupKey, Hold]] = []

    # -- holds -------------------------------------------------------------------------------
    def mask(self, view: CapacityView, key: GroupKey, priority: int) -> list[str]:
        """Promise away the free GPUs of every domain held for a group this one must not pass
        (higher priority, or equal priority that already preempted); unmask() gives them back."""
        uids: list[str] = []
        self._held, self._masked = set(), []
        for k, h in self.holds.items():
            if k == key or h.priority < priority or (h.priority == priority and not h.preempting):
                continue
            self._masked.append((k, h))
            for n in view.domain_nodes(h.level, h.domain):
                self._held.add(n)
                f = view.free(n)
                if f > 0:
                    view.promise(HOLD + n, n, f)
                    uids.append(HOLD + n)
        return uids

    @staticmethod
    def unmask(view: CapacityView, uids: Sequence[str]) -> None:
        for uid in uids:
            view.release(uid)

    def held_for_others(self) -> str:
        """Words for a waiting message: the domains the last mask() kept from the group, and
        the groups they are held for."""
        return held_words(self._masked)

    def done(self, key: GroupKey) -> bool:
        """The group is placed or gone: its hold and plan end. True where it held a domain."""
        held = key in self.holds
        for state in (self.holds, self.ongoing, self.committed, self.blocked, self.refused):
            state.pop(key, None)
        return held

    # -- waiting -----------------------------------------------------------------------------
    def waiting(self, view: CapacityView, g: Group) -> str:
        """The group fits nowhere: go on with its preemption, or start one; what to add to the
        group's waiting message."""
        if not g.may_preempt or self.evictor is None:
            return self._hold_closest(view, g)
        ongoing = self.ongoing.get(g.key)
        if ongoing is not None:
            text = self._going_on(g, ongoing)
            if text:
                return text
        for _ in range(3):  # a dry run that refuses sends the group to the next domain
            choice = self._choose(view, g)
            if choice.plan is None:
                if g.key in self.committed and not choice.refused and not self._leaving(g.key):
                    del self.committed[g.key]  # lower pods no longer free it: start afresh
                    continue
                return self._hold_closest(view, g) + blocked_words(choice, g.levels[0])
            text = self._start(g, choice.plan)
            if text:
                return text
        return "; the API server refuses evictions its budgets allowed; retrying"

    def _choose(self, view: CapacityView, g: Group) -> Choice:
        now, generation = self.clock(), self.budgets.generation
        refused = self.refused.get(g.key, {})
        skip = {d for d, (gen, until) in refused.items() if gen == generation and now < until}
        blocked = self.blocked.get(g.key, set())
        where = self.committed.get(g.key) or ((g.levels[0], g.only) if g.only else None)
        levels = (where[0],) if where is not None else g.levels
        kept: list[Choice] = []
        for level in levels:  # `preferred` climbs only where no lower level can be freed
            choice = choose(
                view,
                self.index,
                g.members,
                level,
                g.priority,
                skip,
                blocked,
                self._held,
                self.budgets,
                where[1] if where is not None else None,
            )
            if choice.plan is not None:
                return choice
            kept.append(choice)
        return Choice(None, tuple(r for c in kept for r in c.refused))

    def _leaving(self, key: GroupKey) -> bool:
        o = self.ongoing.get(key)
        return o is not None and any(v.uid in self.index.pods for v in o.plan.victims)

    def _hold_closest(self, view: CapacityView, g: Group) -> str:
        """A group that cannot preempt holds the domain nearest to holding it against groups of
        lower priority, so that it fills up for it (kube-scheduler has no such hold: its plain
        pods need one node, not a whole domain); one that evicted somewhere holds that domain."""
        where = self.committed.get(g.key)
        if where is not None:
            self.holds[g.key] = Hold(g.priority, where[0], where[1], True)
            return ""
        self.ongoing.pop(g.key, None)
        level = g.levels[0]
        domain = g.only or closest(view, g.members, level)
        if domain is None:
            self.holds.pop(g.key, None)
        else:
            self.holds[g.key] = Hold(g.priority, level, domain, False)
        return ""

    def _going_on(self, g: Group, o: Ongoing) -> str:
        """'' when the plan is over (its victims are gone, or a refusal is due a retry)."""
        where = f"{o.plan.level} {o.plan.domain}"
        left = [v for v in o.plan.victims if v.uid in self.index.pods and v.uid not in o.pending]
        if o.pending and self.clock() < o.retry_at and self.budgets.generation == o.generation:
            return (
                f"; preempting in {where}: stopped by the API server ({o.refusal}); "
                f"{len(left)} evicted victims to go, {len(o.pending)} kept; no other "
                f"{o.plan.level} is opened"
            )
        if o.pending or not left:
            del self.ongoing[g.key]
            return ""
        if self.clock() >= o.deadline and not o.stalled:
            names = ", ".join(f"{v.namespace}/{v.name}" for v in left[:8])
            text = (
                f"group {g.key[1]}: victims in {where} did not leave within their grace period "
                f"+ {BOUND:.0f}s ({names}); waiting for them, no other {o.plan.level} is opened"
            )
            for pod in g.pods:
                self.event(pod, "GroupPreemptionStalled", text, "Warning")
            self.ongoing[g.key] = replace(o, stalled=True)
        return f"; preempting in {where}: {len(left)} of {len(o.plan.victims)} victims to go"

    def _start(self, g: Group, plan: Plan) -> str:
        """Confirm the whole plan by dry runs, then evict; '' when a dry run (or the first real
        eviction) was refused and nothing went: the domain is skipped for a while. A dry run
        of the placement that admission refuses raises Rejected: nothing is evicted either."""
        assert self.evictor is not None  # noqa: S101 - only plans with an evictor start
        where = f"{plan.level} {plan.domain}"
        for v in plan.victims:
            outcome, message = self.evictor.evict_pod(v.namespace, v.name, dry_run=True)
            if outcome == "blocked":
                return self._refused(g, plan, f"{v.namespace}/{v.name}: {message}")
        if self.admits is not None:
            self.admits(g, plan)  # the group's own patches, before the first real eviction
        text = (
            f"group {g.key[1]} (priority {g.priority}) preempts {len(plan.victims)} pods "
            f"({plan.gpus} GPUs, priority <= {plan.cost[1]}) in {where}: {describe(plan)}"
        )
        for pod in g.pods:
            self.event(pod, "GroupPreempting", text, "Normal")
        grace = max((v.grace for v in plan.victims), default=30.0)
        now = self.clock()
        pending, refusal, pods, gpus = self._evict(g, plan)
        if not pods and pending:  # refused before anything went: as a dry run refusal
            self.blocked.setdefault(g.key, set()).add(plan.domain)
            return self._refused(g, plan, refusal)
        if self.metrics:
            self.metrics.preempted(1, pods, gpus)
        self.committed[g.key] = (plan.level, plan.domain)
        self.holds[g.key] = Hold(g.priority, plan.level, plan.domain, True)
        self.ongoing[g.key] = Ongoing(
            plan, now + grace + BOUND, pending, now + RETRY, refusal, False, self.budgets.generation
        )
        if pending:
            return (
                f"; preempting in {where}: stopped after {pods} of {len(plan.victims)} "
                f"evictions ({refusal}); the rest of {where} is planned again"
            )
        return f"; preempting in {where}: {len(plan.victims)} victims evicted"

    def _refused(self, g: Group, plan: Plan, refusal: str) -> str:
        log.info(
            "eviction refused before any pod went",
            extra={"group": f"{g.key[0]}/{g.key[1]}", "domain": plan.domain, "why": refusal},
        )
        until = self.clock() + RETRY
        self.refused.setdefault(g.key, {})[plan.domain] = (self.budgets.generation, until)
        return ""

    def _evict(self, g: Group, plan: Plan) -> tuple[tuple[str, ...], str, int, int]:
        """Evict the plan's victims in order until one is refused: (the victims not evicted,
        the refusal, pods and GPUs evicted)."""
        assert self.evictor is not None  # noqa: S101 - only plans with an evictor start
        pods = gpus = 0
        for i, v in enumerate(plan.victims):
            outcome, message = self.evictor.evict_pod(v.namespace, v.name)
            if outcome == "blocked":  # a race the dry run could not see: stop at once
                refusal = f"{v.namespace}/{v.name}: {message}"
                if pods:
                    text = (
                        f"group {g.key[1]}: the API server refused evicting {refusal}; "
                        f"{pods} pods already evicted in {plan.level} {plan.domain} stay held "
                        "for the group"
                    )
                    for pod in g.pods:
                        self.event(pod, "GroupPreemptionBlocked", text, "Warning")
                return tuple(u.uid for u in plan.victims[i:]), refusal, pods, gpus
            if outcome == "evicted":
                pods, gpus = pods + 1, gpus + v.gpus
                for b in self.budgets.covering(v.namespace, v.labels):
                    self.budgets.spent(b.key, v.name)  # until the watch says so
                text = (
                    f"preempted by group {g.key[0]}/{g.key[1]} (priority {g.priority}) to free "
                    f"{plan.level} {plan.domain}"
                )
                self.event(ref(v.namespace, v.name, v.uid), "Preempted", text, "Normal")
        return (), "", pods, gpus

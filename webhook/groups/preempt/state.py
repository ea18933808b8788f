"""The waiting groups' preemptions: plans under way, held domains, evictions and their Events.

Transport-free: evictions go through an `Evictor` (groups/kube.py: the Eviction API, so
PodDisruptionBudgets hold) and Events through the placer's API. One group has at most one plan
under way; while its victims leave, the domain is held for it, and a victim that does not leave
within its grace period plus BOUND seconds sends the group to the next domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from webhook.groups.capacity import CapacityView
from webhook.groups.decision import Member
from webhook.groups.names import Level
from webhook.groups.preempt.index import GangKey, RunningIndex
from webhook.groups.preempt.victims import Plan, choose, closest, describe

BOUND = 30.0  # seconds past the victims' longest grace period before the next domain is tried
RETRY = 10.0  # seconds between two tries of evictions a PodDisruptionBudget refused
HOLD = "gpufabric-hold/"  # promise ids that keep a held domain's free GPUs from other groups
Outcome = Literal["evicted", "gone", "blocked"]


class Evictor(Protocol):
    def evict_pod(self, namespace: str, name: str) -> tuple[Outcome, str]:
        """("evicted", ""), ("gone", "") for a pod already deleted (404), or ("blocked", the
        API server's message) when a PodDisruptionBudget refuses it (429)."""
        ...


class PreemptMetrics(Protocol):
    def preempted(self, plans: int, pods: int, gpus: int) -> None: ...


Event = Callable[[Mapping[str, Any], str, str, str], None]  # (pod, reason, message, type)


@dataclass(frozen=True, slots=True)
class Hold:
    priority: int
    level: Level
    domain: str
    preempting: bool  # victims were evicted for it: groups of equal priority stay out too


@dataclass(frozen=True, slots=True)
class Ongoing:
    plan: Plan
    deadline: float
    pending: tuple[str, ...]  # victim uids a PodDisruptionBudget kept so far
    retry_at: float = 0.0  # not before: every pod event would otherwise ask again


@dataclass(frozen=True, slots=True)
class Group:
    """What the preemption reads of the waiting group."""

    key: GangKey
    priority: int
    may_preempt: bool  # preemptionPolicy is not Never
    members: tuple[Member, ...]
    levels: tuple[Level, ...]  # its level; for `preferred`, those above it too, in order
    pods: tuple[Mapping[str, Any], ...]  # references of its gated pods, for Events


def ref(namespace: str, name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid}}


class Preemptor:
    def __init__(
        self,
        evictor: Evictor | None,
        event: Event,
        clock: Callable[[], float],
        metrics: PreemptMetrics | None = None,
    ) -> None:
        self.evictor, self.event, self.clock, self.metrics = evictor, event, clock, metrics
        self.index = RunningIndex()
        self.holds: dict[GangKey, Hold] = {}
        self.ongoing: dict[GangKey, Ongoing] = {}
        self.skip: dict[GangKey, set[str]] = {}  # domains whose victims did not leave in time
        self.blocked: dict[GangKey, set[str]] = {}  # domains where a PDB refused an eviction
        self._held: set[str] = set()  # nodes held for groups the one deciding must not pass

    # -- holds -------------------------------------------------------------------------------
    def mask(self, view: CapacityView, key: GangKey, priority: int) -> list[str]:
        """Promise away the free GPUs of every domain held for a group this one must not pass
        (higher priority, or equal priority that already preempted); unmask() gives them back."""
        uids: list[str] = []
        self._held = set()
        for k, h in self.holds.items():
            if k == key or h.priority < priority or (h.priority == priority and not h.preempting):
                continue
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

    def done(self, key: GangKey) -> None:
        """The group is placed or gone: its hold and plan end."""
        self.holds.pop(key, None)
        self.ongoing.pop(key, None)
        self.skip.pop(key, None)
        self.blocked.pop(key, None)

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
        for _ in range(3):  # a PDB that refuses sends the group to another domain at once
            plan = self._choose(view, g)
            if plan is None and self.skip.pop(g.key, set()):  # all tried: start over
                continue
            if plan is None:  # nothing of lower priority frees a domain: wait as without
                return self._hold_closest(view, g)
            text = self._start(g, plan)
            if text:
                return text
        return "; PodDisruptionBudgets refuse the evictions; retrying"

    def _choose(self, view: CapacityView, g: Group) -> Plan | None:
        skip, blocked = self.skip.get(g.key, set()), self.blocked.get(g.key, set())
        for level in g.levels:  # `preferred` climbs only where no lower level can be freed
            plan = choose(view, self.index, g.members, level, g.priority, skip, blocked, self._held)
            if plan is not None:
                return plan
        return None

    def _hold_closest(self, view: CapacityView, g: Group) -> str:
        """A group that cannot preempt holds the domain nearest to holding it against groups of
        lower priority, so that it fills up for it (kube-scheduler has no such hold: its plain
        pods need one node, not a whole domain)."""
        self.ongoing.pop(g.key, None)
        level = g.levels[0]
        domain = closest(view, g.members, level)
        if domain is None:
            self.holds.pop(g.key, None)
        else:
            self.holds[g.key] = Hold(g.priority, level, domain, False)
        return ""

    def _going_on(self, g: Group, o: Ongoing) -> str:
        """'' when the plan is over (its victims are gone, or stalled): choose again."""
        left = [v for v in o.plan.victims if v.uid in self.index.pods]
        if o.pending and left and self.clock() >= o.retry_at:
            o = self._evict(g, o.plan, o.pending, o.deadline, told=frozenset(o.pending))
            if o.pending and not o.plan.cost[0]:
                self.blocked.setdefault(g.key, set()).add(o.plan.domain)
                self.ongoing.pop(g.key, None)
                return ""
            self.ongoing[g.key] = o
        where = f"{o.plan.level} {o.plan.domain}"
        if left and self.clock() < o.deadline:
            return f"; preempting in {where}: {len(left)} of {len(o.plan.victims)} victims to go"
        self.ongoing.pop(g.key, None)
        if left:
            self.skip.setdefault(g.key, set()).add(o.plan.domain)
            names = ", ".join(f"{v.namespace}/{v.name}" for v in left[:8])
            text = (
                f"group {g.key[1]}: victims in {where} did not leave within their grace period "
                f"+ {BOUND:.0f}s ({names}); trying the next {o.plan.level}"
            )
            for pod in g.pods:
                self.event(pod, "GroupPreemptionStalled", text, "Warning")
        return ""

    def _start(self, g: Group, plan: Plan) -> str:
        where = f"{plan.level} {plan.domain}"
        text = (
            f"group {g.key[1]} (priority {g.priority}) preempts {len(plan.victims)} pods "
            f"({plan.gpus} GPUs, priority <= {plan.cost[1]}) in {where}: {describe(plan)}"
        )
        for pod in g.pods:
            self.event(pod, "GroupPreempting", text, "Normal")
        self.holds[g.key] = Hold(g.priority, plan.level, plan.domain, True)
        grace = max((v.grace for v in plan.victims), default=30.0)
        o = self._evict(g, plan, tuple(v.uid for v in plan.victims), self.clock() + grace + BOUND)
        if self.metrics:
            self.metrics.preempted(1, 0, 0)
        if o.pending and not plan.cost[0]:  # first refusal here: another domain may do
            self.blocked.setdefault(g.key, set()).add(plan.domain)
            return ""
        self.ongoing[g.key] = o
        return f"; preempting in {where}: {len(plan.victims)} victims evicted"

    def _evict(
        self,
        g: Group,
        plan: Plan,
        uids: Sequence[str],
        deadline: float,
        told: frozenset[str] = frozenset(),
    ) -> Ongoing:
        pending: list[str] = []
        pods = gpus = 0
        by_uid = {v.uid: v for v in plan.victims}
        for i, uid in enumerate(uids):
            v = by_uid[uid]
            assert self.evictor is not None  # noqa: S101 - only plans with an evictor start
            outcome, message = self.evictor.evict_pod(v.namespace, v.name)
            if outcome == "blocked":
                text = (
                    f"group {g.key[1]}: a PodDisruptionBudget keeps {v.namespace}/{v.name} in "
                    f"{plan.level} {plan.domain}: {message}"
                )
                for pod in g.pods if uid not in told else ():  # once per victim
                    self.event(pod, "GroupPreemptionBlocked", text, "Warning")
                if not plan.cost[0]:  # first refusal here: evict no more, another domain may do
                    pending += uids[i:]
                    break
                pending.append(uid)
                continue
            if outcome == "evicted":
                pods, gpus = pods + 1, gpus + v.gpus
                text = (
                    f"preempted by group {g.key[0]}/{g.key[1]} (priority {g.priority}) to free "
                    f"{plan.level} {plan.domain}"
                )
                self.event(ref(v.namespace, v.name, v.uid), "Preempted", text, "Normal")
        if self.metrics and pods:
            self.metrics.preempted(0, pods, gpus)
        return Ongoing(plan, deadline, tuple(pending), self.clock() + RETRY)

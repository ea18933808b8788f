"""The group placer: from Pod and Node events to one placement per group. Transport-free.

Feed it list results and watch events (kube.py does, from the API server; tests do, from recorded
sequences), then call `reconcile()`. It keeps the capacity view, waits until every member of a
group exists (gang), asks choose.decide for a domain, seats the members in fabric order
(seating.py: ranks) and patches each member once: affinity tightened to the group's domain and
its own lowest domain, placement and rank recorded, gate removed (enforce.py). What it did is
read back from the pods themselves, so a restarted placer neither places a member twice nor
leaves a gate behind. Preemption, native gangs, IMEX channels and the partly-bound watch are
extensions (enabled.py, the one list): the placer runs their points (framework/points.py) at
each step of a decision and names none of them.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import decide
from webhook.groups.decision.decision import Member, Policy, Request, Waiting
from webhook.groups.decision.priority import OrderKey, differ, order_key
from webhook.groups.decision.seating import Seat, seat_new, seat_words
from webhook.groups.framework.enforce import parse_placement, place_ops, placement_value
from webhook.groups.framework.evictions import Budget, Budgets
from webhook.groups.framework.points import Cycle, HostApi, Points, Ready
from webhook.groups.framework.refusals import Refusals, Rejected
from webhook.groups.framework.writes import NotWritten, Placed, Runner, Write, Writes, one_by_one
from webhook.groups.model.indexes import resolve
from webhook.groups.model.names import LEVELS, GroupKey, Level
from webhook.groups.model.records import PodRecord, disagreements, member_key, pod_ref
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.inputs import Inputs
from webhook.groups.placer.recovery import outcome, seat_again
from webhook.groups.placer.said import Said

log = logging.getLogger(__name__)
# In the cluster (run_placer) the extensions' ticks (sweeps of what gone groups owned, the
# partly-bound watch, lost PodGroups) come at most this often: a burst brings a reconcile for
# almost every pod event, and a tick looks at the groups changed since (`changed`) and at
# those due. Nothing waits on them: their own bounds are seconds to a minute (PARTLY_BOUND_AFTER).
TICK_EVERY = 0.5


class PlacerApi(HostApi, Protocol):
    """Pod patches and Events: what the placer and its extensions write."""


class PlacerMetrics(Protocol):
    def decided(self, level: str, outcome: str, seconds: float) -> None: ...

    def ungated(self, gated_seconds: float, recovery: bool) -> None: ...

    def refused(self, write: str, code: int) -> None: ...


class Placer(Inputs):
    """The inputs (inputs.py) and, from them, one decision per dirty group at each reconcile."""

    def __init__(
        self,
        api: PlacerApi,
        *,
        policy: Policy = "tightest",
        clock: Callable[[], float] = time.monotonic,
        metrics: PlacerMetrics | None = None,
        extensions: Extensions | None = None,
        runner: Runner = one_by_one,
        tick_every: float = 0.0,
    ) -> None:
        """`tick_every`: seconds (of `clock`) at least between the extensions' ticks; 0: one a
        reconcile."""
        self.api, self.policy, self.clock, self.metrics = api, policy, clock, metrics
        self.writes = Writes(runner)  # a reconcile's patches, made together at its end
        self.refusals = Refusals(api.event, clock, metrics)  # groups whose write was refused
        self.view = CapacityView()
        self.budgets = Budgets()  # the cluster's PodDisruptionBudgets: evictions count them
        self.pods: dict[str, PodRecord] = {}
        self.groups: dict[GroupKey, set[str]] = {}
        self.gated_groups: dict[GroupKey, set[str]] = {}
        self.changed: set[GroupKey] = set()
        self.dirty: set[GroupKey] = set()
        self.waiting: dict[GroupKey, str] = {}  # why each group waits, now
        self.said = Said(api.event, clock)  # the waiting Events
        self._listing: dict[str, PodRecord] = {}  # a pod list in flight (pods_start)
        self._budgets: list[Budget] = []  # a PodDisruptionBudget list in flight
        self.ext = extensions or Extensions()
        self.points = Points(self.ext.ordered())  # each step of a decision runs one
        self.points.attach(self)
        self.tick_every, self._tick_at = tick_every, -math.inf  # the extensions' next tick

    # -- the work ----------------------------------------------------------------------------
    def reconcile(self, stopping: Callable[[], bool] = lambda: False) -> None:
        """Place every dirty group; once `stopping()` is true, leave the rest to the next leader."""
        if (now := self.clock()) >= self._tick_at:  # sweeps and watches over every group
            self.points.tick()
            self.changed.clear()  # the ticks have looked at them
            self._tick_at = now + self.tick_every
        self.said.due()  # groups still waiting for members a while: told now
        # groups with no gated member only settle: first, and not ordered (the order reads
        # every member of a group, and a placed group's binds bring it here one by one)
        settled = [k for k in self.dirty if k not in self.gated_groups]
        ordered = sorted((k for k in self.dirty if k in self.gated_groups), key=self.order_key)
        todo, self.dirty = settled + ordered, set()
        for i, key in enumerate(todo):
            if stopping():
                self.dirty.update(todo[i:])
                break
            if not self.refusals.due(key):  # refused a moment ago: tried again after its wait
                self.dirty.add(key)
                continue
            try:
                self._place(key)
            except Rejected as err:  # told once, said while it waits, tried again later
                gated = self._gated_refs(key)
                self.waiting[key] = self.refusals.refused(key, err, gated)
                self.dirty.add(key)
            except Exception:
                log.exception("group placement failed", extra={"group": f"{key[0]}/{key[1]}"})
                self.refusals.failed(key)
                self.dirty.add(key)
        self.writes.flush(stopping)

    def _place(self, key: GroupKey) -> None:
        if key not in self.gated_groups:  # from the index: not a pass over a placed group's
            self._settle(key)  # members at each of their binds
            return
        recs = sorted(
            (self.pods[u] for u in self.groups.get(key, ()) if self.pods[u].member),
            key=lambda r: r.name,
        )
        gated = [r for r in recs if r.gated]
        spec = gated[0].group
        assert spec is not None  # noqa: S101 - gated implies grouped
        recorded = Counter(r.placement for r in recs if not r.gated and r.placement)
        within: tuple[Level, str] | None = None
        if recorded:
            where = parse_placement(recorded.most_common(1)[0][0])
            if where is not None and where[0] in LEVELS:
                within = (where[0], where[1])
        cycle = Cycle(key, tuple(recs), tuple(gated), spec.size, within, self.writes)
        problems = disagreements(recs) + differ((r.name, r.priority, r.never) for r in recs)
        if not problems and not recorded and len(gated) < spec.size:
            self.points.incomplete(cycle)  # e.g. its PodGroup asked for, off the path
            text = f"waiting for members: {len(gated)} of {spec.size} exist"
            self._wait(key, gated, text, "GroupIncomplete", later=True)
            return
        indexed = resolve(
            spec.size,
            [(member_key(r), r.ident) for r in recs],
            {member_key(r): r.gpus for r in recs},
            {member_key(r): r.rank for r in recs if r.rank is not None},
        )
        problems = problems or list(indexed.problems)
        if len(recs) > spec.size and not problems:
            names = ", ".join(r.name for r in recs)
            problems = [f"{len(recs)} pods for group-size {spec.size}: {names}"]
        if problems:
            text = f"group {spec.name} is not placed: {'; '.join(problems)}"
            self._wait(key, gated, text, "GroupInvalid", "Warning")
            return
        request = Request(
            name=spec.name,
            members=tuple(
                Member(member_key(r), r.gpus, r.selector) for r in gated if r.selector is not None
            ),
            locality=spec.locality,
            level=spec.level,
            within=within,
        )
        adjusted = self.points.adjust(cycle, request)
        if isinstance(adjusted, str):
            self._wait(key, gated, f"group {spec.name}: {adjusted}", "GroupWaiting")
            return
        request = adjusted
        started = time.perf_counter()
        undo = self.points.hide(cycle)  # e.g. domains held for groups it may not pass
        try:
            decided = self._decide(request, recs, indexed.ranks, spec.size, indexed.unranked)
            more = ""
            if isinstance(decided, Waiting):  # e.g. it preempts
                more = self.points.nothing_fits(cycle, request, decided)
        finally:
            undo()
        took = time.perf_counter() - started
        if isinstance(decided, Waiting):
            if self.metrics:
                self.metrics.decided(decided.level or "none", "waiting", took)
            text = f"{spec.locality} group {spec.name}: {decided.message}{more}"
            self._wait(key, gated, text, "GroupWaiting")
            return
        if self.metrics:
            level = next((s.level for s in decided if s.level), None)
            self.metrics.decided(level or "none", outcome(decided, within), took)
        # every check that can make it wait, then what it needs made (a ComputeDomain, ...)
        why = self.points.permit(cycle) or self.points.prebind(cycle)
        if isinstance(why, str) and why:
            self._wait(key, gated, f"group {spec.name}: {why}", "GroupWaiting")
            return
        made = why if isinstance(why, tuple) else ()  # what PreBind is still making
        self._apply(cycle, decided, recorded=bool(recorded), made=made)

    def order_key(self, key: GroupKey) -> OrderKey:
        """The order groups are tried in (DESIGN "Priority"; decision/priority.py)."""
        return order_key(
            (r.priority, r.created, r.uid)
            for u in self.groups.get(key, ())
            if (r := self.pods.get(u)) is not None
        )

    def waiting_order(self) -> list[tuple[GroupKey, int]]:
        """The waiting groups with their priority, in the order the placer tries them."""
        return [(k, -self.order_key(k)[0]) for k in sorted(self.waiting, key=self.order_key)]

    def _decide(
        self,
        req: Request,
        recs: list[PodRecord],
        fixed: Mapping[str, int],
        size: int,
        unranked: frozenset[str] = frozenset(),
    ) -> Waiting | tuple[Seat, ...]:
        """Seats for the gated members: a new group in fabric order, or replacements back in
        the lowest domains of their ranks (plain ones take the ranks no member holds)."""
        if req.within is None:
            decision = decide(self.view, req, self.policy)
            if isinstance(decision, Waiting):
                return decision
            return seat_new(self.view, decision, req.members, fixed, unranked)
        return seat_again(self.view, req, recs, fixed, size, unranked, self.policy)

    def _apply(
        self, cycle: Cycle, seats: tuple[Seat, ...], recorded: bool, made: tuple[Ready, ...]
    ) -> None:
        """Seat the members and write it (`made`: what PreBind is still making; `recorded`:
        replacements in a placed group's domain)."""
        key = cycle.key
        by_key = {member_key(r): r for r in cycle.gated}
        self._settle(key)
        words = self.points.words(cycle, seats)
        nominations: list[Callable[[], None]] = []
        patches: list[Write] = []
        for s in seats:
            rec = by_key[s.member]
            ops = place_ops(rec.body, s.level, s.domain, s.hold, s.rank)
            if ops is None:
                continue
            value = placement_value(s.level, s.domain)
            text = f"group {key[1]} placed in {value}, {seat_words(s, seats)}{words}"
            was = Placed(rec, self.view.promised.get(rec.uid), text, s.moved, recorded)
            # counted as placed now, so the next group is decided around it; written with the
            # reconcile's other writes (writes.py), and undone if the API server refuses it
            self.set_pod(replace(rec, gated=False, placement=value, rank=s.rank))
            self.writes.written(self.pods[rec.uid])  # its events until the answer: older
            self.view.promise(rec.uid, s.node, rec.gpus)
            self.points.reserve(self.pods[rec.uid], s.node)  # e.g. its IMEX channel is taken
            patches.append(
                Write(
                    partial(self.api.patch_pod, rec.namespace, rec.name, ops),
                    partial(self._patched, key, was),
                )
            )
            if self.points.nominates(rec):
                nominations.append(partial(self.api.nominate, rec.namespace, rec.name, s.node))
        self._write(nominations, patches, made)

    def _write(
        self, nominations: list[Callable[[], None]], patches: list[Write], made: tuple[Ready, ...]
    ) -> None:
        """A group's writes: once what PreBind is making (`made`) is made, its members'
        nominations (if any) all at once, then, once every one is answered, its patches all at
        once. Why in steps: the PodGroup exists before any gate goes (DESIGN), and no member
        holds a nomination for a group that may still wait for it; kube-scheduler must see a
        member's nomination before its gate goes, and a member it sees ungated while a sibling
        is still gated it tries alone, fails, and (rate limited) writes its status and the
        PodGroup's for nothing: patches sent together land close together. Where something was
        not made, no write goes: each patch is answered with why (undone, the group decided
        again; a refusal told as a refused patch's)."""
        if made:
            left = [len(made)]
            why_not: list[Exception | None] = [None]

            def ready(why: Exception | None) -> None:
                why_not[0] = why_not[0] or why
                left[0] -= 1
                if left[0]:
                    return
                if (why := why_not[0]) is None:
                    self._write(nominations, patches, ())
                else:
                    for w in patches:
                        w.done(why)

            for wait in made:
                wait(ready)
            return
        if not nominations:
            for w in patches:
                self.writes.add(w.call, w.done)
            return
        count = [len(nominations)]

        def answered(_: object) -> None:  # a nomination is best effort: any answer will do
            count[0] -= 1
            if not count[0]:
                for w in patches:
                    self.writes.add(w.call, w.done)

        for nominate in nominations:
            self.writes.add(nominate, answered)

    def _patched(self, key: GroupKey, was: Placed, result: object) -> None:
        """A member's patch answered: told with Events, or undone (`was`: as it was before)."""
        rec = was.rec
        if not isinstance(result, Exception):
            self.refusals.cleared(key)
            if (now := self.pods.get(rec.uid)) is not None:
                self.writes.written(now)
            if self.metrics:
                self.metrics.ungated(self.clock() - rec.seen, was.recovery)
            self.api.event(pod_ref(rec), "GroupPlaced", was.text, "Normal")
            if was.moved:
                self.api.event(pod_ref(rec), "GroupRankMoved", was.moved, "Warning")
            return
        self.writes.forget(rec.uid)
        if rec.uid in self.pods:
            self.set_pod(rec)  # still gated: decided again
        if was.promised is not None:  # its room as it was (a seat written before)
            self.view.promise(rec.uid, *was.promised)
        else:
            self.view.release(rec.uid)
        self.points.unreserve(rec)
        self.dirty.add(key)
        if isinstance(result, Rejected):  # told once, said while it waits, tried again later
            if self.refusals.due(key):  # the batch's first refusal of the group is the one told
                gated = self._gated_refs(key)
                self.waiting[key] = self.refusals.refused(key, result, gated)
        elif not isinstance(result, NotWritten) and self.refusals.due(key):  # once a batch
            extra = {"group": f"{key[0]}/{key[1]}", "pod": rec.name, "error": str(result)}
            log.error("group placement failed", extra=extra)
            self.refusals.failed(key)

    def _settle(self, key: GroupKey) -> None:
        """The group is placed: it waits no more, and what it held while it waited ends."""
        self.waiting.pop(key, None)
        if self.points.settled(key):
            self.retry_all()  # the domain kept for it while it waited is the others' again
        self.said.settled(key)

    def _gated_refs(self, key: GroupKey) -> list[dict[str, Any]]:
        """The group's gated members, as an Event names them (from the index, inputs.py)."""
        return [pod_ref(self.pods[u]) for u in self.gated_groups.get(key, ())]

    def _wait(
        self,
        key: GroupKey,
        gated: list[PodRecord],
        message: str,
        reason: str,
        kind: str = "Normal",
        later: bool = False,
    ) -> None:
        """Record why the group waits; tell its pods when that changed (said.py; `later`: only
        if it still waits so a moment later)."""
        self.waiting[key] = message
        tell = self.said.tell_later if later else self.said.tell
        tell(key, [pod_ref(r) for r in gated], reason, message, kind)

"""What `explain` says about priority offline: the running pods it is given (they hold GPUs and
may be victims), the group's would-be preemption with the PodDisruptionBudgets it would consult,
and the waiting groups in the placer's order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Member
from webhook.groups.extensions.preempt.index import RunningIndex, as_running
from webhook.groups.extensions.preempt.victims import choose, describe
from webhook.groups.extensions.preempt.words import SHOWN
from webhook.groups.framework.evictions import Budgets, budget_of
from webhook.groups.model.names import Level
from webhook.groups.model.records import pod_record


def running(view: CapacityView, pods: Iterable[Mapping[str, Any]]) -> RunningIndex:
    """Bound, non-terminal pods: their GPUs taken in the view, and indexed by priority."""
    index = RunningIndex()
    for obj in pods:
        rec = pod_record(obj, 0.0)
        if not rec.holds or not rec.gpus:
            continue
        view.put_pod(rec.uid, rec.node, rec.gpus, True)
        index.put(as_running(rec))
    return index


def budgets_of(objs: Iterable[Mapping[str, Any]]) -> Budgets:
    budgets = Budgets()
    budgets.reset(b for obj in objs if (b := budget_of(obj)) is not None)
    return budgets


def preemption_lines(
    view: CapacityView,
    index: RunningIndex,
    pod: Mapping[str, Any],
    members: tuple[Member, ...],
    level: Level,
    budgets: Budgets,
) -> list[str]:
    spec = pod.get("spec") or {}
    rec = pod_record(pod, 0.0)
    if spec.get("preemptionPolicy") == "Never":
        return ["  preemption: none (preemptionPolicy Never)"]
    choice = choose(view, index, members, level, rec.priority, budgets=budgets)
    plan, lines = choice.plan, []
    if plan is not None:
        lines.append(
            f"  preemption: would evict {len(plan.victims)} pods ({plan.gpus} GPUs, priority <= "
            f"{plan.cost[1]}) in {level} {plan.domain}: {describe(plan)}"
        )
        for u in plan.budgets:
            lines.append(
                f"    budget {u.namespace}/{u.name}: allows {u.allowed}, the plan wants "
                f"{u.wanted}: allows it"
            )
    elif choice.refused:
        lines.append(
            f"  preemption: none: every {level} that pods of priority < {rec.priority} would "
            "free is kept by a PodDisruptionBudget; nothing would be evicted"
        )
    else:
        lines.append(f"  preemption: no {level} is freed by pods of priority < {rec.priority}")
    for r in choice.refused[:SHOWN]:
        for u in r.budgets:
            lines.append(f"    budget {u.words()} in {level} {r.domain}: blocks it")
    if len(choice.refused) > SHOWN:
        lines.append(f"    ... {len(choice.refused) - SHOWN} more {level}s kept by budgets")
    return lines


def waiting_lines(pods: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]) -> list[str]:
    """The gated groups among the pods (and this pod's), highest priority first, then oldest."""
    first: dict[tuple[str, str], tuple[int, str, str]] = {}
    for obj in [*pods, pod]:
        rec = pod_record(obj, 0.0)
        if rec.group is None or not (rec.gated or obj is pod) or not rec.member:
            continue
        key = (rec.namespace, rec.group.name)
        mine = (-rec.priority, rec.created, rec.uid)
        first[key] = min(first.get(key, mine), mine)
    if len(first) < 2:
        return []
    me = pod_record(pod, 0.0)
    own = (me.namespace, me.group.name if me.group is not None else "")
    lines = ["  waiting groups, in the order the placer tries them:"]
    for key, (p, created, _) in sorted(first.items(), key=lambda kv: kv[1]):
        mark = "  <- this group" if key == own else ""
        lines.append(f"    {key[0]}/{key[1]}: priority {-p}, first created {created or '?'}{mark}")
    return lines

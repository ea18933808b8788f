"""The group section of `explain`: the level a grouped pod's group goes to and, for each domain of
that level, its free GPUs and why it does or does not fit. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import NO_LABELS, NO_NVLINK, candidates, chosen_level, decide
from webhook.groups.decision.decision import Member, Placed, Request
from webhook.groups.decision.inside import fewest_possible
from webhook.groups.decision.seating import rank_runs, seat_new
from webhook.groups.extensions.imex.explain import domain_lines
from webhook.groups.extensions.preempt.offline import (
    budgets_of,
    preemption_lines,
    running,
    waiting_lines,
)
from webhook.groups.model.names import NVLINK_LEVEL
from webhook.groups.model.objects import pod_gpus
from webhook.groups.model.pods import parse_group
from webhook.groups.model.selector import selector_of


def group_section(
    pod: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
    budgets: Iterable[Mapping[str, Any]] = (),
) -> list[str]:
    """Lines for explain; [] when the pod is not in a group. `nodes` are Node objects, `pods` Pod
    objects given with them: the bound ones hold their GPUs (and may be preempted), the gated
    group members are the waiting groups; `budgets` PodDisruptionBudgets, which a preemption
    counts."""
    group, problems = parse_group((pod.get("metadata") or {}).get("annotations") or {})
    if problems:
        return ["", "Group: " + "; ".join(problems)]
    if group is None:
        return []
    view = CapacityView()
    view.replace_nodes(nodes)
    pods = list(pods)
    index = running(view, pods)
    spec = pod.get("spec") or {}
    gpus = pod_gpus(spec)
    selector = selector_of(spec)
    members = tuple(Member(f"member-{i}", gpus, selector) for i in range(group.size))
    request = Request(group.name, members, group.locality, group.level)
    imex = domain_lines(pod, view, request, pods)  # IMEX channel: the placer's request, words
    if imex is not None:
        request, members = imex[0], imex[0].members
    level = chosen_level(view, request)
    head = (
        f"Group {group.name}: {group.size} pods x {gpus} GPUs = {group.size * gpus} GPUs, "
        f"locality {group.locality}, level {group.level}"
    )
    if level is None:
        return ["", head, f"  {NO_NVLINK if group.level == NVLINK_LEVEL else NO_LABELS}"]
    lines = ["", f"{head} -> {level}", *(imex[1] if imex else [])]
    for c in candidates(view, members, level):
        mark = "fits" if c.fits else "no  "
        lines.append(f"  [{mark}] {level} {c.domain}: {c.free} free GPUs; {c.why}")
    decision = decide(view, request)
    if isinstance(decision, Placed):
        where = ", ".join(f"{decision.level}={d}" for d in decision.domains)
        lines.append(f"  decision: {where or 'no domain (no network labels)'}")
        seats = seat_new(view, decision, members, {})
        by_rank = sorted((s for s in seats if s.rank is not None), key=lambda s: s.rank or 0)
        lows = list(dict.fromkeys(f"{s.hold[0]} {s.hold[1]}" for s in by_rank if s.hold))
        fewest = sum(
            fewest_possible(view, decision.level, d, members, view.free) or 0
            for d in decision.domains
            if decision.level is not None
        )
        used = ", ".join(lows[:8]) + (f", ... {len(lows) - 8} more" if len(lows) > 8 else "")
        lines.append(f"  lowest domains: {len(lows)} ({used}); fewest that hold it: {fewest}")
        lines.append(f"  ranks: {rank_runs(seats)}")
    else:
        lines.append(f"  decision: wait: {decision.message}")
        if decision.level is not None:
            lines += preemption_lines(
                view, index, pod, members, decision.level, budgets_of(budgets)
            )
    return lines + waiting_lines(pods, pod)

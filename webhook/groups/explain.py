"""The group section of `explain`: the level a grouped pod's group goes to and, for each domain of
that level, its free GPUs and why it does or does not fit. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.groups.admit import parse_group
from webhook.groups.capacity import CapacityView, pod_gpus
from webhook.groups.choose import (
    NO_LABELS,
    NO_NVLINK,
    Member,
    Placed,
    Request,
    candidates,
    chosen_level,
    decide,
)
from webhook.groups.names import NVLINK_LEVEL
from webhook.groups.preempt.offline import preemption_line, running, waiting_lines
from webhook.groups.seating import Seat, seat_new
from webhook.groups.selector import selector_of


def group_section(
    pod: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
) -> list[str]:
    """Lines for explain; [] when the pod is not in a group. `nodes` are Node objects, `pods` Pod
    objects given with them: the bound ones hold their GPUs (and may be preempted), the gated
    group members are the waiting groups."""
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
    level = chosen_level(view, request)
    head = (
        f"Group {group.name}: {group.size} pods x {gpus} GPUs = {group.size * gpus} GPUs, "
        f"locality {group.locality}, level {group.level}"
    )
    if level is None:
        return ["", head, f"  {NO_NVLINK if group.level == NVLINK_LEVEL else NO_LABELS}"]
    lines = ["", f"{head} -> {level}"]
    for c in candidates(view, members, level):
        mark = "fits" if c.fits else "no  "
        lines.append(f"  [{mark}] {level} {c.domain}: {c.free} free GPUs; {c.why}")
    decision = decide(view, request)
    if isinstance(decision, Placed):
        where = ", ".join(f"{decision.level}={d}" for d in decision.domains)
        lines.append(f"  decision: {where or 'no domain (no network labels)'}")
        lines.append(f"  ranks: {rank_runs(seat_new(view, decision, members, {}))}")
    else:
        lines.append(f"  decision: wait: {decision.message}")
        if decision.level is not None:
            lines.append(preemption_line(view, index, pod, members, decision.level))
    return lines + waiting_lines(pods, pod)


def rank_runs(seats: tuple[Seat, ...]) -> str:
    """'leaf leaf-2: 0-3; leaf leaf-3: 4-7': each lowest domain with its consecutive ranks."""
    runs: list[tuple[str, int, int]] = []
    for s in sorted(seats, key=lambda s: s.rank):
        where = f"{s.hold[0]} {s.hold[1]}" if s.hold else "no domain"
        if runs and runs[-1][0] == where and runs[-1][2] == s.rank - 1:
            runs[-1] = (where, runs[-1][1], s.rank)
        else:
            runs.append((where, s.rank, s.rank))
    return "; ".join(f"{w}: {a}" if a == b else f"{w}: {a}-{b}" for w, a, b in runs)

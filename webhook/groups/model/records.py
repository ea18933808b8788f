"""A pod as the placer keeps it: the few fields it decides on, read once as the pod arrives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.model.indexes import PLAIN, Ident, ident_of, natural
from webhook.groups.model.names import ANN_PLACEMENT, ANN_RANK, GATE
from webhook.groups.model.objects import pod_gpus
from webhook.groups.model.pods import (
    GroupSpec,
    Labels,
    Owner,
    claimed_templates,
    controller_of,
    kueue_managed,
    labels_of,
    named_group,
    nominated_node,
    parse_group,
    scheduler_message,
)
from webhook.groups.model.selector import Selector, selector_of


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    node: str
    gpus: int
    holds: bool  # counts against its node's GPUs (bound, not terminal)
    member: bool  # counts as a group member (not terminal, not being deleted)
    group: GroupSpec | None  # None: not grouped, or Kueue's
    gated: bool  # still carries our gate
    placement: str  # the recorded "<level>=<domain>", "none", or ""
    selector: Selector | None
    body: Mapping[str, Any]  # what place_ops reads: annotations, affinity, gates
    seen: float  # when the placer first saw it gated
    ident: Ident = PLAIN  # its own index, if its controller gives it one
    rank: int | None = None  # the recorded gpufabric.io/rank
    priority: int = 0  # spec.priority (admission sets it from priorityClassName)
    never: bool = False  # spec.preemptionPolicy: Never
    created: str = ""  # metadata.creationTimestamp (RFC 3339: sorts as text)
    grace: float = 30.0  # spec.terminationGracePeriodSeconds
    templates: tuple[str, ...] = ()  # ResourceClaimTemplates it claims (IMEX channel: imex/)
    owner: Owner | None = None  # its controller (a ComputeDomain's ownerReference)
    labels: Labels = ()  # sorted, shared between pods with the same (PodDisruptionBudgets)
    nominated: str = ""  # status.nominatedNodeName of a pending pod (the scheduler keeps room)
    pod_group: str = ""  # the PodGroup it names (spec.schedulingGroup; native gang: gang/)
    unschedulable: str = ""  # kube-scheduler's PodScheduled=False message (framework/binding.py)


def pod_record(obj: Mapping[str, Any], now: float) -> PodRecord:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = status.get("phase")
    terminal = phase in ("Succeeded", "Failed")
    annotations = meta.get("annotations") or {}
    group, _ = parse_group(annotations)
    if group is not None and kueue_managed(obj):
        group = None
    gated = any((g or {}).get("name") == GATE for g in spec.get("schedulingGates") or [])
    node = str(spec.get("nodeName") or "")
    grouped = group is not None
    rank = str(annotations.get(ANN_RANK) or "") if grouped else ""
    return PodRecord(
        uid=str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        node=node,
        gpus=pod_gpus(spec),
        holds=bool(node) and not terminal,
        member=not terminal and not meta.get("deletionTimestamp"),
        group=group,
        gated=gated and grouped,
        placement=str(annotations.get(ANN_PLACEMENT) or ""),
        selector=selector_of(spec) if grouped else None,
        body={
            "metadata": {"annotations": dict(annotations)},
            "spec": {k: spec[k] for k in ("affinity", "schedulingGates") if k in spec},
        }
        if grouped
        else {},
        seen=now,
        ident=ident_of(meta.get("labels") or {}, annotations) if grouped else PLAIN,
        rank=natural(rank),
        priority=_int(spec.get("priority")),
        never=spec.get("preemptionPolicy") == "Never",
        created=str(meta.get("creationTimestamp") or ""),
        grace=float(_int(spec.get("terminationGracePeriodSeconds"), 30)),
        templates=claimed_templates(spec),  # every pod: a lone one may hold an IMEX channel
        owner=controller_of(meta) if grouped else None,
        labels=labels_of(meta.get("labels")),
        nominated="" if node else nominated_node(status),
        pod_group=named_group(spec) if grouped else "",
        unschedulable=scheduler_message(status) if grouped and not node else "",
    )


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def member_key(rec: PodRecord) -> str:
    return f"{rec.namespace}/{rec.name}"


def disagreements(recs: list[PodRecord]) -> list[str]:
    """Members that do not ask for the same group: size, level or locality, naming the pods."""
    says: dict[tuple[int, str, str], list[str]] = {}
    for r in recs:
        if r.group is not None:
            g = r.group
            says.setdefault((g.size, g.level, g.locality), []).append(r.name)
    if len(says) < 2:
        return []
    parts = [
        f"{', '.join(names)}: size {size}, level {level}, locality {locality}"
        for (size, level, locality), names in sorted(says.items())
    ]
    return ["members disagree on the group: " + "; ".join(parts)]


def pod_ref(rec: PodRecord) -> dict[str, Any]:
    return {"metadata": {"name": rec.name, "namespace": rec.namespace, "uid": rec.uid}}

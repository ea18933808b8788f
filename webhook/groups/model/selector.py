"""A pod's hard node constraints, evaluated the way kube-scheduler does. Pure.

nodeSelector and required node affinity through webhook.kube.nodeselector (the scheduler's
semantics, shared with explain); plus taints with effect NoSchedule or NoExecute that the pod
does not tolerate (core/v1 Toleration.ToleratesTaint). A Selector carries a signature so that the
placer evaluates each distinct pod shape once per node, not once per pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.kube import nodeselector


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal (default) | Exists
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        if self.effect and self.effect != taint.get("effect"):
            return False
        if self.key and self.key != taint.get("key"):
            return False
        if self.operator == "Exists":
            return True
        return self.value == str(taint.get("value") or "")


@dataclass(frozen=True, slots=True)
class Selector:
    """Everything about a pod that decides which nodes it may land on (besides resources)."""

    spec: Mapping[
        str, Any
    ]  # only nodeSelector and affinity, as webhook.kube.nodeselector reads them
    tolerations: tuple[Toleration, ...]
    signature: str  # equal signature -> equal verdict on every node (for memoizing)

    def admits(
        self, name: str, labels: Mapping[str, str], taints: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        if not nodeselector.pod_admits(self.spec, labels, name):
            return False
        return all(self._tolerated(t) for t in taints)

    def _tolerated(self, taint: Mapping[str, Any]) -> bool:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            return True  # PreferNoSchedule only lowers the score
        return any(t.tolerates(taint) for t in self.tolerations)


def selector_of(spec: Mapping[str, Any]) -> Selector:
    keep = {k: spec[k] for k in ("nodeSelector", "affinity") if spec.get(k) is not None}
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or []
        if isinstance(t, Mapping)
    )
    node_aff = (keep.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_aff.get(nodeselector.REQUIRED)
    tols = [[t.key, t.operator, t.value, t.effect] for t in tolerations]
    signature = json.dumps([keep.get("nodeSelector"), required, tols], sort_keys=True, default=str)
    return Selector({"spec": keep}, tolerations, signature)


Facts = tuple[str, Mapping[str, str], Sequence[Mapping[str, Any]]]  # a node's name, labels, taints


def reads(selector: Selector) -> tuple[str, ...] | None:
    """The node label keys the selector's verdict depends on (besides taints); None when it
    depends on more (matchFields name the node itself, or a shape only admits() reads)."""
    spec = selector.spec.get("spec") or {}
    wanted = spec.get("nodeSelector")
    keys = [str(k) for k in wanted] if isinstance(wanted, Mapping) else []
    for t in nodeselector.required_terms(selector.spec) or ():
        if not isinstance(t, Mapping) or t.get("matchFields"):
            return None
        exprs = t.get("matchExpressions") or []
        if not isinstance(exprs, list) or not all(isinstance(e, Mapping) for e in exprs):
            return None
        keys += [e["key"] for e in exprs if isinstance(e.get("key"), str)]
    return tuple(dict.fromkeys(keys))


def admitting(selector: Selector, nodes: Iterable[Facts]) -> set[str]:
    """Names of the nodes the selector admits, judging each distinct combination of the labels
    it reads and the node's taints once (a 65,536-node fleet has a handful of them)."""
    keys = reads(selector)
    if keys is None:
        return {name for name, labels, taints in nodes if selector.admits(name, labels, taints)}
    verdicts: dict[tuple[Any, ...], bool] = {}
    out = set()
    for name, labels, taints in nodes:
        seen = tuple(map(labels.get, keys)), _taints_key(taints) if taints else ()
        ok = verdicts.get(seen)
        if ok is None:
            ok = verdicts[seen] = selector.admits(name, labels, taints)
        if ok:
            out.add(name)
    return out


def _taints_key(taints: Sequence[Mapping[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple((t.get("key"), t.get("value"), t.get("effect")) for t in taints)

"""A pod's hard node constraints, evaluated the way kube-scheduler does. Pure.

nodeSelector (every key equal), required node affinity (terms ORed, expressions ANDed; In, NotIn,
Exists, DoesNotExist, Gt, Lt; matchFields on metadata.name) and taints with effect NoSchedule or
NoExecute that the pod does not tolerate. Sources: kubernetes/component-helpers
scheduling/corev1/nodeaffinity, apimachinery labels/selector.go, shared/notes/k8s_placement.md 4.1.
A term the scheduler cannot parse (Gt with a non-integer, In without values) matches no node: the
real scheduler then never places the pod, and the placer must not pretend otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_INT64 = re.compile(r"[+-]?[0-9]+")  # Go strconv.ParseInt(s, 10, 64): sign, digits, no "_"
_MAX = 2**63 - 1
_MIN = -(2**63)


def parse_int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    value = int(text, 10)
    return value if _MIN <= value <= _MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, value: str | None) -> bool:
        op, values = self.operator, self.values
        if op == "In":
            return value is not None and value in values
        if op == "NotIn":
            return value is None or value not in values  # nodes without the label match NotIn
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and len(values) == 1:
            have, bound = parse_int64(value), parse_int64(values[0])
            if have is None or bound is None:
                return False
            return have > bound if op == "Gt" else have < bound
        return False

    @property
    def valid(self) -> bool:
        if self.operator in ("In", "NotIn"):
            return bool(self.values)
        if self.operator in ("Exists", "DoesNotExist"):
            return not self.values
        if self.operator in ("Gt", "Lt"):
            return len(self.values) == 1 and parse_int64(self.values[0]) is not None
        return False


@dataclass(frozen=True, slots=True)
class Term:
    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]  # key metadata.name, In/NotIn with one value

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no objects (nodeaffinity.go)
        return all(r.matches(labels.get(r.key)) for r in self.expressions) and all(
            r.key == "metadata.name" and r.matches(name) for r in self.fields
        )


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

    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...] | None  # None: no required node affinity
    tolerations: tuple[Toleration, ...]
    signature: str  # equal signature -> equal verdict on every node (for memoizing)

    def admits(
        self, name: str, labels: Mapping[str, str], taints: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        if self.terms is not None and not any(t.matches(name, labels) for t in self.terms):
            return False
        return all(self._tolerated(t) for t in taints)

    def _tolerated(self, taint: Mapping[str, Any]) -> bool:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            return True  # PreferNoSchedule only lowers the score
        return any(t.tolerates(taint) for t in self.tolerations)


def _requirements(items: object) -> tuple[Requirement, ...]:
    out = []
    for e in items if isinstance(items, list) else []:
        if isinstance(e, Mapping):
            values = e.get("values") or []
            out.append(
                Requirement(
                    str(e.get("key", "")),
                    str(e.get("operator", "")),
                    tuple(str(v) for v in values) if isinstance(values, list) else (),
                )
            )
    return tuple(out)


def required_terms(spec: Mapping[str, Any]) -> list[Any] | None:
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(req, Mapping):
        return None
    terms = req.get("nodeSelectorTerms")
    return list(terms) if isinstance(terms, list) else []


def selector_of(spec: Mapping[str, Any]) -> Selector:
    raw_terms = required_terms(spec)
    terms: tuple[Term, ...] | None = None
    if raw_terms is not None:
        built = []
        for t in raw_terms:
            raw = t if isinstance(t, Mapping) else {}
            term = Term(
                _requirements(raw.get("matchExpressions")), _requirements(raw.get("matchFields"))
            )
            if all(r.valid for r in (*term.expressions, *term.fields)):
                built.append(term)
            else:
                built.append(Term((), ()))  # unparseable: the scheduler rejects every node
        terms = tuple(built)
    node_selector = spec.get("nodeSelector") or {}
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
    ns = tuple(sorted((str(k), str(v)) for k, v in node_selector.items()))
    tols = [[t.key, t.operator, t.value, t.effect] for t in tolerations]
    signature = json.dumps([ns, raw_terms, tols], sort_keys=True, default=str)
    return Selector(ns, terms, tolerations, signature)

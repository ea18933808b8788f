"""Kubernetes NodeSelector semantics, evaluated against one node's labels and name. Pure.

The kube-scheduler's rules (component-helpers nodeaffinity, apimachinery labels.Requirement):
- `In`: label present and its value in `values`; `NotIn`: label absent or value not in `values`
  (nodes without the label match NotIn); `Exists` / `DoesNotExist`: key present / absent.
- `Gt` / `Lt`: label present and both sides parse as base-10 int64 (strconv.ParseInt), strictly
  greater / less; a label that is not an integer does not match.
- Requirements in a term (matchExpressions and matchFields) are ANDed; terms are ORed; an empty
  term matches nothing; `spec.nodeSelector` must hold as well.
- matchFields knows only `metadata.name`, with `In` / `NotIn` and exactly one value.
A requirement the scheduler could not parse (unknown operator, wrong number of values, Gt with a
non-integer) matches nothing here: the scheduler rejects the term and never places the pod by it.

Each check returns a Verdict whose `why` says, in words, what the node has against what was asked,
so `explain` and the group placer can tell a person which requirement fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"  # in spec.affinity.nodeAffinity
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_INT = re.compile(r"[+-]?[0-9]+")
NODE_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    why: str  # "key In [a, b]: node has key=c" and the like


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign, digits only, within int64; else None."""
    if not _INT.fullmatch(text):
        return None
    number = int(text, 10)
    return number if INT64_MIN <= number <= INT64_MAX else None


def expr_values(expr: Mapping[str, Any]) -> list[str] | None:
    """An expression's values; None when the scheduler would refuse them (not a list of
    strings)."""
    raw = expr.get("values")
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        return None
    return list(raw)


def _show(key: str, op: str, values: Sequence[str]) -> str:
    return f"{key} {op} [{', '.join(values)}]" if values else f"{key} {op}"


def requirement(expr: Mapping[str, Any], labels: Mapping[str, str]) -> Verdict:
    """One matchExpressions entry against a node's labels."""
    key, op, values = expr.get("key"), expr.get("operator"), expr_values(expr)
    if not isinstance(key, str) or not isinstance(op, str) or values is None:
        return Verdict(False, f"unusable requirement {dict(expr)!r}")
    shown = _show(key, op, values)
    have = labels.get(key)
    has = f"node has {key}={have}" if have is not None else f"node has no label {key}"
    if op in ("In", "NotIn"):
        if not values:
            return Verdict(False, f"{shown}: {op} needs at least one value")
        inside = have is not None and have in values
        return Verdict(inside if op == "In" else not inside, f"{shown}: {has}")
    if op in ("Exists", "DoesNotExist"):
        if values:
            return Verdict(False, f"{shown}: {op} takes no values")
        return Verdict((have is not None) == (op == "Exists"), f"{shown}: {has}")
    if op in ("Gt", "Lt"):
        bound = parse_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return Verdict(False, f"{shown}: {op} needs exactly one int64 value")
        number = parse_int64(have) if have is not None else None
        if number is None:
            return Verdict(False, f"{shown}: {has}" + (", not an integer" if have else ""))
        return Verdict(number > bound if op == "Gt" else number < bound, f"{shown}: {has}")
    return Verdict(False, f"{shown}: unknown operator {op!r}")


def field(expr: Mapping[str, Any], node_name: str) -> Verdict:
    """One matchFields entry: only metadata.name with In/NotIn and exactly one value."""
    key, op, values = expr.get("key"), expr.get("operator"), expr_values(expr)
    if key != NODE_NAME_FIELD or op not in ("In", "NotIn") or values is None or len(values) != 1:
        return Verdict(False, f"unusable field requirement {dict(expr)!r}")
    inside = node_name == values[0]
    shown = _show(NODE_NAME_FIELD, str(op), values)
    return Verdict(inside if op == "In" else not inside, f"{shown}: node is {node_name}")


def term(t: Mapping[str, Any], labels: Mapping[str, str], node_name: str = "") -> list[Verdict]:
    """Every requirement of one nodeSelectorTerm; the term holds when all are ok and there is at
    least one (an empty term matches nothing)."""
    exprs, fields = t.get("matchExpressions") or [], t.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list):
        return [Verdict(False, f"unusable term {dict(t)!r}")]
    out = [
        requirement(e, labels) if isinstance(e, Mapping) else Verdict(False, f"unusable {e!r}")
        for e in exprs
    ]
    out += [
        field(e, node_name) if isinstance(e, Mapping) else Verdict(False, f"unusable {e!r}")
        for e in fields
    ]
    return out or [Verdict(False, "an empty nodeSelectorTerm matches no node")]


def term_holds(verdicts: Sequence[Verdict]) -> bool:
    return all(v.ok for v in verdicts)


def terms(
    ts: Sequence[Any], labels: Mapping[str, str], node_name: str = ""
) -> tuple[bool, list[list[Verdict]]]:
    """nodeSelectorTerms (ORed): whether any term holds, and every term's verdicts."""
    checked = [
        term(t, labels, node_name) if isinstance(t, Mapping) else [Verdict(False, f"{t!r}")]
        for t in ts
    ]
    return any(term_holds(v) for v in checked), checked


def node_selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> list[Verdict]:
    """spec.nodeSelector: every key must be present with exactly that value."""
    out = []
    for key, want in selector.items():
        have = labels.get(str(key))
        has = f"node has {key}={have}" if have is not None else f"node has no label {key}"
        out.append(Verdict(have is not None and have == want, f"nodeSelector {key}={want}: {has}"))
    return out


def required_terms(pod: Mapping[str, Any]) -> list[Any] | None:
    """The pod's required nodeSelectorTerms, or None when it has no required node affinity."""
    # `dict | Mapping`: a decoded pod's dicts pass at the exact-type check (admission runs this).
    spec = pod.get("spec")
    return affinity_terms(spec.get("affinity")) if isinstance(spec, dict | Mapping) else None


def affinity_terms(affinity: Any) -> list[Any] | None:
    """required_terms for a pod's spec.affinity, for a caller that has read it already."""
    node_aff = affinity.get("nodeAffinity") if isinstance(affinity, dict | Mapping) else None
    required = node_aff.get(REQUIRED) if isinstance(node_aff, dict | Mapping) else None
    if not isinstance(required, dict | Mapping):
        return None
    ts = required.get("nodeSelectorTerms")
    return list(ts) if isinstance(ts, list) else []


def pod_admits(pod: Mapping[str, Any], labels: Mapping[str, str], node_name: str = "") -> bool:
    """Does the pod's nodeSelector and required node affinity admit a node with these labels?"""
    spec = pod.get("spec")
    selector = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
    if isinstance(selector, Mapping) and not term_holds(node_selector(selector, labels)):
        return False
    ts = required_terms(pod)
    return ts is None or terms(ts, labels, node_name)[0]

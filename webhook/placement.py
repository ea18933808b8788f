"""(pod, Requirements, node groups) -> mutated pod + warnings. Pure.

Required -> requiredDuringScheduling expressions ANDed into every existing nodeSelectorTerm (terms
are ORed; a new term would loosen the pod). Preferred -> weighted preferred terms. Integers use
`Gt n-1`. Every addition is check-before-add, so applying twice gives the same pod.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common import api
from common.model import DISTANCE_ORDER
from webhook import cufile
from webhook.cache import Group
from webhook.requirements import Requirements

Expr = dict[str, Any]  # a NodeSelectorRequirement


@dataclass(frozen=True, slots=True)
class Settings:
    cufile_policy: str | None = None  # cufile.json text, checked (webhook.cufile)
    inject_nccl_tuning: bool = False
    inject_nccl_ib_hca: bool = True


@dataclass(frozen=True, slots=True)
class Need:
    """One node requirement with the words that explain it."""

    expr: Expr
    why: str


@dataclass(frozen=True, slots=True)
class Plan:
    required: tuple[Need, ...]
    preferred: tuple[tuple[int, tuple[Need, ...]], ...]


@dataclass
class Decision:
    pod: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    candidates: tuple[Group, ...] = ()


def _gt(key: str, at_least: int) -> Expr:
    return {"key": key, "operator": "Gt", "values": [str(at_least - 1)]}


def _in(key: str, *values: str) -> Expr:
    return {"key": key, "operator": "In", "values": list(values)}


def plan(req: Requirements) -> Plan:
    required: list[Need] = []
    preferred: list[tuple[int, tuple[Need, ...]]] = []
    gpus = max(req.gpus, 1)
    if req.topology == "nvlink":
        size = max(req.gpus, 2)
        required.append(
            Need(
                _gt(api.LABEL_NVLINK_ISLAND_SIZE, size),
                f"an NVLink island of at least {size} GPUs ({api.ANN_TOPOLOGY}=nvlink)",
            )
        )
    elif req.topology == "same-socket":
        required.append(
            Need(
                _gt(api.LABEL_NUMA_GPUS_MAX, gpus),
                f"{gpus} GPUs on one NUMA node ({api.ANN_TOPOLOGY}=same-socket)",
            )
        )
    if req.min_nvlink_bandwidth:
        required.append(
            Need(
                _gt(api.LABEL_NVLINK_BANDWIDTH, req.min_nvlink_bandwidth),
                f"NVLink bandwidth of at least {req.min_nvlink_bandwidth} GB/s per GPU",
            )
        )
    if req.rdma:
        ports = req.rdma_min_ports or 1
        rdma = (
            Need(_in(api.LABEL_RDMA, "true"), "GPUDirect RDMA over an ACTIVE port"),
            Need(_gt(api.LABEL_RDMA_PORTS, ports), f"at least {ports} ACTIVE GPUDirect RDMA ports"),
        )
        if req.rdma == "required":
            required.extend(rdma)
        else:
            preferred.append((50, rdma))
    if req.cufile == "required":
        required.append(
            Need(_in(api.LABEL_CUFILE, "true"), "GPUDirect Storage (cuFile, not compat)")
        )
    elif req.cufile == "preferred":
        preferred.append((20, (Need(_in(api.LABEL_CUFILE, "true"), "GPUDirect Storage"),)))
    preferred.append((10, (Need(_in(api.LABEL_FABRIC_HEALTH, "ok"), "a healthy fabric"),)))
    return Plan(tuple(required), tuple(preferred))


def matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool | None:
    """Does a node with these gpufabric labels satisfy expr? None when the key is not ours."""
    key = str(expr.get("key", ""))
    if not key.startswith(api.LABEL_PREFIX):
        return None
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    value = labels.get(key)
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _results(expr: Mapping[str, Any], groups: Sequence[Group]) -> tuple[bool | None, ...]:
    """matches() of one expression over all groups, memoized on the cache's GroupSet."""
    memo: dict[Any, tuple[bool | None, ...]] | None = getattr(groups, "memo", None)
    key = (expr.get("key"), expr.get("operator"), tuple(map(str, expr.get("values") or ())))
    if memo is not None and key in memo:
        return memo[key]
    out = tuple(matches(expr, g.labels) for g in groups)
    if memo is not None:
        memo[key] = out
    return out


def _required_terms(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(req.get("nodeSelectorTerms") or [])


def admitted(pod: Mapping[str, Any], groups: Sequence[Group]) -> tuple[Group, ...]:
    """Groups the pod's required node affinity (and nodeSelector) admits.

    Unknown label keys count as met: the result is then a superset of the real candidates, which is
    the safe side for "usable on every node the affinity admits".
    """
    terms = _required_terms(pod)
    ok = [True] * len(groups)
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    for k, v in selector.items():
        if str(k).startswith(api.LABEL_PREFIX):
            for i, hit in enumerate(_results({"key": k, "operator": "In", "values": [v]}, groups)):
                ok[i] = ok[i] and bool(hit)
    if terms:
        any_term = [False] * len(groups)
        for term in terms:
            term_ok = [True] * len(groups)
            for expr in term.get("matchExpressions") or []:
                for i, hit in enumerate(_results(expr, groups)):
                    if hit is False:
                        term_ok[i] = False
            any_term = [a or t for a, t in zip(any_term, term_ok, strict=True)]
        ok = [a and b for a, b in zip(ok, any_term, strict=True)]
    return tuple(g for g, keep in zip(groups, ok, strict=True) if keep)


def _add_required(pod: dict[str, Any], exprs: Sequence[Expr]) -> None:
    spec = pod.setdefault("spec", {})
    node_aff = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    req = node_aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": []})
    for term in terms:
        have = term.setdefault("matchExpressions", [])
        for expr in exprs:
            if expr not in have:
                have.append(copy.deepcopy(expr))


def _add_preferred(pod: dict[str, Any], weight: int, exprs: Sequence[Expr]) -> None:
    node_aff = pod.setdefault("spec", {}).setdefault("affinity", {}).setdefault("nodeAffinity", {})
    prefs = node_aff.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    term = {"weight": weight, "preference": {"matchExpressions": [copy.deepcopy(e) for e in exprs]}}
    if term not in prefs:
        prefs.append(term)


def _gpu_containers(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    containers = list((pod.get("spec") or {}).get("containers") or [])
    with_gpu = [
        c
        for c in containers
        if ((c.get("resources") or {}).get("limits") or {}).get(api.GPU_RESOURCE)
        not in (None, "0", 0)
    ]
    return with_gpu or containers


def _set_env(container: dict[str, Any], name: str, value: str) -> None:
    env = container.setdefault("env", [])
    if not any(e.get("name") == name for e in env):  # the user's own value always wins
        env.append({"name": name, "value": value})


def _common_hcas(groups: Sequence[Group], preferred: tuple[str, ...]) -> tuple[str, ...]:
    if not groups:
        return ()
    common = set(groups[0].usable_hcas)
    for g in groups[1:]:
        common &= set(g.usable_hcas)
    if preferred:
        common &= set(preferred)
    order = {n: i for i, n in enumerate(groups[0].usable_hcas)}
    return tuple(sorted(common, key=lambda n: order.get(n, 0)))


def _unmet(plan_: Plan, groups: Sequence[Group]) -> list[str]:
    """Which requirement no node meets (for the warning), best effort."""
    lacking = [n.why for n in plan_.required if not any(matches(n.expr, g.labels) for g in groups)]
    if lacking:
        return lacking
    return ["all of: " + "; ".join(n.why for n in plan_.required)] if plan_.required else []


def mutate(
    pod: Mapping[str, Any], req: Requirements, groups: Sequence[Group], settings: Settings
) -> Decision:
    out: dict[str, Any] = json.loads(json.dumps(pod))  # a deep copy, several times faster
    p = plan(req)
    warnings: list[str] = []
    if p.required:
        _add_required(out, [n.expr for n in p.required])
    for weight, needs in p.preferred:
        _add_preferred(out, weight, [n.expr for n in needs])
    candidates = admitted(out, groups)
    if not candidates:
        unmet = "; ".join(_unmet(p, groups)) or "the pod's own node affinity"
        warnings.append(f"gpufabric: no node currently satisfies: {unmet}")

    containers = _gpu_containers(out)
    if (
        req.rdma
        and settings.inject_nccl_ib_hca
        and any(
            not any(e.get("name") == "NCCL_IB_HCA" for e in c.get("env") or []) for c in containers
        )
    ):
        hcas = _common_hcas(candidates, req.preferred_hcas)
        if not hcas and candidates and req.rdma == "required":
            # No one list is right everywhere: pin the pod to the most common HCA layout.
            by_profile: dict[str, list[Group]] = {}
            for g in candidates:
                by_profile.setdefault(g.labels.get(api.LABEL_HCA_PROFILE, ""), []).append(g)
            ranked = sorted(
                by_profile.items(),
                key=lambda kv: (-sum(len(g.nodes) for g in kv[1]), kv[0]),
            )
            for profile, members in ranked:
                hcas = _common_hcas(members, req.preferred_hcas)
                if hcas:
                    _add_required(out, [_in(api.LABEL_HCA_PROFILE, profile)])
                    candidates = admitted(out, groups)
                    warnings.append(
                        "gpufabric: nodes differ in usable HCAs; pinned to "
                        f"{api.LABEL_HCA_PROFILE}={profile} "
                        f"({sum(len(g.nodes) for g in members)} nodes)"
                    )
                    break
        if hcas:
            for c in containers:
                _set_env(c, "NCCL_IB_HCA", "=" + ",".join(hcas))
        elif candidates:
            warnings.append(
                "gpufabric: NCCL_IB_HCA not set: no HCA list is usable on every node "
                "this pod may run on"
            )
    if req.cufile and settings.cufile_policy:
        cufile.inject(out, containers, settings.cufile_policy)
    if req.rdma and settings.inject_nccl_tuning and candidates:
        levels = [g.gdr_level for g in candidates if g.gdr_level]
        if levels:
            worst = max(levels, key=DISTANCE_ORDER.__getitem__)
            # NCCL has no NODE level: its PHB means "same NUMA node".
            for c in containers:
                _set_env(c, "NCCL_NET_GDR_LEVEL", "PHB" if worst == "NODE" else worst)
    return Decision(pod=out, warnings=warnings, candidates=candidates)

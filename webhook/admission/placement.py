"""(pod, Requirements, node groups) -> mutated pod + warnings. Pure.

Required -> requiredDuringScheduling expressions ANDed into every existing nodeSelectorTerm (terms
are ORed; a new term would loosen the pod). Preferred -> weighted preferred terms. Integers use
`Gt n-1`. Every addition is check-before-add, so applying twice gives the same pod.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from common import api
from webhook.admission import cufile
from webhook.admission.podedit import Expr, PodEdit
from webhook.admission.requirements import Requirements
from webhook.fleet.layouts import ADMIT_ALL, KEY_INDEX, Cond, Fleet, Group, Pin, Query
from webhook.fleet.selection import Own, as_cond, own_conds
from webhook.kube.nodeselector import required_terms

if TYPE_CHECKING:
    from webhook.groups.extensions.imex.inject import ImexState


@dataclass(frozen=True, slots=True)
class Settings:
    cufile_policy: str | None = None  # cufile.json text, checked (webhook.admission.cufile)
    inject_nccl_tuning: bool = False
    inject_nccl_ib_hca: bool = True
    # GPUs of the largest spine domain (webhook.groups.admission.spines), for the too-big-group
    # warning
    largest_spine_gpus: Callable[[], int | None] | None = None
    # Whether a group placer runs (serve --placer): without one, a gated group would wait forever
    placer: bool = True
    # Whether the cluster serves PodGroups (scheduling.k8s.io, the version found), as last found
    # (a cached answer, webhook.groups.extensions.gang.podgroups.Book): group members then name
    # their group's PodGroup; None: not known yet (members are asked to retry)
    native_gang: Callable[[], bool | None] | None = None
    # ComputeDomains and NVLink domain sizes (serve); None: offline, IMEX claims added unchecked
    imex: ImexState | None = None


# The memo tables keyed by pod shapes hold a bounded number of entries, each of bounded size (a
# pod can be 1.5 MiB: nothing read from it goes into a key unchecked).
PLANS = 256  # _plan: keyed by six scalars
QUERIES = 256  # _only: one-term queries of a nodeSelector's short values (labels' own bound)
PINNED = 256  # _pinned: (plan, pin) objects, both bounded
LABEL_VALUE_MAX = 63  # a longer value matches no label, so it is never worth remembering


@dataclass(frozen=True, slots=True)
class Need:
    """One node requirement with the words that explain it."""

    expr: Expr
    why: str


# eq=False: plan() hands out one Plan per kind of Requirements (it holds dicts, so it has no value
# hash), and _pinned memoizes by it.
@dataclass(frozen=True, slots=True, eq=False)
class Plan:
    required: tuple[Need, ...]
    preferred: tuple[tuple[int, tuple[Need, ...]], ...]
    conds: tuple[Cond, ...] = ()  # the required expressions in Query form
    exprs: tuple[Expr, ...] = ()  # the required expressions, as mutate adds them
    terms: tuple[dict[str, Any], ...] = ()  # the preferred terms, as mutate adds them
    query: Query = ((),)  # query_of a pod that says nothing of our labels itself, with conds


@dataclass(slots=True)
class Decision:
    pod: dict[str, Any]
    ops: list[dict[str, Any]] = field(default_factory=list)  # JSONPatch: original -> pod
    warnings: list[str] = field(default_factory=list)
    fleet: Fleet | None = None

    @property
    def candidates(self) -> tuple[Group, ...]:
        """The layouts the final pod admits, with their nodes (O(layouts): explain, tests)."""
        return admitted(self.pod, self.fleet) if self.fleet is not None else ()


# Constants: PodEdit copies them into any pod that outlives the review.
_VOLUME, _MOUNT = cufile.volume(), cufile.mount()
_CUFILE_ENV = (cufile.ENV, f"{cufile.MOUNT}/{cufile.FILE}")


def _gt(key: str, at_least: int) -> Expr:
    return {"key": key, "operator": "Gt", "values": [str(at_least - 1)]}


def _in(key: str, *values: str) -> Expr:
    return {"key": key, "operator": "In", "values": list(values)}


def plan(req: Requirements) -> Plan:
    """What the requirements ask of a node (memoized by the fields it reads: the expressions and
    terms are shared, so PodEdit copies them into any pod that outlives the review)."""
    return _plan(
        req.gpus, req.topology, req.min_nvlink_bandwidth, req.rdma, req.rdma_min_ports, req.cufile
    )


# Keyed by six scalars, never by the Requirements: a pod's preferred-hcas list (as long as the pod
# is) or claim name is not what a plan depends on, and the memo must not keep it (issue 17).
@functools.lru_cache(maxsize=PLANS)
def _plan(
    gpus_asked: int,
    topology: str,
    min_nvlink_bandwidth: int | None,
    rdma: str | None,
    rdma_min_ports: int | None,
    cufile_level: str | None,
) -> Plan:
    required: list[Need] = []
    preferred: list[tuple[int, tuple[Need, ...]]] = []
    gpus = max(gpus_asked, 1)
    if topology == "nvlink":
        size = max(gpus_asked, 2)
        required.append(
            Need(
                _gt(api.LABEL_NVLINK_ISLAND_SIZE, size),
                f"an NVLink island of at least {size} GPUs ({api.ANN_TOPOLOGY}=nvlink)",
            )
        )
    elif topology == "same-socket":
        required.append(
            Need(
                _gt(api.LABEL_NUMA_GPUS_MAX, gpus),
                f"{gpus} GPUs on one NUMA node ({api.ANN_TOPOLOGY}=same-socket)",
            )
        )
    if min_nvlink_bandwidth:
        required.append(
            Need(
                _gt(api.LABEL_NVLINK_BANDWIDTH, min_nvlink_bandwidth),
                f"NVLink bandwidth of at least {min_nvlink_bandwidth} GB/s per GPU",
            )
        )
    if rdma:
        ports = rdma_min_ports or 1
        over_rdma = (
            Need(_in(api.LABEL_RDMA, "true"), "GPUDirect RDMA over an ACTIVE port"),
            Need(_gt(api.LABEL_RDMA_PORTS, ports), f"at least {ports} ACTIVE GPUDirect RDMA ports"),
        )
        if rdma == "required":
            required.extend(over_rdma)
        else:
            preferred.append((50, over_rdma))
    if cufile_level == "required":
        required.append(
            Need(_in(api.LABEL_CUFILE, "true"), "GPUDirect Storage (cuFile, not compat)")
        )
    elif cufile_level == "preferred":
        preferred.append((20, (Need(_in(api.LABEL_CUFILE, "true"), "GPUDirect Storage"),)))
    preferred.append((10, (Need(_in(api.LABEL_FABRIC_HEALTH, "ok"), "a healthy fabric"),)))
    conds = tuple(c for n in required if (c := _cond(n.expr)) is not None)
    terms = tuple(
        {"weight": weight, "preference": {"matchExpressions": [n.expr for n in needs]}}
        for weight, needs in preferred
    )
    exprs = tuple(n.expr for n in required)
    query = _only(tuple(sorted(set(conds))))
    return Plan(tuple(required), tuple(preferred), conds, exprs, terms, query)


def _cond(expr: Any) -> Cond | None:
    """An expression on one of our summary labels in Query form; None for any other key (the
    webhook cannot judge it, so it counts as met: candidates are then a superset, which is the
    safe side for "usable on every node the affinity admits")."""
    if not isinstance(expr, dict) or expr.get("key") not in KEY_INDEX:
        return None
    return as_cond(expr)


def query_of(pod: Mapping[str, Any], extra: Sequence[Cond] = ()) -> Query:
    """The part of the pod's required node affinity and nodeSelector that our labels decide,
    with `extra` ANDed into every term (what mutate is about to add), canonical (sorted,
    deduplicated, absorbed) so that alike pods ask the same question."""
    return _query(*_own_conds(pod), extra)


def _query_for(pod: Mapping[str, Any], p: Plan, own: Own | None = None) -> Query:
    """query_of(pod, p.conds), the plan's own query for the usual pod (none of our labels).
    `own`: the pod's, when the caller has it (Selections.scope_for)."""
    selector, owns = _own_conds(pod) if own is None else own
    return p.query if not selector and not any(owns) else _query(selector, owns, p.conds)


def _query(
    selector: Sequence[Cond], owns: Sequence[Sequence[Cond]], extra: Sequence[Cond]
) -> Query:
    base = set(extra)
    base.update(selector)
    if not any(owns):  # the usual pod: no term says anything about our labels
        conds = tuple(sorted(base))
        if all(len(value) <= LABEL_VALUE_MAX for _, _, (value,) in selector):
            return _only(conds)
        return (conds,)
    terms = {frozenset(base.union(own)) for own in owns}
    kept: list[frozenset[Cond]] = []
    for t in sorted(terms, key=len):  # a term that holds more than another adds nothing
        if not any(k <= t for k in kept):
            kept.append(t)
    return tuple(sorted(tuple(sorted(t)) for t in kept))


def _own_conds(pod: Mapping[str, Any]) -> Own:
    """The pod's nodeSelector and each required term, in Query form, only our labels."""
    spec = pod.get("spec") or {}
    return own_conds(spec.get("nodeSelector"), required_terms(pod))


@functools.lru_cache(maxsize=QUERIES)
def _only(conds: tuple[Cond, ...]) -> Query:
    """The one-term query (interned: alike pods hand the fleet the same object)."""
    return (conds,)


def _fleet(groups: Fleet | Sequence[Group]) -> Fleet:
    return groups if isinstance(groups, Fleet) else Fleet.of_groups(groups)


def admitted(pod: Mapping[str, Any], groups: Fleet | Sequence[Group]) -> tuple[Group, ...]:
    """Groups the pod's required node affinity (and nodeSelector) admits.

    Keys other than our summary labels count as met (see _cond).
    """
    return _fleet(groups).groups(query_of(pod))


def _narrowed(hcas: tuple[str, ...], preferred: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(h for h in hcas if h in preferred) if preferred else hcas


def _unmet(plan_: Plan, fleet: Fleet) -> list[str]:
    """Which requirement no node meets (for the warning), best effort."""
    if fleet.scope and not fleet.candidates(ADMIT_ALL).nodes:
        return [fleet.scope]  # the pod's own constraints leave no node at all
    lacking = [
        n.why
        for n in plan_.required
        if (c := _cond(n.expr)) is not None and not fleet.candidates(((c,),)).nodes
    ]
    if lacking:
        return lacking
    return ["all of: " + "; ".join(n.why for n in plan_.required)] if plan_.required else []


def _nodes(n: int) -> str:
    return "1 node" if n == 1 else f"{n} nodes"


@functools.lru_cache(maxsize=PINNED)
def _pinned(p: Plan, pin: Pin) -> tuple[tuple[Expr, ...], str]:
    """The plan's required expressions with the pin's hca-profile one, and the warning that says
    why (memoized like plan, by identity: alike pods get the same plan and the same pin)."""
    exprs = (*p.exprs, _in(api.LABEL_HCA_PROFILE, *pin.profiles))
    return exprs, (
        f"gpufabric: nodes differ in usable HCAs; pinned to {api.LABEL_HCA_PROFILE} "
        f"in [{', '.join(pin.profiles)}], the {_nodes(pin.nodes)} on which "
        f"{','.join(pin.hcas)} are usable"
    )


def mutate(
    pod: Mapping[str, Any],
    req: Requirements,
    groups: Fleet | Sequence[Group],
    settings: Settings,
    in_place: bool = False,
    group_env: Sequence[dict[str, Any]] = (),
    own: Own | None = None,
) -> Decision:
    """`in_place` edits `pod` itself (see PodEdit): for a caller that owns it and needs only the
    ops; the decision's pod is then that same object. `group_env`: what every container of a
    group member gets (webhook.groups.decision.ranks.member_env), unless it sets the name itself.
    `own`: the Own of the pod's constraints when the caller has it (FabricCache.scope_for), else
    read."""
    fleet = _fleet(groups)
    p = plan(req)
    query = _query_for(pod, p, own)  # the pod as it came (before the edits, in place or not)
    found = fleet.candidates(query)
    warnings: list[str] = []
    if not found.nodes:
        unmet = "; ".join(_unmet(p, fleet)) or "the pod's own node affinity"
        warnings.append(f"gpufabric: no node currently satisfies: {unmet}")
    gdr_level = found.gdr_level
    edit = PodEdit(pod, in_place)
    containers = edit.gpu_containers()
    required = p.exprs
    hcas: tuple[str, ...] = ()
    if req.rdma and settings.inject_nccl_ib_hca and edit.lacks_env(containers, "NCCL_IB_HCA"):
        hcas = _narrowed(found.common_hcas, req.preferred_hcas)
        pin = None
        if not hcas and found.nodes and req.rdma == "required":
            # No one list is right everywhere: take the list the most common layout offers and
            # keep every node on which all of it is usable (one or more hca-profiles).
            pin = fleet.pin(query, req.preferred_hcas)
        if pin is not None:
            hcas, gdr_level = pin.hcas, pin.gdr_level
            required, warning = _pinned(p, pin)
            warnings.append(warning)
        elif not hcas and found.nodes:
            warnings.append(
                "gpufabric: NCCL_IB_HCA not set: no HCA list is usable on every node "
                "this pod may run on"
            )
    if required:
        edit.add_required(required)
    edit.add_preferred(p.terms)
    env: list[tuple[str, str]] = []  # set in one pass per container, in this order
    if hcas:
        env.append(("NCCL_IB_HCA", "=" + ",".join(hcas)))
    if req.cufile and settings.cufile_policy:  # by value: see webhook.admission.cufile
        edit.annotate(cufile.ANNOTATION, settings.cufile_policy)
        edit.add_volume(_VOLUME)
        for c in containers:
            edit.add_mount(c, _MOUNT)
        env.append(_CUFILE_ENV)
    if req.rdma and settings.inject_nccl_tuning and found.nodes and gdr_level:
        # NCCL has no NODE level: its PHB means "same NUMA node".
        env.append(("NCCL_NET_GDR_LEVEL", "PHB" if gdr_level == "NODE" else gdr_level))
    if env:
        for c in containers:
            edit.set_env(c, env)
    if group_env:
        for c in edit.containers():
            edit.add_env(c, group_env)
    return Decision(pod=edit.pod, ops=edit.ops, warnings=warnings, fleet=fleet)

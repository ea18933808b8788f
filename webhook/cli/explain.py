"""`explain`: node by node, each requirement of a pod and whether that node meets it, and why not.

For every node it checks what the scheduler will check after the webhook has mutated the pod:
the requirements the webhook adds (against the labels the labeler derives from the node's status),
the hca-profile pin when the webhook adds one, the pod's GPU count against the node's GPUs, and the
pod's own node affinity and nodeSelector (against the Node's labels when a Node object was given).
A failing value names the probe condition behind it when that condition is not True (an NVLink
island of 0 because NVML is LibraryNotFound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from common import api, nvlink
from webhook.admission.placement import Settings, mutate, plan
from webhook.admission.requirements import Requirements
from webhook.fleet.cache import FabricCache
from webhook.groups.placer.explain import group_section
from webhook.kube import nodeselector as ns

Mark = Literal["ok", "FAIL", "?"]
PIN = "hca-profile pin (nodes differ in usable HCAs; only layouts holding NCCL_IB_HCA)"

# The probe condition each label's value comes from (DESIGN.md: one condition per probe).
CONDITION_OF: Mapping[str, tuple[str, ...]] = {
    api.LABEL_GPU_COUNT: (api.COND_NVML,),
    api.LABEL_NVLINK_ISLAND_SIZE: (api.COND_NVML,),
    api.LABEL_NVLINK_BANDWIDTH: (api.COND_NVML,),
    api.LABEL_NUMA_GPUS_MAX: (api.COND_PCIE, api.COND_NVML),
    api.LABEL_RDMA: (api.COND_RDMA,),
    api.LABEL_RDMA_PORTS: (api.COND_RDMA,),
    api.LABEL_HCA_PROFILE: (api.COND_RDMA,),
    api.LABEL_CUFILE: (api.COND_GDS,),
    api.LABEL_FABRIC_HEALTH: (api.COND_FABRIC,),
}


@dataclass
class NodeFacts:
    """What the offline files say about nodes beyond the cache: the raw status (None: the object
    has no status yet) and, when Node objects were given, each Node's labels."""

    statuses: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)  # Pods given: running and waiting
    budgets: list[dict[str, Any]] = field(default_factory=list)  # PodDisruptionBudgets given

    def known(self) -> set[str]:
        return set(self.statuses) | set(self.node_labels)

    def domain(self, name: str) -> nvlink.Domain:
        """The NVLink domain the labeler derives for the node (status, else clique label)."""
        return nvlink.node_domain(self.statuses.get(name), self.node_labels.get(name, {}))


def _nvlink_line(domain: nvlink.Domain) -> list[str]:
    """Only nodes with multi-node NVLink (or GPUs that dispute it) get the line."""
    if not domain.value and not domain.reason:
        return []
    return [f"  {api.LABEL_NVLINK_DOMAIN}: {domain.value or f'none ({domain.reason})'}"]


@dataclass(frozen=True, slots=True)
class Check:
    mark: Mark
    text: str


def _conditions_behind(key: str, status: Mapping[str, Any] | None) -> str:
    conds = status.get("conditions") if status else None
    found = []
    for c in conds if isinstance(conds, list) else []:
        if (
            isinstance(c, Mapping)
            and c.get("type") in CONDITION_OF.get(key, ())
            and c.get("status") != "True"
        ):
            found.append(f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}")
    return f" (because {'; '.join(found)})" if found else ""


def _own_affinity(pod: Mapping[str, Any], labels: Mapping[str, str], name: str) -> list[Check]:
    spec = pod.get("spec")
    selector = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
    out = [
        Check("ok" if v.ok else "FAIL", f"the pod's own {v.why}")
        for v in (ns.node_selector(selector, labels) if isinstance(selector, Mapping) else [])
    ]
    terms = ns.required_terms(pod)
    if terms is None:
        return out
    holds, checked = ns.terms(terms, labels, name)
    if holds:
        first = next(i for i, t in enumerate(checked) if ns.term_holds(t))
        shown = "; ".join(v.why for v in checked[first])
        return [*out, Check("ok", f"the pod's own node affinity, term {first + 1}: {shown}")]
    failing = [
        f"term {i + 1}: " + "; ".join(v.why for v in t if not v.ok) for i, t in enumerate(checked)
    ]
    return [
        *out,
        Check("FAIL", "the pod's own node affinity: no term holds: " + " | ".join(failing)),
    ]


def _foreign_keys(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's own affinity or nodeSelector uses labels the labeler does not set."""
    spec = pod.get("spec")
    selector = spec.get("nodeSelector") if isinstance(spec, Mapping) else None
    keys = [str(k) for k in selector] if isinstance(selector, Mapping) else []
    for t in ns.required_terms(pod) or []:
        exprs = t.get("matchExpressions") if isinstance(t, Mapping) else None
        keys += [str(e.get("key")) for e in exprs or [] if isinstance(e, Mapping)]
        if isinstance(t, Mapping) and t.get("matchFields"):
            keys.append("metadata.name")
    return any(not k.startswith(api.LABEL_PREFIX) and k != "metadata.name" for k in keys)


def node_checks(
    name: str,
    pod: Mapping[str, Any],
    req: Requirements,
    needs: Sequence[tuple[str, dict[str, Any]]],
    cache: FabricCache,
    facts: NodeFacts,
) -> list[Check]:
    """Every check of one node; `needs` are the webhook's (why, expression) pairs."""
    if name in cache.rejected:
        return [Check("FAIL", f"unreadable GpuNodeStatus, ignored: {cache.rejected[name]}")]
    record = cache.nodes.get(name)
    status = facts.statuses.get(name)
    if record is None or (name in facts.statuses and status is None):
        what = "its GpuNodeStatus has no status" if name in facts.statuses else "no GpuNodeStatus"
        return [Check("FAIL", f"no status yet ({what}): the agent has not published this node")]
    fabric = dict(record.labels)
    labels = {**facts.node_labels.get(name, {}), **fabric}
    out: list[Check] = []
    for why, expr in needs:
        v = ns.requirement(expr, labels)
        behind = "" if v.ok else _conditions_behind(str(expr.get("key")), status)
        out.append(Check("ok" if v.ok else "FAIL", f"{why}: {v.why}{behind}"))
    if req.gpus:
        # The label as it is (a status may say any integer): never shown as 0 when unparsable.
        value = fabric.get(api.LABEL_GPU_COUNT)
        ok = value is not None and value.isdigit() and int(value) >= req.gpus
        has = f"{api.LABEL_GPU_COUNT}={value}" if value is not None else "no GPU count"
        behind = "" if ok else _conditions_behind(api.LABEL_GPU_COUNT, status)
        asks = f"the pod asks for {req.gpus} GPUs: node has {has}{behind}"
        out.append(Check("ok" if ok else "FAIL", asks))
    if name not in facts.node_labels and _foreign_keys(pod):
        out.append(
            Check(
                "?",
                "the pod's own node affinity uses labels of the Node object, which was not given "
                f"(add `kubectl get node {name} -o yaml` to --status)",
            )
        )
    else:
        out += _own_affinity(pod, labels, name)
    return out


def explain(
    pod: Mapping[str, Any],
    req: Requirements,
    cache: FabricCache,
    facts: NodeFacts | None = None,
    only: str | None = None,
) -> str:
    facts = facts or NodeFacts()
    p = plan(req)
    decision = mutate(pod, req, cache.fleet_for(pod), Settings())
    needs = [(n.why, n.expr) for n in p.required]
    planned = [n.expr for n in p.required]
    for t in ns.required_terms(decision.pod) or []:
        for e in t.get("matchExpressions") or []:
            if e.get("key") == api.LABEL_HCA_PROFILE and e not in planned:
                planned.append(e)
                needs.append((PIN, e))
    lines = [
        f"Pod asks for: {describe(req)}",
        f"Required on the node: {'; '.join(w for w, _ in needs) or 'nothing'}",
        "",
    ]
    names = [only] if only else sorted(facts.known() | set(cache.nodes) | set(cache.rejected))
    admitting = 0
    for name in names:
        checks = node_checks(name, pod, req, needs, cache, facts)
        if name in cache.rejected:
            verdict = "IGNORED"
        elif any(c.mark == "FAIL" for c in checks):
            verdict = "REJECTS"
        elif any(c.mark == "?" for c in checks):
            verdict = "ADMITS if its Node labels meet the pod's own affinity"
            admitting += 1
        else:
            verdict = "ADMITS"
            admitting += 1
        lines.append(f"{name}: {verdict}")
        lines += [f"  [{c.mark:<4}] {c.text}" for c in checks]
        lines += _nvlink_line(facts.domain(name))
    if not only:
        n = len(names)
        of = "1 node admits" if n == 1 else f"{n} nodes admit"
        lines += ["", f"{admitting} of {of} this pod."]
    lines += decision.warnings
    lines += group_section(pod, _nodes_for_groups(cache, facts), facts.pods, facts.budgets)
    return "\n".join(lines) + "\n"


def _nodes_for_groups(cache: FabricCache, facts: NodeFacts) -> list[dict[str, Any]]:
    """Node objects for the group section: the given Nodes' labels plus the NVLink domain the
    labeler would add (also for nodes given only by a status), GPUs from the status."""
    out = []
    for name in sorted(facts.known()):
        labels = dict(facts.node_labels.get(name, {}))
        domain = facts.domain(name).value
        if domain is not None:
            labels[api.LABEL_NVLINK_DOMAIN] = domain
        elif name in facts.statuses:
            labels.pop(api.LABEL_NVLINK_DOMAIN, None)  # the labeler would take it off
        if name not in facts.node_labels and domain is None:
            continue  # neither network labels nor an NVLink domain: no level holds it
        record = cache.nodes.get(name)
        gpus = dict(record.labels).get(api.LABEL_GPU_COUNT, "0") if record else "0"
        out.append(
            {
                "metadata": {"name": name, "labels": labels},
                "status": {
                    "allocatable": {api.GPU_RESOURCE: gpus},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


def describe(req: Requirements) -> str:
    parts: Sequence[str] = [
        f"{req.gpus} GPU(s)",
        f"topology={req.topology}",
        *([f"min NVLink {req.min_nvlink_bandwidth} GB/s"] if req.min_nvlink_bandwidth else []),
        *([f"RDMA {req.rdma} (>= {req.rdma_min_ports or 1} ports)"] if req.rdma else []),
        *([f"HCAs {','.join(req.preferred_hcas)}"] if req.preferred_hcas else []),
        *([f"cuFile {req.cufile}"] if req.cufile else []),
        *([f"claim {req.claim}"] if req.claim else []),
    ]
    return ", ".join(parts)

"""`explain`: node by node, each requirement of a pod and whether that node meets it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.cache import FabricCache
from webhook.placement import Settings, matches, mutate, plan
from webhook.requirements import Requirements


def explain(pod: Mapping[str, Any], req: Requirements, cache: FabricCache) -> str:
    p = plan(req)
    decision = mutate(pod, req, cache.groups(), Settings())
    admitted = {n for g in decision.candidates for n in g.nodes}
    lines = [
        f"Pod asks for: {describe(req)}",
        f"Required on the node: {'; '.join(n.why for n in p.required) or 'nothing'}",
        "",
    ]
    for name in sorted(cache.nodes):
        labels = dict(cache.nodes[name].labels)
        verdict = "ADMITS" if name in admitted else "REJECTS"
        lines.append(f"{name}: {verdict}")
        for need in p.required:
            key = need.expr["key"]
            ok = matches(need.expr, labels)
            mark = "ok  " if ok else "FAIL"
            lines.append(f"  [{mark}] {need.why}: {key}={labels.get(key, '<unset>')}")
        if name not in admitted and all(matches(n.expr, labels) for n in p.required):
            lines.append("  [FAIL] the pod's own node affinity or the HCA-profile pin excludes it")
    for name, why in sorted(cache.rejected.items()):
        lines.append(f"{name}: IGNORED (unreadable GpuNodeStatus: {why})")
    lines += ["", f"{len(admitted)} of {len(cache.nodes)} nodes admit this pod."]
    lines += decision.warnings
    return "\n".join(lines) + "\n"


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

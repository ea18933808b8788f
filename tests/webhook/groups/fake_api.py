"""An API server stand-in for the placer: stores pods, applies JSON patches the way the real one
does (a failing `test` op is HTTP 422, an unknown pod 404), enforces what may change while a pod is
gated (KEP-3838, shared/notes/k8s_placement.md 4.4), and records Events."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch

from tests.webhook.groups.fabric import gpu_pod
from webhook.groups.placer import Placer, Rejected
from webhook.kube.nodeselector import required_terms


def gated_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why the API server would refuse this pod update (empty list: it accepts it)."""
    problems = []
    o, n = old.get("spec") or {}, new.get("spec") or {}
    old_gates = [g["name"] for g in o.get("schedulingGates") or []]
    new_gates = [g["name"] for g in n.get("schedulingGates") or []]
    if not set(new_gates) <= set(old_gates):
        problems.append("schedulingGates: may only be removed")
    directives = ("affinity", "schedulingGates", "nodeSelector")

    def rest(s: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k not in directives}

    if rest(o) != rest(n):
        problems.append("spec: fields other than scheduling directives changed")
    changed = o.get("affinity") != n.get("affinity") or o.get("nodeSelector") != n.get(
        "nodeSelector"
    )
    if changed and not old_gates:
        problems.append("spec.affinity: immutable once the pod is not gated")
    if changed and old_gates:
        if any(
            n.get("nodeSelector", {}).get(k) != v for k, v in (o.get("nodeSelector") or {}).items()
        ):
            problems.append("nodeSelector: only additions")
        ot, nt = required_terms(old), required_terms(new)
        if ot is not None:
            if nt is None or len(nt) != len(ot):
                problems.append("nodeSelectorTerms: the number of terms may not change")
            else:
                for a, b in zip(ot, nt, strict=True):
                    for part in ("matchExpressions", "matchFields"):
                        was, now = a.get(part) or [], b.get(part) or []
                        if now[: len(was)] != was:
                            problems.append(f"{part}: only additions")
        if {k: v for k, v in (o.get("affinity") or {}).items() if k != "nodeAffinity"} != {
            k: v for k, v in (n.get("affinity") or {}).items() if k != "nodeAffinity"
        }:
            problems.append("pod (anti-)affinity may not change")
    return problems


class FakeApi:
    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.patches: list[tuple[str, list[dict[str, Any]]]] = []
        self.events: list[tuple[str, str, str]] = []
        self.fail_after: int | None = None  # simulate a crash: raise after this many patches

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = copy.deepcopy(pod)
        return copy.deepcopy(pod)

    def get(self, name: str, namespace: str = "team-a") -> dict[str, Any]:
        return copy.deepcopy(self.pods[(namespace, name)])

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        if self.fail_after is not None and len(self.patches) >= self.fail_after:
            raise KeyboardInterrupt("placer crashed")
        old = self.pods.get((namespace, name))
        if old is None:
            raise Rejected(f"pods {name!r} not found")  # HTTP 404
        try:
            new = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(old))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise Rejected(str(err)) from err  # HTTP 422
        problems = gated_update_problems(old, new)
        if problems:
            raise Rejected("; ".join(problems))  # HTTP 422 Invalid
        new["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1)
        self.pods[(namespace, name)] = new
        self.patches.append((name, ops))

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None:
        self.events.append((pod["metadata"]["name"], reason, message))


def setup(
    nodes: list[dict[str, Any]], busy: dict[str, int] | None = None
) -> tuple[FakeApi, Placer]:
    """A placer on these nodes, fed by a fake API server; `busy` GPUs of each node already run
    other pods."""
    api = FakeApi()
    placer = Placer(api)
    placer.nodes_listed(nodes)
    placer.pods_listed(
        [
            gpu_pod(f"busy-{n}", g, namespace="other", node_name=n, phase="Running")
            for n, g in (busy or {}).items()
        ]
    )
    return api, placer

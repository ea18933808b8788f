"""An API server stand-in for the placer: stores pods, applies JSON patches the way the real one
does (a failing `test` op is HTTP 422, an unknown pod 404), enforces what may change while a pod is
gated (KEP-3838, shared/notes/k8s_placement.md 4.4), answers Eviction as kube-apiserver's
pods/eviction does (pkg/registry/core/pod/storage/eviction.go: 201 with a Success Status, 429
TooManyRequests naming the PodDisruptionBudget, 404 for a pod already gone, 500 for a pod that
two budgets select; a terminating pod, and one Pending, Succeeded or Failed, skips the budget
check; an eviction spends one of the
budget's status.disruptionsAllowed and lists the pod in status.disruptedPods, a dry run
(deleteOptions.dryRun ["All"]) checks the same and changes nothing; an evicted pod gets
deletionTimestamp and the DisruptionTarget condition), and records Events."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch

from tests.webhook.groups.fabric import gpu_pod
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.framework.evictions import Outcome
from webhook.groups.framework.refusals import Rejected
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.kube import eviction_outcome
from webhook.groups.placer.placer import Placer
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
        self.pdbs: dict[str, dict[str, Any]] = {}  # name -> policy/v1 PodDisruptionBudget
        self.evictions: list[tuple[str, int]] = []  # (pod name, HTTP status answered)
        self.dry_runs: list[tuple[str, int]] = []  # the same for dry-run evictions
        self.now = 0.0  # the placer's clock where a test passes it
        # A ValidatingAdmissionPolicy's check of a pod update (old, new) -> failed messages;
        # each refuses the write as kube-apiserver does (tests/fixtures/placer-wire).
        self.admission: Callable[[dict[str, Any], dict[str, Any]], list[str]] | None = None
        self.dry_patches: list[tuple[str, list[dict[str, Any]]]] = []  # dryRun=All, admitted
        self.refusals: list[tuple[str, int, str, bool]] = []  # (pod, code, message, dry run)
        # status.nominatedNodeName writes, in order: (pod, node); and the writes in order, by
        # kind, so a test sees a member's node told before its gate goes
        self.nominations: list[tuple[str, str]] = []
        self.order: list[tuple[str, str]] = []  # ("nominate" | "patch", pod)

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        meta = pod["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = copy.deepcopy(pod)
        return copy.deepcopy(pod)

    def get(self, name: str, namespace: str = "team-a") -> dict[str, Any]:
        return copy.deepcopy(self.pods[(namespace, name)])

    def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        """kube-apiserver's answer to a JSONPatch, as KubePlacerApi raises it: the Status
        messages are those it sends (tests/fixtures/placer-wire); a dry run (dryRun=All) runs
        the same checks and admission and stores nothing."""
        if self.fail_after is not None and len(self.patches) >= self.fail_after:
            raise KeyboardInterrupt("placer crashed")
        write, what = "pods/patch", f"placement patch of pod {namespace}/{name}"
        if dry_run:
            write, what = "pods/patch-dry-run", f"{what} (dry run)"

        def refuse(code: int, message: str) -> Rejected:
            self.refusals.append((name, code, message, dry_run))
            return Rejected(write, what, code, message, name)

        old = self.pods.get((namespace, name))
        if old is None:
            raise refuse(404, f'pods "{name}" not found')
        try:
            new = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(old))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            # a failed `test` op or a path that is not there: the API says no more than this
            raise refuse(
                422, "the server rejected our request due to an error in our request"
            ) from err
        problems = gated_update_problems(old, new)
        if problems:
            raise refuse(422, f'Pod "{name}" is invalid: {"; ".join(problems)}')
        denied = self.admission(old, new) if self.admission is not None else []
        if denied:
            raise refuse(
                422,
                f"pods \"{name}\" is forbidden: ValidatingAdmissionPolicy 'gpufabric-placer-pods' "
                f"with binding 'gpufabric-placer-pods' denied request: {denied[0]}",
            )
        if dry_run:
            self.dry_patches.append((name, ops))
            return
        new["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1)
        self.pods[(namespace, name)] = new
        self.patches.append((name, ops))
        self.order.append(("patch", name))

    def nominate(self, namespace: str, name: str, node: str) -> None:
        """A merge patch of pods/status: best effort, as KubePlacerApi's (a pod that is gone
        is not nominated, and nothing is raised)."""
        self.order.append(("nominate", name))
        pod = self.pods.get((namespace, name))
        if pod is None:
            return
        pod.setdefault("status", {})["nominatedNodeName"] = node
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        self.nominations.append((name, node))

    def add_pdb(
        self,
        name: str,
        match_labels: dict[str, str] | None,
        allowed: int,
        namespace: str = "batch",
        expressions: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A PodDisruptionBudget as the disruption controller leaves it (status counted);
        `match_labels` None: a null selector (selects nothing)."""
        selector: dict[str, Any] | None = None
        if match_labels is not None or expressions:
            selector = {"matchLabels": dict(match_labels or {})}
            if expressions:
                selector["matchExpressions"] = expressions
        obj = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace, "uid": f"pdb-{name}"},
            "spec": {"minAvailable": 1, "selector": selector},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {}, "observedGeneration": 1},
        }
        self.pdbs[name] = obj
        return copy.deepcopy(obj)

    def _selecting(self, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        found = []
        for _, pdb in sorted(self.pdbs.items()):
            if pdb["metadata"]["namespace"] != namespace:
                continue
            selector = pdb["spec"].get("selector")
            if selector is None:  # policy/v1: a null selector selects no pod
                continue
            if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
                continue
            if all(_expression(e, labels) for e in selector.get("matchExpressions") or []):
                found.append(pdb)
        return found

    def eviction(
        self, namespace: str, name: str, dry_run: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body kube-apiserver answers a policy/v1 Eviction with."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, status(404, "NotFound", f'pods "{name}" not found')
        labels = pod["metadata"].get("labels") or {}
        phase = (pod.get("status") or {}).get("phase")
        # a terminating pod, and one that is not Running (Pending, or done), skip the budgets
        if not pod["metadata"].get("deletionTimestamp"):
            pdbs = self._selecting(namespace, labels) if phase not in _IGNORE_PDB else []
            if len(pdbs) > 1:
                return 500, status(
                    500,
                    "InternalError",
                    "Internal error occurred: This pod has more than one PodDisruptionBudget, "
                    "which the eviction subresource does not support.",
                )
            for pdb in pdbs:
                if pdb["status"]["disruptionsAllowed"] <= 0:
                    body = status(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    )
                    body["details"] = {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {pdb['metadata']['name']} "
                                "needs 1 healthy pods and has 1 currently",
                            }
                        ]
                    }
                    return 429, body
                if not dry_run:
                    pdb["status"]["disruptionsAllowed"] -= 1
                    pdb["status"]["disruptedPods"][name] = "2026-11-26T14:00:00Z"
            if not dry_run:
                pod["metadata"]["deletionTimestamp"] = "2026-11-26T14:00:00Z"
                conditions = pod.setdefault("status", {}).setdefault("conditions", [])
                conditions.append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "EvictionByEvictionAPI",
                        "message": "Eviction API: evicting",
                    }
                )
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        pod = self.pods.get((namespace, name))
        if uid and pod is not None and pod["metadata"].get("uid") != uid:
            return "gone", ""  # 409 on the UID precondition: another pod of the name now
        code, body = self.eviction(namespace, name, dry_run)
        (self.dry_runs if dry_run else self.evictions).append((name, code))
        return eviction_outcome(code, json.dumps(body))

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None:
        self.events.append((pod["metadata"]["name"], reason, message))


_IGNORE_PDB = ("Pending", "Succeeded", "Failed")  # eviction.go canIgnorePDB


def _expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector requirement (apimachinery labels.Requirement.Matches)."""
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code,
    }


def setup(
    nodes: list[dict[str, Any]], busy: dict[str, int] | None = None, clocked: bool = False
) -> tuple[FakeApi, Placer]:
    """A placer on these nodes, fed by a fake API server; `busy` GPUs of each node already run
    other pods; `clocked`: its clock is `api.now` (the test moves it), else the real one."""
    api = FakeApi()
    clock = (lambda: api.now) if clocked else time.monotonic
    placer = Placer(api, clock=clock, extensions=Extensions(Preemption(api)))
    placer.nodes_listed(nodes)
    placer.pods_listed(
        [
            gpu_pod(f"busy-{n}", g, namespace="other", node_name=n, phase="Running")
            for n, g in (busy or {}).items()
        ]
    )
    return api, placer

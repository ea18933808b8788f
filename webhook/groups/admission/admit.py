"""Admission of a grouped pod: validate the group annotations and, at CREATE, gate and label it.

Pure: the admission path (webhook/admission/admit.py) calls `admit_group` once per review and
merges the ops into its patch and the problems into its denial. Reinvocation yields no new ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.groups.decision.ranks import member_env
from webhook.groups.extensions.gang.admit import gang_ops
from webhook.groups.model.indexes import direct_problem, ident_of
from webhook.groups.model.names import (
    ANN_GROUP,
    ANN_PLACEMENT,
    ANN_SIZE,
    GATE,
    GROUP_ANNOTATIONS,
    LABEL_GROUP,
    escape_key,
)
from webhook.groups.model.objects import as_map
from webhook.groups.model.pods import GroupSpec, kueue_managed, parse_group


@dataclass(frozen=True, slots=True)
class GroupAdmission:
    ops: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each names the annotation
    warnings: list[str] = field(default_factory=list)
    spec: GroupSpec | None = None
    env: tuple[dict[str, Any], ...] = ()  # for every container of a member (ranks.member_env)
    retry: str = ""  # why the client must ask again later (HTTP 503): nothing is decided yet


# The answer for a pod with no group annotation (most pods), shared: callers only read it.
_UNGROUPED = GroupAdmission()


def admit_group(
    pod: Mapping[str, Any],
    operation: str,
    largest_domain_gpus: Callable[[], int | None] | None = None,
    pod_gpus: int = 0,
    placer: bool = True,
    native_gang: bool | None = False,
) -> GroupAdmission:
    """Ops that gate and label a grouped pod at CREATE, plus problems and warnings.

    `largest_domain_gpus` gives the GPUs of the largest spine domain when the caller knows the
    fabric (None: unknown, no warning). `placer`: whether a group placer runs; without one the pod
    is labelled but not gated (nothing would ever lift the gate), with a warning that says so.
    `native_gang`: the cluster serves PodGroups (a cached answer): the member names its group's;
    None: not known yet, so the member is asked to come again (every member of a group gets the
    same answer, or kube-scheduler's gang waits for members that will never name it).
    """
    meta = as_map(pod.get("metadata"))
    annotations = as_map(meta.get("annotations"))
    if annotations.keys().isdisjoint(GROUP_ANNOTATIONS):
        return _UNGROUPED  # what the checks below come to without any of them
    spec, problems = parse_group(annotations)
    if operation == "CREATE" and ANN_PLACEMENT in annotations:
        problems.append(f"{ANN_PLACEMENT}: written by the group placer; remove it from the pod")
    if problems or spec is None:
        return GroupAdmission(problems=problems)
    labels = as_map(meta.get("labels"))
    index_problem = direct_problem(ident_of(labels, annotations), spec.size)
    if index_problem:
        return GroupAdmission(problems=[f"{ANN_SIZE}: {spec.size}, but {index_problem}"])
    if kueue_managed(pod):
        return GroupAdmission(
            warnings=[f"gpufabric: Kueue manages this pod; {ANN_GROUP} is left to Kueue"],
            spec=spec,
        )
    if labels.get(LABEL_GROUP, spec.name) != spec.name:
        return GroupAdmission(
            problems=[
                f"{ANN_GROUP}: {spec.name!r} differs from the pod's label "
                f"{LABEL_GROUP}={labels[LABEL_GROUP]!r}; they must be equal"
            ]
        )
    warnings = []
    largest = largest_domain_gpus() if pod_gpus and largest_domain_gpus else None
    if largest is not None and spec.size * pod_gpus > largest:
        warnings.append(
            f"gpufabric: group {spec.name} needs {spec.size * pod_gpus} GPUs, more than the "
            f"largest spine domain ({largest}); it can only be spread"
            + (" and, being required, waits" if spec.locality == "required" else "")
        )
    if operation != "CREATE":
        return GroupAdmission(warnings=warnings, spec=spec)  # gates can only be set at creation
    ops: list[dict[str, Any]] = []
    if LABEL_GROUP not in labels:
        if "labels" in meta and isinstance(meta["labels"], Mapping):
            path = f"/metadata/labels/{escape_key(LABEL_GROUP)}"
            ops.append({"op": "add", "path": path, "value": spec.name})
        else:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {LABEL_GROUP: spec.name}})
    if not placer:
        warnings.append(
            f"gpufabric: no group placer runs (the webhook was started without --placer): group "
            f"{spec.name} is not gated and its pods are scheduled one by one, without group "
            "locality"
        )
        return GroupAdmission(ops=ops, warnings=warnings, spec=spec)
    gates = as_map(pod.get("spec")).get("schedulingGates")
    if not any(isinstance(g, Mapping) and g.get("name") == GATE for g in gates or []):
        if isinstance(gates, list):
            ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}})
        else:
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]})
    if native_gang is not False:
        named = gang_ops(pod, spec.name)
        if named and native_gang is None:
            return GroupAdmission(
                spec=spec,
                retry=f"gpufabric: group {spec.name}: the webhook does not know yet whether this "
                "cluster serves PodGroups (scheduling.k8s.io), and every member of a group must "
                "get the same answer; retry in a few seconds",
            )
        ops += named
    return GroupAdmission(ops=ops, warnings=warnings, spec=spec, env=member_env(spec.size))

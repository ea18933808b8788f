"""Admission of IMEX channels. Pure over cached state (the webhook never calls the API server
during a review): whether the cluster serves ComputeDomains, the ComputeDomains it has, and the
node count of its largest NVLink domain.

A group member with `gpufabric.io/compute-domain` gets, at CREATE (pod claims cannot be added
later), the claim of its group's channel in spec.resourceClaims and in each container that asks
for GPUs. A pod outside any group that claims the template of a ComputeDomain in its namespace
gets required pod affinity on the NVLink domain towards the other pods of that ComputeDomain
(what the driver's docs tell users to write by hand). Reinvocation adds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.api import LABEL_NVLINK_DOMAIN
from webhook.groups.extensions.imex.domains import Book
from webhook.groups.extensions.imex.names import (
    ANN_COMPUTE_DOMAIN,
    CD_CRD,
    CLAIM,
    LABEL_POD_DOMAIN,
    MODES,
    template_name,
)
from webhook.groups.model.names import ANN_GROUP, choice, escape_key
from webhook.groups.model.objects import as_map, pod_gpus
from webhook.groups.model.pods import GroupSpec, claimed_templates, kueue_managed

AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class ImexState:
    """What admission reads, kept current by watches (webhook/wiring.py)."""

    book: Book
    largest_domain_nodes: Callable[[], int]  # nodes of the largest NVLink domain (0: none)


@dataclass(frozen=True, slots=True)
class ImexAdmission:
    ops: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_NOTHING = ImexAdmission()


def admit_imex(
    pod: Mapping[str, Any],
    operation: str,
    namespace: str,
    group: GroupSpec | None,
    state: ImexState | None,
) -> ImexAdmission:
    """`pod`: as the other steps left it (their ops come first). `group`: the pod's valid group,
    None otherwise. `state` None: no cluster (offline mutate): the claim is added unchecked."""
    annotations = as_map(as_map(pod.get("metadata")).get("annotations"))
    raw = annotations.get(ANN_COMPUTE_DOMAIN)
    if raw is None:
        if group is None and annotations.get(ANN_GROUP) is None and state is not None:
            return lone_pod(pod, operation, namespace, state.book)
        return _NOTHING
    mode = choice(raw, MODES)
    if mode is None:
        return ImexAdmission(
            problems=[
                f"{ANN_COMPUTE_DOMAIN}: {str(raw).strip()!r} is not valid; accepted values: "
                f"{', '.join(MODES)}"
            ]
        )
    if annotations.get(ANN_GROUP) is None:
        return ImexAdmission(
            problems=[f"{ANN_COMPUTE_DOMAIN}: needs {ANN_GROUP} (the group's name) as well"]
        )
    if group is None or operation != "CREATE" or kueue_managed(pod):
        return _NOTHING  # the group's own problem is said already; claims only at CREATE
    spec = as_map(pod.get("spec"))
    if state is not None:
        if state.book.declaring(namespace, claimed_templates(spec)) is not None:
            return _NOTHING  # the user's own ComputeDomain: placed as required, nothing added
        if state.book.served is None:
            return ImexAdmission(
                problems=[
                    f"{ANN_COMPUTE_DOMAIN}: the webhook does not know yet whether this cluster "
                    f"serves {CD_CRD}; retry in a few seconds"
                ]
            )
        if not state.book.served:
            if mode == "preferred":
                return ImexAdmission(
                    warnings=[
                        f"gpufabric: {ANN_COMPUTE_DOMAIN} preferred: this cluster does not serve "
                        f"{CD_CRD}, so group {group.name} gets no IMEX channel"
                    ]
                )
            return ImexAdmission(
                problems=[
                    f"{ANN_COMPUTE_DOMAIN}: required, but this cluster does not serve {CD_CRD} "
                    "(install NVIDIA's DRA driver with ComputeDomains)"
                ]
            )
        largest = state.largest_domain_nodes()
        if mode == "required" and group.size > largest:
            where = (
                f"the largest NVLink domain has {largest} nodes"
                if largest
                else f"no node carries {LABEL_NVLINK_DOMAIN}"
            )
            return ImexAdmission(
                problems=[
                    f"{ANN_COMPUTE_DOMAIN}: required, but group {group.name} has {group.size} "
                    f"members and {where} (one member a node: one IMEX channel a node)"
                ]
            )
    return ImexAdmission(ops=claim_ops(spec, template_name(group.name)))


def claim_ops(spec: Mapping[str, Any], template: str) -> list[dict[str, Any]]:
    """The channel claim in spec.resourceClaims and in each container asking for GPUs (the
    first container when none does); nothing that is there already."""
    ops: list[dict[str, Any]] = []
    claims = spec.get("resourceClaims")
    entry = {"name": CLAIM, "resourceClaimTemplateName": template}
    if not isinstance(claims, list):
        ops.append({"op": "add", "path": "/spec/resourceClaims", "value": [entry]})
    elif not any(isinstance(c, Mapping) and c.get("name") == CLAIM for c in claims):
        ops.append({"op": "add", "path": "/spec/resourceClaims/-", "value": entry})
    containers = spec.get("containers")
    containers = containers if isinstance(containers, list) else []
    asking = [i for i, c in enumerate(containers) if pod_gpus({"containers": [c]})]
    for i in asking or ([0] if containers else []):
        res = as_map(containers[i]).get("resources")
        if not isinstance(res, Mapping):
            value = {"claims": [{"name": CLAIM}]}
            ops.append({"op": "add", "path": f"/spec/containers/{i}/resources", "value": value})
            continue
        have = res.get("claims")
        path = f"/spec/containers/{i}/resources/claims"
        if not isinstance(have, list):
            ops.append({"op": "add", "path": path, "value": [{"name": CLAIM}]})
        elif not any(isinstance(c, Mapping) and c.get("name") == CLAIM for c in have):
            ops.append({"op": "add", "path": f"{path}/-", "value": {"name": CLAIM}})
    return ops


def lone_pod(pod: Mapping[str, Any], operation: str, namespace: str, book: Book) -> ImexAdmission:
    """A pod outside any group that claims a ComputeDomain's channel: labelled with the
    ComputeDomain's UID, and held by required pod affinity to the NVLink domain of the pods
    that carry the same label (the first one goes anywhere: it matches its own term)."""
    if operation != "CREATE" or not book.by_template:
        return _NOTHING
    spec = as_map(pod.get("spec"))
    domain = book.declaring(namespace, claimed_templates(spec))
    if domain is None or not domain.uid:
        return _NOTHING
    ops: list[dict[str, Any]] = []
    labels = as_map(pod.get("metadata")).get("labels")
    if not isinstance(labels, Mapping):
        value: Any = {LABEL_POD_DOMAIN: domain.uid}
        ops.append({"op": "add", "path": "/metadata/labels", "value": value})
    elif labels.get(LABEL_POD_DOMAIN) != domain.uid:
        path = f"/metadata/labels/{escape_key(LABEL_POD_DOMAIN)}"
        ops.append({"op": "add", "path": path, "value": domain.uid})
    term = {
        "labelSelector": {"matchLabels": {LABEL_POD_DOMAIN: domain.uid}},
        "topologyKey": LABEL_NVLINK_DOMAIN,
    }
    affinity = spec.get("affinity")
    together = as_map(as_map(affinity).get("podAffinity"))
    terms = together.get(AFFINITY)
    if not isinstance(affinity, Mapping):
        value = {"podAffinity": {AFFINITY: [term]}}
        ops.append({"op": "add", "path": "/spec/affinity", "value": value})
    elif "podAffinity" not in affinity:
        ops.append({"op": "add", "path": "/spec/affinity/podAffinity", "value": {AFFINITY: [term]}})
    elif not isinstance(terms, list):
        ops.append({"op": "add", "path": f"/spec/affinity/podAffinity/{AFFINITY}", "value": [term]})
    elif term not in terms:
        ops.append({"op": "add", "path": f"/spec/affinity/podAffinity/{AFFINITY}/-", "value": term})
    return ImexAdmission(ops=ops)

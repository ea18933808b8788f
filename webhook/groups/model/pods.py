"""What placement reads of a Pod besides its GPUs (objects.py) and its own index (indexes.py):
the group it asks for, the workload that owns it, its labels, the claims it makes, and what
kube-scheduler said of it. Pure; read once as the pod arrives (records.py) or at admission."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.groups.model.indexes import JOBSET_NAME
from webhook.groups.model.names import (
    ANN_GROUP,
    ANN_LEVEL,
    ANN_LOCALITY,
    ANN_SIZE,
    KUEUE_PREFIX,
    KUEUE_QUEUE_LABEL,
    LEVELS,
    LOCALITIES,
    Level,
    Locality,
    choice,
)
from webhook.groups.model.objects import as_map

Owner = tuple[str, str, str, str]  # a controller's apiVersion, kind, name, uid
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"

# A label value: at most 63 characters, alphanumerics at both ends, -_. inside (apimachinery).
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    size: int
    locality: Locality = "required"
    level: Level | Literal["auto"] = "auto"


def parse_group(annotations: Mapping[str, Any]) -> tuple[GroupSpec | None, list[str]]:
    """The group a pod asks for (None if it asks for none) and every problem with the values."""
    problems: list[str] = []
    name = annotations.get(ANN_GROUP)
    if name is None:
        problems += [
            f"{key}: needs {ANN_GROUP} (the group's name) as well"
            for key in (ANN_SIZE, ANN_LOCALITY, ANN_LEVEL)
            if key in annotations
        ]
        return None, problems
    name = str(name)
    if not _LABEL_VALUE.fullmatch(name):
        problems.append(
            f"{ANN_GROUP}: {name!r} is not a valid label value (1-63 characters: letters, digits, "
            "'-', '_', '.', starting and ending with a letter or digit)"
        )
    size = 0
    raw_size = annotations.get(ANN_SIZE)
    text = str(raw_size).strip() if raw_size is not None else ""
    if raw_size is None:
        problems.append(f"{ANN_SIZE}: missing; the number of pods in the group, an integer >= 1")
    elif not text.isdigit():
        problems.append(f"{ANN_SIZE}: {raw_size!r} is not an integer >= 1")
    elif not 1 <= int(text) <= _INT64_MAX:
        problems.append(
            f"{ANN_SIZE}: {_cut(text)} is out of range; accepted values: integers from 1 to "
            f"{_INT64_MAX}"
        )
    else:
        size = int(text)
    raw_locality = annotations.get(ANN_LOCALITY, "required")
    locality = choice(raw_locality, LOCALITIES)
    if locality is None:
        problems.append(
            f"{ANN_LOCALITY}: {str(raw_locality).strip()!r} is not valid; accepted values: "
            f"{', '.join(LOCALITIES)}"
        )
    raw_level = annotations.get(ANN_LEVEL, "auto")
    level = choice(raw_level, ("auto", *LEVELS))
    if level is None:
        problems.append(
            f"{ANN_LEVEL}: {str(raw_level).strip()!r} is not valid; accepted values: auto, "
            f"{', '.join(LEVELS)}"
        )
    if problems or locality is None or level is None:
        return None, problems
    return GroupSpec(name, size, locality, level), []  # type: ignore[arg-type]


def _cut(text: str, limit: int = 40) -> str:
    """A long number, shortened for a message."""
    return text if len(text) <= limit else f"{text[:20]}...({len(text)} digits)"


def kueue_managed(pod: Mapping[str, Any]) -> bool:
    meta, spec = as_map(pod.get("metadata")), as_map(pod.get("spec"))
    gates = spec.get("schedulingGates")
    return KUEUE_QUEUE_LABEL in as_map(meta.get("labels")) or any(
        str(g.get("name", "")).startswith(KUEUE_PREFIX)
        for g in (gates if isinstance(gates, list) else [])
        if isinstance(g, Mapping)
    )


def controller_of(meta: Mapping[str, Any]) -> Owner | None:
    """What owns the pod's workload: its JobSet (whose child Jobs are the pods' controllers; the
    pods carry its name and UID as labels), else its controller (the ownerReference with
    controller: true: a Job, MPIJob, PyTorchJob ...), if any."""
    labels = meta.get("labels") or {}
    name, uid = labels.get(JOBSET_NAME), labels.get(JOBSET_UID)
    if isinstance(name, str) and isinstance(uid, str) and name and uid:
        return JOBSET_API, "JobSet", name, uid
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            parts = (ref.get(k) for k in ("apiVersion", "kind", "name", "uid"))
            api_version, kind, name, uid = (str(p or "") for p in parts)
            if api_version and kind and name and uid:
                return api_version, kind, name, uid
    return None


Labels = tuple[tuple[str, str], ...]  # a pod's labels, sorted (PodDisruptionBudgets select by them)
_EMPTY: Labels = ()
_interned: dict[Labels, Labels] = {}


def labels_of(raw: object) -> Labels:
    """A pod's labels as one shared tuple: pods of one controller mostly carry the same set."""
    if not isinstance(raw, Mapping) or not raw:
        return _EMPTY
    items = tuple(sorted((str(k), str(v)) for k, v in raw.items()))
    if len(_interned) > 65_536:  # odd sets (an index label each) must not pile up
        _interned.clear()
    return _interned.setdefault(items, items)


def claimed_templates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaimTemplates a pod's spec.resourceClaims name."""
    claims = spec.get("resourceClaims")
    return tuple(
        str(c["resourceClaimTemplateName"])
        for c in (claims if isinstance(claims, list) else [])
        if isinstance(c, Mapping) and isinstance(c.get("resourceClaimTemplateName"), str)
    )


def named_group(spec: Mapping[str, Any]) -> str:
    """The PodGroup a pod spec names (spec.schedulingGroup.podGroupName; "" for none)."""
    group = spec.get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else ""


def scheduler_message(status: Mapping[str, Any]) -> str:
    """kube-scheduler's last word on an unbound pod: its PodScheduled=False condition's message
    (e.g. "0/128 nodes are available: ... 8 Insufficient nvidia.com/gpu"), "" when none."""
    for c in status.get("conditions") or []:
        if not isinstance(c, Mapping):
            continue
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return ""


def nominated_node(status: Mapping[str, Any]) -> str:
    """status.nominatedNodeName: the node kube-scheduler keeps room on for this pending pod."""
    return str(status.get("nominatedNodeName") or "")

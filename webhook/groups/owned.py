"""The objects the placer makes for a group (its PodGroup, its ComputeDomain): labelled as ours
with the group they serve, and owned by the members' shared controller, so that deleting that
controller deletes them too. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhook.groups.names import LABEL_GROUP, PLACER_FIELD_MANAGER

LABEL_MANAGED: Final = "app.kubernetes.io/managed-by"
OURS: Final = f"{LABEL_MANAGED}={PLACER_FIELD_MANAGER}"  # their label selector
Owner = tuple[str, str, str, str]  # a controller's apiVersion, kind, name, uid
JOBSET_NAME, JOBSET_UID = "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/jobset-uid"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def owned_meta(namespace: str, name: str, group: str, owner: Owner | None) -> dict[str, Any]:
    """The metadata of an object made for `group`."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {LABEL_GROUP: group, LABEL_MANAGED: PLACER_FIELD_MANAGER},
    }
    if owner is not None:  # deleting the members' controller deletes the object too
        api_version, kind, owner_name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid}
        ]
    return meta


def our_group(meta: Mapping[str, Any]) -> str | None:
    """The group an object serves when the placer made it, else None."""
    labels = meta.get("labels") or {}
    group = labels.get(LABEL_GROUP)
    if labels.get(LABEL_MANAGED) != PLACER_FIELD_MANAGER or not group:
        return None
    return str(group)


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

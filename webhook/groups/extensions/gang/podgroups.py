"""PodGroups as gpufabric reads and writes them: the object the placer creates for a group (in
the version the cluster serves), and the book of the PodGroups it made (framework/owned.py's,
kept current by its watch). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.extensions.gang.names import PG_GROUP, PG_KIND, PODGROUPS
from webhook.groups.framework import owned
from webhook.groups.framework.owned import Found, found_of, our_group, owned_meta
from webhook.groups.model.pods import Owner


@dataclass(frozen=True, slots=True)
class Made:
    """One of our PodGroups as listed."""

    namespace: str
    name: str
    uid: str
    group: str
    deleting: bool = False
    owner_uid: str = ""  # the controller it names (framework/owned.py: adopted only by that UID)
    min_count: int = 0  # spec.schedulingPolicy.gang.minCount
    finalizers: tuple[str, ...] = ()  # none of the placer's (owned.OwnedKind.finalizer)

    @property
    def found(self) -> Found:
        return Found(self.uid, self.group, self.owner_uid, self.deleting)


def made_of(obj: Mapping[str, Any]) -> Made | None:
    """Ours (labelled by the placer), else None."""
    meta = obj.get("metadata") or {}
    group = our_group(meta)
    if group is None:
        return None
    found = found_of(meta)
    gang = ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    count = gang.get("minCount")
    return Made(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=found.uid,
        group=group,
        deleting=found.deleting,
        owner_uid=found.owner_uid,
        min_count=count if isinstance(count, int) else 0,
        finalizers=tuple(str(f) for f in meta.get("finalizers") or ()),
    )


def pod_group(
    namespace: str, name: str, group: str, min_count: int, owner: Owner | None, version: str
) -> dict[str, Any]:
    """The PodGroup of a group in `version`: a gang of `min_count` (kube-scheduler binds none of
    its pods until that many of them can be bound together), disrupted whole, as the placer's own
    preemption does: v1beta1 (1.37) says so as `disruptionMode: {all: {}}`, 1.36's v1alpha2 as
    `disruptionMode: PodGroup` (which the API server drops, defaulting to Pod, unless
    WorkloadAwarePreemption is on)."""
    mode: object = {"all": {}} if version == "v1beta1" else "PodGroup"
    spec = {**gang_spec(min_count), "disruptionMode": mode}
    return {
        "apiVersion": f"{PG_GROUP}/{version}",
        "kind": PG_KIND,
        "metadata": owned_meta(namespace, name, group, owner),
        "spec": spec,
    }


def gang_spec(min_count: int) -> dict[str, Any]:
    """The spec fields of a gang of `min_count` (mutable from v1beta1 on)."""
    return {"schedulingPolicy": {"gang": {"minCount": min_count}}}


def too_large(name: str, min_count: int, members: int) -> str:
    """Why a group waits for a PodGroup of its name that is a larger gang than its members can
    make, where minCount cannot change (Kubernetes 1.36's v1alpha2)."""
    return (
        f"PodGroup {name} is a gang of {min_count}, more than the {members} members that name "
        "it can make, and on this Kubernetes its minCount cannot change; it goes only once no "
        "pod names it: delete this group's pods and that PodGroup"
    )


class Book(owned.Book[Made]):
    """Our PodGroups, and whether (in which version) the cluster serves the kind at all."""

    def __init__(self) -> None:
        super().__init__(PODGROUPS, made_of)

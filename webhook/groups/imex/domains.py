"""ComputeDomains as gpufabric reads and writes them: the object the placer creates for a group,
and the book of the ComputeDomains a cluster has (which templates they declare, which are ours),
kept current from a list and watch. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.imex.names import (
    CD_GROUP,
    CD_KIND,
    CD_VERSION,
    LABEL_GROUP,
    LABEL_MANAGED,
    MANAGER,
    template_name,
)

Owner = tuple[str, str, str, str]  # a controller's apiVersion, kind, name, uid
JOBSET_NAME, JOBSET_UID = "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/jobset-uid"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


@dataclass(frozen=True, slots=True)
class Domain:
    """One ComputeDomain as listed."""

    namespace: str
    name: str
    uid: str
    template: str  # spec.channel.resourceClaimTemplate.name
    group: str | None  # the group it serves, when the placer made it
    deleting: bool = False


def domain_of(obj: Mapping[str, Any]) -> Domain:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    labels = meta.get("labels") or {}
    ours = labels.get(LABEL_MANAGED) == MANAGER and labels.get(LABEL_GROUP)
    template = ((spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name")
    return Domain(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        template=str(template or ""),
        group=str(ours) if ours else None,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def compute_domain(namespace: str, group: str, owner: Owner | None) -> dict[str, Any]:
    """The ComputeDomain of a group: named after it, declaring its channel template. No numNodes
    (deprecated; 0: the daemons start without waiting for their peers)."""
    meta: dict[str, Any] = {
        "name": group,
        "namespace": namespace,
        "labels": {LABEL_GROUP: group, LABEL_MANAGED: MANAGER},
    }
    if owner is not None:  # deleting the members' controller deletes the ComputeDomain too
        api_version, kind, name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
        ]
    return {
        "apiVersion": f"{CD_GROUP}/{CD_VERSION}",
        "kind": CD_KIND,
        "metadata": meta,
        "spec": {"channel": {"resourceClaimTemplate": {"name": template_name(group)}}},
    }


class Book:
    """The ComputeDomains of the cluster, and whether the cluster serves the kind at all."""

    def __init__(self) -> None:
        self.served: bool | None = None  # None: not known yet (no list answered)
        self.by_name: dict[tuple[str, str], Domain] = {}
        self.by_template: dict[tuple[str, str], Domain] = {}

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """A complete list (a list that answered is served, unless set_served says not)."""
        if self.served is None:
            self.served = True
        fresh = Book()
        for obj in items:
            fresh.event("ADDED", obj)
        self.by_name, self.by_template = fresh.by_name, fresh.by_template  # readers: whole

    def set_served(self, served: bool) -> None:
        """Whether the API server serves computedomains.resource.nvidia.com (no: HTTP 404)."""
        self.served = served
        if not served:
            self.by_name, self.by_template = {}, {}

    def unserved(self) -> None:
        self.set_served(False)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        d = domain_of(obj)
        old = self.by_name.pop((d.namespace, d.name), None)
        if old is not None and self.by_template.get((old.namespace, old.template)) == old:
            del self.by_template[(old.namespace, old.template)]
        if kind != "DELETED":
            self.by_name[(d.namespace, d.name)] = d
            if d.template:
                self.by_template[(d.namespace, d.template)] = d

    def declaring(self, namespace: str, templates: Iterable[str]) -> Domain | None:
        """The ComputeDomain in the namespace that declares one of these templates."""
        for t in templates:
            d = self.by_template.get((namespace, t))
            if d is not None:
                return d
        return None

    def ours(self) -> list[Domain]:
        return [d for d in self.by_name.values() if d.group is not None]


def claimed_templates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The ResourceClaimTemplates a pod's spec.resourceClaims name."""
    claims = spec.get("resourceClaims")
    return tuple(
        str(c["resourceClaimTemplateName"])
        for c in (claims if isinstance(claims, list) else [])
        if isinstance(c, Mapping) and isinstance(c.get("resourceClaimTemplateName"), str)
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

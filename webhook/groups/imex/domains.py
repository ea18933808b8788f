"""ComputeDomains as gpufabric reads and writes them: the object the placer creates for a group,
and the book of the ComputeDomains a cluster has (which templates they declare, which are ours),
kept current from a list and watch. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.imex.names import CD_GROUP, CD_KIND, CD_VERSION, FINALIZER, template_name
from webhook.groups.model.pods import Owner
from webhook.groups.owned import Found, found_of, owned_meta


@dataclass(frozen=True, slots=True)
class Domain:
    """One ComputeDomain as listed."""

    namespace: str
    name: str
    uid: str
    template: str  # spec.channel.resourceClaimTemplate.name
    group: str | None  # the group it serves, when the placer made it
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    owner_uid: str = ""  # the controller it names (owned.py: adopted only by that UID)

    @property
    def found(self) -> Found:
        return Found(self.uid, self.group, self.owner_uid, self.deleting)

    @property
    def held(self) -> bool:
        """The placer's finalizer is on it (removed once the group's last member is gone)."""
        return FINALIZER in self.finalizers


def domain_of(obj: Mapping[str, Any]) -> Domain:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    template = ((spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name")
    found = found_of(meta)
    return Domain(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=found.uid,
        template=str(template or ""),
        group=found.group,
        deleting=found.deleting,
        finalizers=tuple(str(f) for f in meta.get("finalizers") or ()),
        owner_uid=found.owner_uid,
    )


def compute_domain(namespace: str, group: str, owner: Owner | None) -> dict[str, Any]:
    """The ComputeDomain of a group: named after it, declaring its channel template, held by the
    placer's finalizer until the group's last member is gone (the garbage collector deletes it
    with the owner, while the members may still be terminating). No numNodes here: the driver's
    API adds it where the served CRD requires it (imex/kube.py)."""
    meta = owned_meta(namespace, group, group, owner)
    meta["finalizers"] = [FINALIZER]
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
        self.version = 0  # bumps when the declared templates change (their readers ask again)

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """A complete list (a list that answered is served, unless set_served says not)."""
        if self.served is None:
            self.served = True
        self.version += 1
        fresh = Book()
        for obj in items:
            fresh.event("ADDED", obj)
        self.by_name, self.by_template = fresh.by_name, fresh.by_template  # readers: whole

    def set_served(self, served: bool) -> None:
        """Whether the API server serves computedomains.resource.nvidia.com (no: HTTP 404)."""
        self.served = served
        self.version += 1
        if not served:
            self.by_name, self.by_template = {}, {}

    def unserved(self) -> None:
        self.set_served(False)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        d = domain_of(obj)
        old = self.by_name.pop((d.namespace, d.name), None)
        if kind == "DELETED" or old is None or old.template != d.template:
            self.version += 1  # which templates are declared changed (not a status update)
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

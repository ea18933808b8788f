"""ComputeDomains as gpufabric reads and writes them: the object the placer creates for a group,
and the book of the ComputeDomains a cluster has (framework/owned.py's, kept current by its
watch, plus which templates they declare). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.extensions.imex.names import (
    CD_GROUP,
    CD_KIND,
    CD_VERSION,
    COMPUTE_DOMAINS,
    FINALIZER,
    template_name,
)
from webhook.groups.framework import owned
from webhook.groups.framework.owned import Found, found_of, owned_meta
from webhook.groups.model.pods import Owner


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
    owner_uid: str = ""  # the controller it names (framework/owned.py: adopted only by that UID)

    @property
    def found(self) -> Found:
        return Found(self.uid, self.group, self.owner_uid, self.deleting)


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


def compute_domain(
    namespace: str, group: str, owner: Owner | None, nodes: int | None = None
) -> dict[str, Any]:
    """The ComputeDomain of a group: named after it, declaring its channel template, held by the
    placer's finalizer until the group's last member is gone (the garbage collector deletes it
    with the owner, while the members may still be terminating). numNodes = `nodes` (the group's
    node count, one member a node), sent only where the served CRD requires it (names.py)."""
    meta = owned_meta(namespace, group, group, owner)
    meta["finalizers"] = [FINALIZER]
    spec: dict[str, Any] = {"channel": {"resourceClaimTemplate": {"name": template_name(group)}}}
    if nodes is not None:
        spec["numNodes"] = nodes
    return {
        "apiVersion": f"{CD_GROUP}/{CD_VERSION}",
        "kind": CD_KIND,
        "metadata": meta,
        "spec": spec,
    }


class Book(owned.Book[Domain]):
    """The ComputeDomains of the cluster, and whether the cluster serves the kind at all; which
    templates they declare (`by_template`, `changes` counting each change of that)."""

    def __init__(self) -> None:
        super().__init__(COMPUTE_DOMAINS, domain_of)
        self.by_template: dict[tuple[str, str], Domain] = {}
        self.changes = 0  # bumps when the declared templates change (their readers ask again)

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        super().listed(items)
        self.changes += 1
        domains = self.by_name.values()
        self.by_template = {(d.namespace, d.template): d for d in domains if d.template}

    def set_served(self, version: str) -> None:
        super().set_served(version)
        self.changes += 1
        if not version:
            self.by_template = {}

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        d = domain_of(obj)
        old = self.by_name.get((d.namespace, d.name))
        super().event(kind, obj)
        if kind == "DELETED" or old is None or old.template != d.template:
            self.changes += 1  # which templates are declared changed (not a status update)
        if old is not None and self.by_template.get((old.namespace, old.template)) == old:
            del self.by_template[(old.namespace, old.template)]
        if kind != "DELETED" and d.template:
            self.by_template[(d.namespace, d.template)] = d

    def declaring(self, namespace: str, templates: Iterable[str]) -> Domain | None:
        """The ComputeDomain in the namespace that declares one of these templates."""
        for t in templates:
            d = self.by_template.get((namespace, t))
            if d is not None:
                return d
        return None

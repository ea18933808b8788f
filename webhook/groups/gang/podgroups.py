"""PodGroups as gpufabric reads and writes them: the object the placer creates for a group, and
the book of the PodGroups it made (kept current from a list and watch). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.groups.gang.names import (
    PG_GROUP,
    PG_KIND,
    PG_VERSION,
)
from webhook.groups.owned import Owner, our_group, owned_meta


@dataclass(frozen=True, slots=True)
class Made:
    """One of our PodGroups as listed."""

    namespace: str
    name: str
    uid: str
    group: str
    deleting: bool = False


def made_of(obj: Mapping[str, Any]) -> Made | None:
    """Ours (labelled by the placer), else None."""
    meta = obj.get("metadata") or {}
    group = our_group(meta)
    if group is None:
        return None
    return Made(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        group=group,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def pod_group(
    namespace: str, name: str, group: str, size: int, owner: Owner | None
) -> dict[str, Any]:
    """The PodGroup of a group: a gang of `size` (kube-scheduler binds none of its pods until
    `minCount` of them can be bound together)."""
    return {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}",
        "kind": PG_KIND,
        "metadata": owned_meta(namespace, name, group, owner),
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
    }


class Book:
    """Our PodGroups, and whether the cluster serves the kind at all."""

    def __init__(self) -> None:
        self.served: bool | None = None  # None: not known yet (no list answered)
        self.by_name: dict[tuple[str, str], Made] = {}

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """A whole list (`set_served` said before whether the kind is served)."""
        self.by_name = {}
        for obj in items:
            self.event("ADDED", obj)

    def set_served(self, served: bool) -> None:
        """Whether the API server serves podgroups.scheduling.k8s.io/v1alpha2 (no: HTTP 404)."""
        self.served = served
        if not served:
            self.by_name = {}

    def unserved(self) -> None:
        self.set_served(False)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        m = made_of(obj)
        if m is None:
            return
        if kind == "DELETED":
            self.by_name.pop((m.namespace, m.name), None)
        else:
            self.by_name[(m.namespace, m.name)] = m

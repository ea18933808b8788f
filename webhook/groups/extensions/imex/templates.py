"""The channel ResourceClaimTemplates NVIDIA's ComputeDomain controller has made, kept current
from a list and watch (label resource.nvidia.com/computeDomainTarget=Workload). Pure.

The placer ungates a group only once its ComputeDomain's template exists: a pod whose claim names
a template that is not there yet makes the resource-claim controller retry with a backoff that
grows towards minutes, so the group would bind long after the template came.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.groups.extensions.imex.names import NODE_LABEL


class Templates:
    def __init__(self) -> None:
        self.served: bool | None = None  # None: not listed yet; False: resource.k8s.io/v1 is not
        self.of: dict[tuple[str, str], str] = {}  # (namespace, name) -> its ComputeDomain's UID

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        fresh: dict[tuple[str, str], str] = {}
        for obj in items:
            key, uid = _read(obj)
            if uid:
                fresh[key] = uid
        self.of = fresh
        if self.served is None:
            self.served = True

    def set_served(self, served: bool) -> None:
        self.served = served
        if not served:
            self.of = {}

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        key, uid = _read(obj)
        if kind == "DELETED" or not uid:
            self.of.pop(key, None)
        else:
            self.of[key] = uid

    def ready(self, namespace: str, name: str, uid: str) -> bool:
        """The controller made this ComputeDomain's template (a cluster that does not serve
        resource.k8s.io/v1 cannot tell: it counts as made)."""
        if self.served is False:
            return True
        return bool(uid) and self.of.get((namespace, name)) == uid


def _read(obj: Mapping[str, Any]) -> tuple[tuple[str, str], str]:
    """(namespace, name) and the UID of the ComputeDomain it was made for; '' while it is being
    deleted (the controller deletes it with its ComputeDomain)."""
    meta = obj.get("metadata") or {}
    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    if meta.get("deletionTimestamp"):
        return key, ""
    return key, str((meta.get("labels") or {}).get(NODE_LABEL) or "")

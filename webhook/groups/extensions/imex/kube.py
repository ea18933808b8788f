"""IMEX's own Kubernetes I/O: the channel templates NVIDIA's controller makes. The ComputeDomains
go through the owned objects' one path (framework/ownedkube.py). The only module of the package
that imports kubernetes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from webhook.groups.extensions.imex.names import TEMPLATE_TARGET
from webhook.groups.extensions.imex.templates import Templates
from webhook.groups.framework.timeouts import RECHECK
from webhook.kube.client import served_list_watch
from webhook.kube.watch import Gathered, ListWatch

TEMPLATE_KIND = ("resource.k8s.io", "v1", "resourceclaimtemplates")


def template_watch(
    name: str,
    api_client: client.ApiClient,
    templates: Templates,
    put: Callable[[Callable[[], None]], None],
    changed: Callable[[], None],
) -> ListWatch:
    """The channel templates NVIDIA's controller makes (label computeDomainTarget=Workload),
    every namespace (RBAC: resourceclaimtemplates list, watch), fed to `templates` through `put`
    (the placer's inbox); `changed` after each (its waiting groups are tried again)."""
    selector = f"{TEMPLATE_TARGET}=Workload"

    def served(ok: bool) -> None:
        put(lambda: templates.set_served(ok))

    def listed(items: list[Any]) -> None:
        def apply() -> None:
            templates.listed(items)
            changed()

        put(apply)

    def event(kind: str, obj: Any) -> None:
        def apply() -> None:
            templates.event(kind, obj)
            changed()

        put(apply)

    lister, watcher = served_list_watch(api_client, TEMPLATE_KIND, served, RECHECK, selector)
    return ListWatch(name, lister, watcher, on_list=Gathered(listed), on_event=event)

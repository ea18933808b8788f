"""ComputeDomain I/O: list and watch them cluster-wide (a 404 means the cluster does not serve the
kind: asked again every minute), create one for a group, delete one by UID. The only module of
the package that imports kubernetes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.imex.domains import Book
from webhook.groups.imex.names import (
    CD_GROUP,
    CD_PLURAL,
    CD_VERSION,
    FINALIZER,
    TEMPLATE_TARGET,
)
from webhook.groups.imex.templates import Templates
from webhook.groups.names import PLACER_FIELD_MANAGER
from webhook.groups.refusals import Rejected
from webhook.groups.timeouts import RECHECK, WRITE_TIMEOUT
from webhook.kube.client import delete_custom_object, served_list_watch
from webhook.kube.status import status_words
from webhook.kube.watch import Gathered, Lister, ListWatch, Watcher


def domain_list_watch(
    api_client: client.ApiClient, served: Callable[[bool], None], recheck: float = RECHECK
) -> tuple[Lister, Watcher]:
    """Lister and Watcher of computedomains.resource.nvidia.com, every namespace; a cluster
    without the driver lists none and is asked again every `recheck` seconds."""
    return served_list_watch(api_client, (CD_GROUP, CD_VERSION, CD_PLURAL), served, recheck)


class KubeDomainApi:
    """create/patch/delete for the placer (RBAC: computedomains create, patch, delete): made,
    adopted (owned.py), released and deleted."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.objects = client.CustomObjectsApi(api_client)
        self.num_nodes = False  # the CRD requires spec.numNodes (the driver before v0.4.0)

    def create_domain(
        self, namespace: str, body: Mapping[str, Any], nodes: int
    ) -> Mapping[str, Any]:
        """Created without numNodes; where the CRD requires it (v25.3-v25.12: HTTP 422 naming
        it), with numNodes = the group's node count: there the IMEX daemons may wait for that
        many peers (v25.3; v25.8+ with IMEXDaemonsWithDNSNames=false), and 0 would never form
        the IMEX domain; with DNS names (v25.8+ default) it only sets when status says Ready."""
        try:
            return self._create(namespace, body, nodes)
        except ApiException as err:
            if err.status == 422 and "numNodes" in str(err.body) and not self.num_nodes:
                self.num_nodes = True
                return self.create_domain(namespace, body, nodes)
            if err.status is not None and 400 <= err.status < 500:  # told, tried again later
                name = str((body.get("metadata") or {}).get("name", ""))
                what = f"create of ComputeDomain {namespace}/{name}"
                words = status_words(err.status, err.body)
                raise Rejected("computedomains/create", what, err.status, words) from err
            raise

    def _create(self, namespace: str, body: Mapping[str, Any], nodes: int) -> Mapping[str, Any]:
        sent = dict(body)
        if self.num_nodes:
            sent["spec"] = {**body["spec"], "numNodes": nodes}
        made: Any = self.objects.create_namespaced_custom_object(
            CD_GROUP,
            CD_VERSION,
            namespace,
            CD_PLURAL,
            sent,
            field_manager=PLACER_FIELD_MANAGER,
            _request_timeout=WRITE_TIMEOUT,
        )
        return dict(made)

    def patch_domain(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch (owned.adoption: metadata.uid in it, so only that object: 409
        otherwise); the object as patched."""
        try:
            patched: Any = self.objects.patch_namespaced_custom_object(
                CD_GROUP,
                CD_VERSION,
                namespace,
                CD_PLURAL,
                name,
                dict(patch),
                field_manager=PLACER_FIELD_MANAGER,
                _content_type="application/merge-patch+json",
                _request_timeout=WRITE_TIMEOUT,
            )
        except ApiException as err:
            if err.status is not None and 400 <= err.status < 500:  # told, tried again later
                what = f"adoption of ComputeDomain {namespace}/{name}"
                words = status_words(err.status, err.body)
                raise Rejected("computedomains/patch", what, err.status, words) from err
            raise
        return dict(patched)

    def delete_domain(self, namespace: str, name: str, uid: str) -> None:
        kind = (CD_GROUP, CD_VERSION, CD_PLURAL)
        delete_custom_object(self.objects, kind, namespace, name, uid, WRITE_TIMEOUT)

    def release_domain(self, namespace: str, name: str, uid: str, index: int) -> None:
        """A JSON patch that removes finalizers[index] only if it is still the placer's on the
        object of `uid` (the driver adds and removes its own finalizer beside it): a failed test
        (422) or a gone object (404) changes nothing; the watch brings the object as it is."""
        path = f"/metadata/finalizers/{index}"
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "test", "path": path, "value": FINALIZER},
            {"op": "remove", "path": path},
        ]
        try:
            self.objects.patch_namespaced_custom_object(
                CD_GROUP,
                CD_VERSION,
                namespace,
                CD_PLURAL,
                name,
                ops,
                field_manager=PLACER_FIELD_MANAGER,
                _content_type="application/json-patch+json",
                _request_timeout=WRITE_TIMEOUT,
            )
        except ApiException as err:
            if err.status == 404:
                return
            what = f"finalizer removal from ComputeDomain {namespace}/{name}"
            words = status_words(err.status or 0, err.body)
            raise Rejected("computedomains/patch", what, err.status or 0, words) from err


def domain_watch(
    name: str, api_client: client.ApiClient, book: Book, put: Callable[[Callable[[], None]], None]
) -> ListWatch:
    """The ComputeDomain watch feeding `book` through `put` (the placer's inbox: one thread
    applies everything), or straight (the webhook's book: put = call)."""
    lister, watcher = domain_list_watch(api_client, lambda ok: put(lambda: book.set_served(ok)))
    return ListWatch(
        name,
        lister,
        watcher,
        on_list=Gathered(lambda items: put(lambda: book.listed(items))),
        on_event=lambda kind, obj: put(lambda: book.event(kind, obj)),
    )


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

"""ComputeDomain I/O: list and watch them cluster-wide (a 404 means the cluster does not serve the
kind: asked again every minute), create one for a group, delete one by UID. The only module of
the package that imports kubernetes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.imex.domains import Book
from webhook.groups.imex.names import CD_GROUP, CD_PLURAL, CD_VERSION
from webhook.groups.names import PLACER_FIELD_MANAGER
from webhook.groups.refusals import Rejected, status_words
from webhook.kube.client import delete_custom_object, served_list_watch
from webhook.kube.watch import Gathered, Lister, ListWatch, Watcher

_TIMEOUT = 10
_WRITE_TIMEOUT = 2  # as the placer's pod writes: a demoted leader stops within its lease
RECHECK = 60.0  # seconds between two questions whether the kind is served, while it is not


def domain_list_watch(
    api_client: client.ApiClient, served: Callable[[bool], None], recheck: float = RECHECK
) -> tuple[Lister, Watcher]:
    """Lister and Watcher of computedomains.resource.nvidia.com, every namespace; a cluster
    without the driver lists none and is asked again every `recheck` seconds."""
    return served_list_watch(api_client, (CD_GROUP, CD_VERSION, CD_PLURAL), served, recheck)


class KubeDomainApi:
    """create/delete for the placer (RBAC: computedomains create, delete)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.objects = client.CustomObjectsApi(api_client)
        self.num_nodes = False  # the CRD requires spec.numNodes (the driver before v0.4.0)

    def create_domain(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Created without numNodes; where the CRD requires it (v25.3-v25.12: HTTP 422 naming
        it), with numNodes 0, which there means the same (IMEXDaemonsWithDNSNames, on by
        default since v25.8: the daemons start without waiting for their peers)."""
        try:
            return self._create(namespace, body)
        except ApiException as err:
            if err.status == 422 and "numNodes" in str(err.body) and not self.num_nodes:
                self.num_nodes = True
                return self.create_domain(namespace, body)
            if err.status is not None and 400 <= err.status < 500:  # told, tried again later
                name = str((body.get("metadata") or {}).get("name", ""))
                what = f"create of ComputeDomain {namespace}/{name}"
                words = status_words(err.status, err.body)
                raise Rejected("computedomains/create", what, err.status, words) from err
            raise

    def _create(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        sent = dict(body)
        if self.num_nodes:
            sent["spec"] = {**body["spec"], "numNodes": 0}
        made: Any = self.objects.create_namespaced_custom_object(
            CD_GROUP,
            CD_VERSION,
            namespace,
            CD_PLURAL,
            sent,
            field_manager=PLACER_FIELD_MANAGER,
            _request_timeout=_WRITE_TIMEOUT,
        )
        return dict(made)

    def delete_domain(self, namespace: str, name: str, uid: str) -> None:
        kind = (CD_GROUP, CD_VERSION, CD_PLURAL)
        delete_custom_object(self.objects, kind, namespace, name, uid, _WRITE_TIMEOUT)


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

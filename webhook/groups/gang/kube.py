"""Native gangs' Kubernetes I/O: the list+watch of the placer's PodGroups, which also says
whether the cluster serves the kind; PodGroups made and deleted. Partly bound members go through
the placer's Eviction (groups/kube.py).

Served: listing podgroups at scheduling.k8s.io/v1alpha2 works; HTTP 404 when the API server does
not serve it (no GenericWorkload, or older than 1.36), as imex/kube.py finds ComputeDomains: the
list is then empty and asked again every RECHECK seconds. The webhook keeps the answer in a Book
(podgroups.Book.served), so a review is answered from memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.gang.names import PG_GROUP, PG_PLURAL, PG_VERSION
from webhook.groups.gang.podgroups import Book
from webhook.groups.owned import OURS
from webhook.groups.refusals import Rejected, status_words
from webhook.kube.client import delete_custom_object, served_list_watch
from webhook.kube.watch import Gathered, Lister, ListWatch, Watcher

_TIMEOUT = 10
_WRITE_TIMEOUT = 2  # as the placer's other writes (groups/kube.py): a demoted leader stops fast
RECHECK = 60.0  # seconds between two questions whether the kind is served, while it is not


class KubeGangApi:
    def __init__(self, api_client: client.ApiClient, placer: Any) -> None:
        self.objects = client.CustomObjectsApi(api_client)
        # the placer's Events and Evictions (groups/kube.py KubePlacerApi): a member goes
        # through the Eviction API (pods/eviction; no delete on pods): a Pending pod passes
        # every PodDisruptionBudget, and the DisruptionTarget condition it gets lets a Job's
        # podFailurePolicy Ignore it
        self.event = placer.event
        self.evict_pod = placer.evict_pod

    def create_podgroup(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            made: Any = self.objects.create_namespaced_custom_object(
                PG_GROUP, PG_VERSION, namespace, PG_PLURAL, dict(body), _request_timeout=_TIMEOUT
            )
        except ApiException as err:
            if err.status == 409:
                return body  # AlreadyExists: ours from a moment ago; the watch brings its UID
            if err.status is None or not 400 <= err.status < 500:
                raise
            name = str((body.get("metadata") or {}).get("name", ""))
            what = f"create of PodGroup {namespace}/{name}"
            words = status_words(err.status, err.body)
            raise Rejected("podgroups/create", what, err.status, words) from err
        return dict(made)

    def delete_podgroup(self, namespace: str, name: str, uid: str) -> None:
        kind = (PG_GROUP, PG_VERSION, PG_PLURAL)
        delete_custom_object(self.objects, kind, namespace, name, uid, _WRITE_TIMEOUT)


def podgroup_list_watch(
    api_client: client.ApiClient, served: Callable[[bool], None], recheck: float | None = None
) -> tuple[Lister, Watcher]:
    """The PodGroups the placer made, in every namespace (RBAC: podgroups list, watch); a cluster
    that does not serve them lists none and is asked again every `recheck` seconds."""
    kind = (PG_GROUP, PG_VERSION, PG_PLURAL)
    wait = RECHECK if recheck is None else recheck
    return served_list_watch(api_client, kind, served, wait, label_selector=OURS)


def podgroup_watch(
    name: str, api_client: client.ApiClient, book: Book, put: Callable[[Callable[[], None]], None]
) -> ListWatch:
    """The PodGroup watch feeding `book` through `put` (the placer's inbox), or straight (the
    webhook's: put = call)."""
    lister, watcher = podgroup_list_watch(api_client, lambda ok: put(lambda: book.set_served(ok)))
    return ListWatch(
        name,
        lister,
        watcher,
        on_list=Gathered(lambda items: put(lambda: book.listed(items))),
        on_event=lambda kind, obj: put(lambda: book.event(kind, obj)),
    )

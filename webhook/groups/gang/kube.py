"""Native gangs' Kubernetes I/O: the list+watch of the placer's PodGroups, which also says
whether and in which version the cluster serves the kind; PodGroups made and deleted. Partly bound
members go through the placer's Eviction (groups/kube.py).

Served: the first of names.PG_VERSIONS whose podgroups list answers (1.37: v1beta1; 1.36:
v1alpha2; HTTP 404 from each where GenericWorkload is off, or older than 1.36), as imex/kube.py
finds ComputeDomains: with none, the list is empty and asked again every RECHECK seconds. The
webhook keeps the answer in a Book (podgroups.Book.served), so a review is answered from memory.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.gang.names import PG_GROUP, PG_PLURAL, PG_VERSIONS
from webhook.groups.gang.podgroups import Book
from webhook.groups.owned import OURS
from webhook.groups.refusals import Rejected
from webhook.groups.timeouts import RECHECK, TIMEOUT, WRITE_TIMEOUT
from webhook.kube.client import delete_custom_object, served_list_watch
from webhook.kube.status import status_words
from webhook.kube.watch import Gathered, Lister, ListWatch, Page, Watcher


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
        """The created object; where one of the name exists already (409), that one, read
        back (ours from a moment ago, an earlier owner's, or a user's: the caller judges)."""
        version = str(body["apiVersion"]).rpartition("/")[2]
        try:
            made: Any = self.objects.create_namespaced_custom_object(
                PG_GROUP, version, namespace, PG_PLURAL, dict(body), _request_timeout=TIMEOUT
            )
        except ApiException as err:
            name = str((body.get("metadata") or {}).get("name", ""))
            if err.status == 409:  # AlreadyExists: read back, whosever it is
                made = self.objects.get_namespaced_custom_object(
                    PG_GROUP, version, namespace, PG_PLURAL, name, _request_timeout=TIMEOUT
                )
                return dict(made)
            if not _refusal(err):
                raise
            raise _rejected(err, "create", f"create of PodGroup {namespace}/{name}") from err
        return dict(made)

    def patch_podgroup(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        try:
            patched: Any = self.objects.patch_namespaced_custom_object(
                PG_GROUP,
                version,
                namespace,
                PG_PLURAL,
                name,
                dict(patch),
                _content_type="application/merge-patch+json",
                _request_timeout=WRITE_TIMEOUT,
            )
        except ApiException as err:  # 409: no longer that object (metadata.uid precondition)
            if not _refusal(err):
                raise
            raise _rejected(err, "patch", f"patch of PodGroup {namespace}/{name}") from err
        return dict(patched)

    def delete_podgroup(self, namespace: str, name: str, uid: str, version: str) -> None:
        kind = (PG_GROUP, version, PG_PLURAL)
        delete_custom_object(self.objects, kind, namespace, name, uid, WRITE_TIMEOUT)


def _refusal(err: ApiException) -> bool:
    """A 4xx: the API server refused the write (anything else is raised as it is)."""
    return err.status is not None and 400 <= err.status < 500


def _rejected(err: ApiException, verb: str, what: str) -> Rejected:
    """The placer's Rejected: told once, the group retried after a growing wait."""
    return Rejected(f"podgroups/{verb}", what, err.status, status_words(err.status, err.body))


def podgroup_list_watch(
    api_client: client.ApiClient, served: Callable[[str], None], recheck: float | None = None
) -> tuple[Lister, Watcher]:
    """The PodGroups the placer made, in every namespace (RBAC: podgroups list, watch), in the
    newest version the cluster serves; `served` hears that version after each list ("" for
    none: the list is empty and asked again every `recheck` seconds)."""
    wait = RECHECK if recheck is None else recheck
    answered: dict[str, bool] = {}
    pairs = {
        v: served_list_watch(
            api_client,
            (PG_GROUP, v, PG_PLURAL),
            functools.partial(answered.__setitem__, v),
            wait,
            label_selector=OURS,
        )
        for v in PG_VERSIONS
    }
    current = [""]

    def lister() -> Iterator[Page]:
        for v in PG_VERSIONS:
            pages = list(pairs[v][0]())  # our PodGroups: one small object per group
            if answered.get(v):
                current[0] = v
                yield from pages
                served(v)
                return
        current[0] = ""
        yield Page([], "")
        served("")

    def watcher(version: str) -> Iterator[Any]:
        # none served: the oldest version's watch waits `recheck` and asks for a new list
        return iter(pairs[current[0] or PG_VERSIONS[-1]][1](version))

    return lister, watcher


def podgroup_watch(
    name: str, api_client: client.ApiClient, book: Book, put: Callable[[Callable[[], None]], None]
) -> ListWatch:
    """The PodGroup watch feeding `book` through `put` (the placer's inbox), or straight (the
    webhook's: put = call)."""
    lister, watcher = podgroup_list_watch(api_client, lambda v: put(lambda: book.set_served(v)))
    return ListWatch(
        name,
        lister,
        watcher,
        on_list=Gathered(lambda items: put(lambda: book.listed(items))),
        on_event=lambda kind, obj: put(lambda: book.event(kind, obj)),
    )

"""The Kubernetes I/O of the objects groups own, one path for every kind (owned.OwnedKind): the
list+watch that also finds which version the cluster serves, and the placer's writes, with one
mapping of the API server's answers.

Served: the first of kind.versions whose list answers (PodGroups: 1.37 v1beta1, 1.36 v1alpha2;
HTTP 404 from each where the API group is off, or the CRD not installed); with none, the list is
empty and asked again every RECHECK seconds. Admission and the placer keep the answer in the
kind's Book, so a review is answered from memory.

What the API server answers a write, for every kind alike:
- 409 to a create (AlreadyExists): the object of that name read back, whosever it is (the
  lifecycle judges: ours from a moment ago, an earlier owner's to adopt, or not ours);
- 422 to a create naming one of kind.optional: sent again with it (and so is every later one);
- 404 or 409 to a delete (gone; another object of the name now: the UID precondition) and 404 to
  a finalizer's removal (gone): done, nothing to do;
- any other 4xx (403 RBAC, 404 gone or the kind no longer served, 409 a patch's UID precondition:
  another object now, 422 invalid or a ValidatingAdmissionPolicy or a failed JSON-patch test):
  refusals.Rejected with the API server's words: told once, the group tried again after a growing
  wait;
- anything else (5xx, a timeout) is raised as it is: logged, tried again at the next reconcile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.framework.owned import OURS, Book, OwnedKind, R
from webhook.groups.framework.refusals import Rejected
from webhook.groups.framework.timeouts import RECHECK, TIMEOUT, WRITE_TIMEOUT
from webhook.groups.model.names import PLACER_FIELD_MANAGER
from webhook.kube.client import delete_custom_object, served_list_watch
from webhook.kube.status import status_words
from webhook.kube.watch import Gathered, Lister, ListWatch, Page, Watcher

MERGE = "application/merge-patch+json"


class KubeOwnedApi:
    """The placer's writes of one kind (RBAC: its create, get, patch, delete)."""

    def __init__(self, api_client: client.ApiClient, kind: OwnedKind) -> None:
        self.objects = client.CustomObjectsApi(api_client)
        self.kind = kind
        self.required: set[str] = set()  # kind.optional fields the served CRD requires

    def create_owned(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        version = str(body["apiVersion"]).rpartition("/")[2]
        name = str((body.get("metadata") or {}).get("name", ""))
        where = (self.kind.group, version, namespace, self.kind.plural)
        try:
            made: Any = self.objects.create_namespaced_custom_object(
                *where,
                self._sent(body),
                field_manager=PLACER_FIELD_MANAGER,
                _request_timeout=TIMEOUT,
            )
        except ApiException as err:
            needed = [f for f in self.kind.optional if f in str(err.body or "")]
            if err.status == 422 and set(needed) - self.required:
                self.required |= set(needed)  # this CRD requires it: so does every later create
                return self.create_owned(namespace, body)
            if err.status != 409:
                self._refuse(err, "create", f"create of {self.kind.kind} {namespace}/{name}")
            try:  # AlreadyExists: read back, whosever it is
                made = self.objects.get_namespaced_custom_object(
                    *where, name, _request_timeout=TIMEOUT
                )
            except ApiException as again:  # gone meanwhile: asked again later
                self._refuse(again, "get", f"read of {self.kind.kind} {namespace}/{name}")
        return dict(made)

    def _sent(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The body without the optional spec fields this CRD has not required."""
        left_out = set(self.kind.optional) - self.required
        spec = body.get("spec")
        if not left_out or not isinstance(spec, Mapping):
            return dict(body)
        return {**body, "spec": {k: v for k, v in spec.items() if k not in left_out}}

    def patch_owned(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch: an adoption (owned.adoption) or a spec change, on the condition of
        metadata.uid (409 where the object of the name is another one now)."""
        verb = "adoption of" if "ownerReferences" in (patch.get("metadata") or {}) else "patch of"
        return dict(
            self._patch(namespace, name, version, dict(patch), MERGE, f"{verb} {self.kind.kind}")
        )

    def delete_owned(self, namespace: str, name: str, uid: str, version: str) -> None:
        kind = (self.kind.group, version, self.kind.plural)
        try:
            delete_custom_object(self.objects, kind, namespace, name, uid, WRITE_TIMEOUT)
        except ApiException as err:
            self._refuse(err, "delete", f"delete of {self.kind.kind} {namespace}/{name}")

    def release_owned(self, namespace: str, name: str, uid: str, version: str, index: int) -> None:
        """A JSON patch that removes finalizers[index] only if it is still the placer's on the
        object of `uid` (another controller adds and removes its own beside it): a failed test
        (422) changes nothing and is asked again; a gone object (404) is done."""
        path = f"/metadata/finalizers/{index}"
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "test", "path": path, "value": self.kind.finalizer},
            {"op": "remove", "path": path},
        ]
        what = f"finalizer removal from {self.kind.kind}"
        try:
            self._patch(namespace, name, version, ops, "application/json-patch+json", what)
        except Rejected as err:
            if err.code != 404:
                raise

    def _patch(
        self, namespace: str, name: str, version: str, body: Any, content: str, what: str
    ) -> Any:
        try:
            return self.objects.patch_namespaced_custom_object(
                self.kind.group,
                version,
                namespace,
                self.kind.plural,
                name,
                body,
                field_manager=PLACER_FIELD_MANAGER,
                _content_type=content,
                _request_timeout=WRITE_TIMEOUT,
            )
        except ApiException as err:
            self._refuse(err, "patch", f"{what} {namespace}/{name}")

    def _refuse(self, err: ApiException, verb: str, what: str) -> NoReturn:
        """A 4xx: the placer's Rejected (told once, the group retried after a growing wait);
        anything else raised as it is."""
        if err.status is None or not 400 <= err.status < 500:
            raise err
        words = status_words(err.status, err.body)
        raise Rejected(f"{self.kind.plural}/{verb}", what, err.status, words) from err


def owned_list_watch(
    api_client: client.ApiClient,
    kind: OwnedKind,
    served: Callable[[str], None],
    recheck: float | None = None,
) -> tuple[Lister, Watcher]:
    """The kind's objects in every namespace (RBAC: list, watch; only ours where kind.only_ours),
    in the newest version the cluster serves; `served` hears that version after each list ("" for
    none: the list is empty and asked again every `recheck` seconds)."""
    wait = RECHECK if recheck is None else recheck
    answered: dict[str, bool] = {}
    selector = OURS if kind.only_ours else None
    pairs = {
        v: served_list_watch(
            api_client,
            (kind.group, v, kind.plural),
            functools.partial(answered.__setitem__, v),
            wait,
            label_selector=selector,
        )
        for v in kind.versions
    }
    current = [""]

    def lister() -> Iterator[Page]:
        for v in kind.versions:
            pages = list(pairs[v][0]())  # small objects, one per group
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
        return iter(pairs[current[0] or kind.versions[-1]][1](version))

    return lister, watcher


def owned_watch(
    name: str,
    api_client: client.ApiClient,
    book: Book[R],
    put: Callable[[Callable[[], None]], None],
) -> ListWatch:
    """The watch feeding `book` through `put` (the placer's inbox: one thread applies
    everything), or straight (admission's book: put = call)."""
    kind = book.kind
    lister, watcher = owned_list_watch(api_client, kind, lambda v: put(lambda: book.set_served(v)))
    return ListWatch(
        name,
        lister,
        watcher,
        on_list=Gathered(lambda items: put(lambda: book.listed(items))),
        on_event=lambda kind, obj: put(lambda: book.event(kind, obj)),
    )

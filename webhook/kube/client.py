"""The webhook's Kubernetes access: watch sources (custom objects, Node metadata, ConfigMaps)
and ConfigMap reads. Label and GpuFabric writes live in webhook/labeler/kube.py, Leases in
webhook/leader/kube.py; everything above these backends sees plain dicts.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from common import api
from webhook.kube.watch import Gone, Lister, Obj, Page, Watcher

log = logging.getLogger(__name__)
_TIMEOUT = 10
# Watches: the server ends each after WATCH_SECONDS, and the client gives up reading after a
# little more, so a connection that died silently is noticed instead of hanging forever.
_WATCH_SECONDS = 240
_WATCH_READ_TIMEOUT = (5, _WATCH_SECONDS + 30)
# Metadata only (PartialObjectMetadata): labels and managedFields, not a Node's images and status.
_META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_CONFIGMAP_PAGE = 8  # ConfigMaps per list page (each up to 1 MiB)
_META_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
# Objects per list page. A GpuNodeStatus decodes to ~55 KB (~105 KB with the managedFields that
# server-side apply adds): 100 of them keep a page near 10 MB however many nodes there are.
PAGE = 500
STATUS_PAGE = 100


def let_go(response: Any) -> None:
    """A raw answer (`_preload_content=False`) that is not read: its body drained, so its
    connection goes back to the client's pool. Left unread, the connection went with the answer
    and the next write opened a new one, a TLS handshake each: in a burst the API server spent a
    fifth of its CPU signing handshakes for the placer's patches and Events (issue 38)."""
    response.drain_conn()
    response.release_conn()


def pages(fetch: Callable[[str | None], Any], slim: Callable[[Obj], Obj]) -> Iterator[Page]:
    """The pages of one list, each decoded on its own and handed on before the next is asked
    for. `fetch(token)` asks for one page (raw: `_preload_content=False`, so the client builds no
    model objects); `slim` cuts each object down to what its consumers read. A continue token
    that expired (HTTP 410) is Gone: the list starts over."""
    token: str | None = None
    while True:
        try:
            response = fetch(token)
        except ApiException as err:
            if err.status == 410 and token:
                raise Gone() from err
            raise
        data: Any = json.loads(response.data)
        meta = data.get("metadata") or {}
        items = [_named(slim(o)) for o in data.get("items") or []]
        del data, response
        yield Page(items, str(meta.get("resourceVersion", "")))
        del items  # handed on: not alive while the next page is decoded
        token = meta.get("continue")
        if not token:
            return


def _named(obj: Obj) -> Obj:
    """One string per object name: the cache, the labeler, the fabric controller and the placer
    each key a node by it (at 65,536 nodes, ~60 B a copy)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and type(name := meta.get("name")) is str:
        meta["name"] = sys.intern(name)
    return obj


def without_managed_fields(obj: Obj) -> Obj:
    """Server-side apply's field ownership (half a status's bytes): nobody here reads it."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def as_is(obj: Obj) -> Obj:
    return obj


class _DictWatch(watch.Watch):
    """The client's Watch with each event decoded once. With a return type it hands back the
    object decoded, encoded and decoded again (json.dumps + deserialize, even for "object"):
    two thirds of what a watch event cost serve's CPU. ERROR events (410) still raise in
    stream(); resource_version is not tracked, which only stream()'s own retry without
    `timeout_seconds` reads, and every watch here sets it."""

    def unmarshal_event(self, data: str, _return_type: Any) -> Any:
        return super().unmarshal_event(data, None)


def watch_events(list_fn: Any, *args: Any, version: str, **kwargs: Any) -> Iterator[Obj]:
    """Watch events of a list call from `version` as {"type", "object"} dicts; 410 -> Gone.

    Plain dicts (no client model built per event); ERROR events still raise; a read timeout bounds
    a connection that went quiet without closing."""
    w = _DictWatch(return_type="object")
    try:
        for event in w.stream(
            list_fn,
            *args,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=_WATCH_SECONDS,
            _request_timeout=_WATCH_READ_TIMEOUT,
            **kwargs,
        ):
            yield {"type": event["type"], "object": event["raw_object"]}
    except ApiException as err:
        if err.status == 410:
            raise Gone() from err
        raise


def custom_list_watch(
    api_client: client.ApiClient, plural: str, limit: int = PAGE
) -> tuple[Lister, Watcher]:
    objects = client.CustomObjectsApi(api_client)

    def fetch(token: str | None) -> Any:
        return objects.list_cluster_custom_object(
            api.GROUP,
            api.VERSION,
            plural,
            limit=limit,
            _continue=token,
            _preload_content=False,
            _request_timeout=_TIMEOUT,
        )

    def lister() -> Iterator[Page]:
        return pages(fetch, without_managed_fields)

    def watcher(version: str) -> Iterable[Obj]:
        events = watch_events(
            objects.list_cluster_custom_object, api.GROUP, api.VERSION, plural, version=version
        )
        for event in events:
            yield {"type": event["type"], "object": without_managed_fields(event["object"])}

    return lister, watcher


def served_list_watch(
    api_client: client.ApiClient,
    kind: tuple[str, str, str],
    served: Callable[[bool], None],
    recheck: float,
    label_selector: str | None = None,
) -> tuple[Lister, Watcher]:
    """List+watch, cluster-wide, a kind (group, version, plural) the cluster may not serve (a CRD
    not installed, an API group switched off): each list ends with `served` (before its sink hears
    it is done). Where the API server answers 404, the list is empty, and the watch waits
    `recheck` seconds and asks for a new list: no failing watch, a cluster without it is healthy."""
    objects = client.CustomObjectsApi(api_client)
    method = objects.list_cluster_custom_object
    missing = [False]

    def fetch(token: str | None) -> Any:
        return method(
            *kind,
            label_selector=label_selector,
            limit=PAGE,
            _continue=token,
            _preload_content=False,
            _request_timeout=_TIMEOUT,
        )

    def lister() -> Iterator[Page]:
        try:
            yield from pages(fetch, without_managed_fields)
        except ApiException as err:
            if err.status != 404:
                raise
            missing[0] = True
            yield Page([], "")
        else:
            missing[0] = False
        served(not missing[0])

    def watcher(version: str) -> Iterable[Obj]:
        if missing[0]:
            time.sleep(recheck)
            raise Gone()
        for event in watch_events(method, *kind, version=version, label_selector=label_selector):
            yield {"type": event["type"], "object": without_managed_fields(event["object"])}

    return lister, watcher


def delete_custom_object(
    objects: client.CustomObjectsApi,
    kind: tuple[str, str, str],
    namespace: str,
    name: str,
    uid: str,
    timeout: float,
) -> None:
    """Delete the namespaced object of `kind` (group, version, plural) if it is still the one of
    `uid` (a precondition): gone (404), or another object of that name now (409), is fine."""
    group, version, plural = kind
    try:
        objects.delete_namespaced_custom_object(
            group,
            version,
            namespace,
            plural,
            name,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
            _request_timeout=timeout,
        )
    except ApiException as err:
        if err.status not in (404, 409):
            raise


def node_list_watch(api_client: client.ApiClient) -> tuple[Lister, Watcher]:
    """Nodes as PartialObjectMetadata: which exist, their labels (--topology-labels) and which
    labels our field manager owns (managedFields). One watch serves cache, labeler and fabric."""
    core = client.CoreV1Api(api_client)

    def fetch(token: str | None) -> Any:
        return core.list_node(
            limit=PAGE,
            _continue=token,
            _headers={"Accept": _META_LIST},
            _preload_content=False,
            _request_timeout=_TIMEOUT,
        )

    def lister() -> Iterator[Page]:
        return pages(fetch, as_is)  # the labeler reads managedFields: which labels are ours

    def watcher(version: str) -> Iterable[Obj]:
        return watch_events(core.list_node, version=version, _headers={"Accept": _META_WATCH})

    return lister, watcher


class ApiError(RuntimeError):
    """The API server refused or failed a request; the message names the object and the reason."""


def read_configmap(api_client: client.ApiClient, namespace: str, name: str) -> Obj | None:
    """GET one ConfigMap (RBAC: `get` on that name only); None when it does not exist."""
    try:
        cm = client.CoreV1Api(api_client).read_namespaced_config_map(
            name, namespace, _request_timeout=_TIMEOUT
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise ApiError(
            f"cannot read ConfigMap {namespace}/{name}: {err.status} {err.reason}"
        ) from None
    except Exception as err:  # noqa: BLE001 - connection errors of every kind: one clear line
        raise ApiError(f"cannot read ConfigMap {namespace}/{name}: {err}") from None
    out: Obj = api_client.sanitize_for_serialization(cm)
    return out


def configmap_list_watch(
    api_client: client.ApiClient, namespace: str, *, name: str = "", label: str = ""
) -> tuple[Lister, Watcher]:
    """List/watch the ConfigMaps of `namespace` named `name` (RBAC can then be limited to that
    name) or carrying label `label`. Plain dicts as the API sends them (binaryData stays base64),
    in pages: a topology source's parts are up to 1 MiB each."""
    core = client.CoreV1Api(api_client)
    selectors: dict[str, Any] = {"field_selector": f"metadata.name={name}"} if name else {}
    if label:
        selectors["label_selector"] = label

    def lister() -> Iterator[Page]:
        def fetch(token: str | None) -> Any:
            return core.list_namespaced_config_map(
                namespace,
                limit=_CONFIGMAP_PAGE,
                _continue=token,
                _preload_content=False,
                _request_timeout=_TIMEOUT,
                **selectors,
            )

        return pages(fetch, as_is)

    def watcher(version: str) -> Iterable[Obj]:
        return watch_events(
            core.list_namespaced_config_map, namespace, version=version, **selectors
        )

    return lister, watcher

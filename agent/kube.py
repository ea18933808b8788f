"""The agent's Kubernetes backend: server-side apply of GpuNodeStatus (sole kubernetes importer).

Verified semantics (DESIGN.md): DynamicClient `server_side_apply` sends
application/apply-patch+yaml with fieldManager and force; `.status.server_side_apply` writes the
status subresource; creating through the main endpoint drops `status`, so the object is created
first and the status applied after.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
from urllib3.exceptions import HTTPError

from agent.publish import PublishError
from common import api
from common.backoff import Backoff

log = logging.getLogger(__name__)
_REQUEST_TIMEOUT = 10.0


class KubePublisher:
    def __init__(
        self,
        api_client: client.ApiClient,
        field_manager: str = api.AGENT_FIELD_MANAGER,
        timeout: float = _REQUEST_TIMEOUT,
    ) -> None:
        # Every request, discovery included (which takes no per-call timeout), gives up after
        # `timeout`: a hung API server must turn into backoff, not a stuck agent.
        call_api = api_client.call_api

        def with_timeout(*args: Any, **kwargs: Any) -> Any:
            kwargs["_request_timeout"] = kwargs.get("_request_timeout") or timeout
            return call_api(*args, **kwargs)

        api_client.call_api = with_timeout  # type: ignore[method-assign]
        self._api_client = api_client
        self._core = client.CoreV1Api(api_client)
        self._field_manager = field_manager
        self._resource: Any = None
        self._owned_by: dict[str, str] = {}  # node -> uid our ownerReference names

    def _res(self) -> Any:
        if self._resource is None:
            try:
                dyn = DynamicClient(self._api_client)
                self._resource = dyn.resources.get(
                    api_version=api.API_VERSION, kind=api.NODE_STATUS_KIND
                )
            except (ApiException, DynamicApiError, HTTPError, OSError) as err:
                raise PublishError(f"API discovery failed: {err}") from err
        return self._resource

    def _get(self, node: str) -> dict[str, Any] | None:
        """The node's GpuNodeStatus object as a dict (None: it does not exist)."""
        try:
            obj = self._res().get(name=node, _request_timeout=_REQUEST_TIMEOUT)
        except NotFoundError:
            return None
        except (ApiException, DynamicApiError, HTTPError, OSError) as err:
            raise PublishError(f"get {node}: {err}") from err
        found: dict[str, Any] = obj.to_dict()
        return found

    def current(self, node: str) -> dict[str, Any] | None:
        status = (self._get(node) or {}).get("status")
        return status if isinstance(status, dict) else None

    def node_uid(self, node: str) -> str | None:
        try:
            found = self._core.read_node(node, _request_timeout=_REQUEST_TIMEOUT)
        except ApiException as err:
            if err.status == 404:
                return None
            raise PublishError(f"get node {node}: {err.status} {err.reason}") from err
        except (HTTPError, OSError) as err:
            raise PublishError(f"get node {node}: {err}") from err
        meta: Any = found.metadata
        return str(meta.uid)

    def owner_of(self, node: str) -> str | None:
        obj = self._get(node)
        if obj is None:
            return None
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        uids = [r.get("uid") for r in refs if r.get("kind") == "Node" and r.get("name") == node]
        if uids:
            self._owned_by[node] = str(uids[0])
        return str(uids[0]) if uids else None

    def apply(self, node: str, status: dict[str, Any], owner: str | None = None) -> None:
        res = self._res()
        head = {
            "apiVersion": api.API_VERSION,
            "kind": api.NODE_STATUS_KIND,
            "metadata": {"name": node},
        }
        # Owned by the Node (k8s GC deletes it with the Node); set before the status, so an
        # object of a Node that was re-created is adopted, or created anew if already collected.
        meta = {"name": node, "ownerReferences": [owner_reference(node, owner)]} if owner else None
        kwargs = {
            "name": node,
            "field_manager": self._field_manager,
            "force_conflicts": True,
            "_request_timeout": _REQUEST_TIMEOUT,
        }
        try:
            if meta is not None and self._owned_by.get(node) != owner:
                res.server_side_apply(body={**head, "metadata": meta}, **kwargs)
                self._owned_by[node] = str(owner)
            try:
                res.status.server_side_apply(body={**head, "status": status}, **kwargs)
            except NotFoundError:
                log.info("creating GpuNodeStatus", extra={"node": node})
                res.server_side_apply(body={**head, "metadata": meta or head["metadata"]}, **kwargs)
                res.status.server_side_apply(body={**head, "status": status}, **kwargs)
        except (ApiException, DynamicApiError, HTTPError, OSError) as err:
            raise PublishError(f"apply {node}: {err}") from err


def owner_reference(node: str, uid: str) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}


_META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_META_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
_WATCH_SECONDS = 240


def watch_node(
    api_client: client.ApiClient,
    node: str,
    on_uid: Callable[[str | None], None],
    stop: threading.Event,
) -> None:
    """Tell `on_uid` the Node's uid whenever it may have changed (None: deleted). One watch on
    this node's metadata, like the kubelet's own; relisted after errors, backoff capped at 4 s."""
    core = client.CoreV1Api(api_client)
    selector = f"metadata.name={node}"
    backoff, rng, failures = Backoff(base=0.5, cap=4.0), random.Random(), 0  # noqa: S311
    while not stop.is_set():
        try:
            listed: Any = core.list_node(
                field_selector=selector,
                _headers={"Accept": _META_LIST},
                _preload_content=False,
                _request_timeout=_REQUEST_TIMEOUT,
            )
            data = json.loads(listed.data)
            items = data.get("items") or []
            on_uid(str(items[0]["metadata"]["uid"]) if items else None)
            failures = 0
            for event in watch.Watch(return_type="object").stream(
                core.list_node,
                field_selector=selector,
                resource_version=str(data["metadata"]["resourceVersion"]),
                allow_watch_bookmarks=True,
                timeout_seconds=_WATCH_SECONDS,
                _headers={"Accept": _META_WATCH},
                _request_timeout=(5, _WATCH_SECONDS + 30),
            ):
                if stop.is_set():
                    return
                meta = (event.get("object") or {}).get("metadata") or {}
                if event.get("type") == "DELETED":
                    on_uid(None)
                elif event.get("type") in ("ADDED", "MODIFIED"):
                    on_uid(str(meta.get("uid")))
        except Exception as err:  # noqa: BLE001 - API server down, 410, RBAC: log, back off, relist
            failures += 1
            if failures == 1:
                log.warning("node watch failed; retrying", extra={"node": node, "error": str(err)})
            stop.wait(backoff.delay(failures, rng))

"""The agent's Kubernetes backend: server-side apply of GpuNodeStatus (sole kubernetes importer).

Verified semantics (DESIGN.md): DynamicClient `server_side_apply` sends
application/apply-patch+yaml with fieldManager and force; `.status.server_side_apply` writes the
status subresource; creating through the main endpoint drops `status`, so the object is created
first and the status applied after.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError
from urllib3.exceptions import HTTPError

from agent.publish import PublishError
from common import api

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
        self._field_manager = field_manager
        self._resource: Any = None

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

    def current(self, node: str) -> dict[str, Any] | None:
        try:
            obj = self._res().get(name=node, _request_timeout=_REQUEST_TIMEOUT)
        except NotFoundError:
            return None
        except (ApiException, DynamicApiError, HTTPError, OSError) as err:
            raise PublishError(f"get {node}: {err}") from err
        status = obj.to_dict().get("status")
        return status if isinstance(status, dict) else None

    def apply(self, node: str, status: dict[str, Any]) -> None:
        res = self._res()
        head = {
            "apiVersion": api.API_VERSION,
            "kind": api.NODE_STATUS_KIND,
            "metadata": {"name": node},
        }
        kwargs = {
            "name": node,
            "field_manager": self._field_manager,
            "force_conflicts": True,
            "_request_timeout": _REQUEST_TIMEOUT,
        }
        try:
            try:
                res.status.server_side_apply(body={**head, "status": status}, **kwargs)
            except NotFoundError:
                log.info("creating GpuNodeStatus", extra={"node": node})
                res.server_side_apply(body=head, **kwargs)
                res.status.server_side_apply(body={**head, "status": status}, **kwargs)
        except (ApiException, DynamicApiError, HTTPError, OSError) as err:
            raise PublishError(f"apply {node}: {err}") from err

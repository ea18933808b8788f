"""The labeler's writes: node labels and the GpuFabric object, by server-side apply; Events on
Nodes."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from common import api
from webhook.kube.status import status_words
from webhook.labeler.nodes import LabelRejected, NodeGone

# A label apply must end well inside the elector's wind-down (lease 15 s - renew deadline 10 s).
_APPLY_TIMEOUT = 4
_TIMEOUT = 10
_EVENT_NAMESPACE = "default"  # where Events of cluster-scoped objects go


class KubeNodeApi:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self._nodes: Any = None

    @property
    def nodes(self) -> Any:
        # Discovery on first use, not at start: serve must come up while the API server is down.
        if self._nodes is None:
            dyn = DynamicClient(self.api_client)
            self._nodes = dyn.resources.get(api_version="v1", kind="Node")
        return self._nodes

    def apply_labels(self, name: str, labels: Mapping[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels)},
        }
        try:
            self.nodes.server_side_apply(
                body=body,
                name=name,
                field_manager=api.LABELER_FIELD_MANAGER,
                force_conflicts=True,
                _request_timeout=_APPLY_TIMEOUT,
            )
        except (ApiException, DynamicApiError) as err:
            # Final answers: 422 an invalid label; 403 RBAC, or the node gone (an apply to a
            # missing object is a create, which the labeler may not do); 404 the node gone.
            code = getattr(err, "status", None)
            if code in (403, 404, 422):
                if code != 422 and self._gone(name):
                    raise NodeGone(name) from err
                words = status_words(code, getattr(err, "body", None))
                raise LabelRejected(f"{name}: HTTP {code}: {words}") from err
            raise

    def _gone(self, name: str) -> bool:
        """Whether Node `name` no longer exists (a GET answers 404); False when unsure."""
        try:
            client.CoreV1Api(self.api_client).read_node(name, _request_timeout=_APPLY_TIMEOUT)
        except ApiException as err:
            return bool(err.status == 404)
        except Exception:  # noqa: BLE001 - unreachable: not known to be gone
            return False
        return False

    def event(self, name: str, reason: str, message: str) -> None:
        """A Warning Event on the Node, where `kubectl describe node` finds it: namespace
        default, and the node's name as its uid, as the kubelet and node controller do."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: Any = {
            "metadata": {"generateName": f"{name}.", "namespace": _EVENT_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": name},
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": api.LABELER_FIELD_MANAGER},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        client.CoreV1Api(self.api_client).create_namespaced_event(
            _EVENT_NAMESPACE, body, _request_timeout=_APPLY_TIMEOUT
        )


class KubeFabricApi:
    """Server-side apply of the GpuFabric object: the object first (a status apply to an object
    that does not exist is 404), then its status subresource."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self._fabrics: Any = None
        self.created = False

    @property
    def fabrics(self) -> Any:
        # Discovery on first use: serve must start (and serve admission) while the API is down.
        if self._fabrics is None:
            dyn = DynamicClient(self.api_client)
            self._fabrics = dyn.resources.get(api_version=api.API_VERSION, kind="GpuFabric")
        return self._fabrics

    def apply(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        if not self.created:
            self.fabrics.server_side_apply(
                body={k: v for k, v in body.items() if k != "status"},
                name=name,
                field_manager=api.LABELER_FIELD_MANAGER,
                force_conflicts=True,
                _request_timeout=_TIMEOUT,
            )
            self.created = True
        self.fabrics.status.server_side_apply(
            body=dict(body),
            name=name,
            field_manager=api.LABELER_FIELD_MANAGER,
            force_conflicts=True,
            _request_timeout=_TIMEOUT,
        )

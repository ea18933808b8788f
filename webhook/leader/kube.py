"""The Lease API over the kubernetes client (this sub-package's only kubernetes importer).

Raw JSON both ways: the typed client turns MicroTime into `datetime` and writes it back with
`isoformat()`, which the server rejects whenever microsecond == 0 (reference/k8s-wire/leases/06).
Its own client with urllib3 retries off: a request must give up at the elector's deadline, not
retry past it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from webhook.leader.lease import Conflict, Lease, LeaseError

_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class KubeLeaseApi:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        config = copy.deepcopy(api_client.configuration)
        config.retries = 0
        self.client = client.ApiClient(config)
        self.namespace = namespace

    def _call(self, method: str, path: str, body: Any, timeout: float) -> tuple[int, Any]:
        try:
            request = self.client.param_serialize(
                method,
                path,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.client.call_api(*request, _request_timeout=timeout)
            response.read()
            data = json.loads(response.data or b"{}")
        except (ApiException, HTTPError, OSError, ValueError) as err:
            raise LeaseError(f"{method} lease: {err}") from err
        return int(response.status), data

    def _answer(self, method: str, status: int, data: Any) -> Lease:
        if status == 409:
            raise Conflict(str(data.get("message", "conflict")))
        if not 200 <= status < 300:
            raise LeaseError(f"{method} lease: HTTP {status}: {data.get('message', '')}")
        return Lease.from_body(data)

    def get(self, name: str, timeout: float) -> Lease | None:
        path = _PATH.format(namespace=self.namespace) + f"/{name}"
        status, data = self._call("GET", path, None, timeout)
        if status == 404:
            return None
        return self._answer("GET", status, data)

    def create(self, lease: Lease, timeout: float) -> Lease:
        path = _PATH.format(namespace=self.namespace)
        status, data = self._call("POST", path, lease.to_body(self.namespace), timeout)
        return self._answer("POST", status, data)

    def replace(self, lease: Lease, timeout: float) -> Lease:
        path = _PATH.format(namespace=self.namespace) + f"/{lease.name}"
        status, data = self._call("PUT", path, lease.to_body(self.namespace), timeout)
        return self._answer("PUT", status, data)

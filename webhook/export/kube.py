"""The exports' API calls: whether a kind is served, list, server-side apply, delete.

A kind is served when listing it works: an unknown group, version or resource is HTTP 404 on its
list path (no discovery cache to go stale, so a CRD installed later is seen at the next look).
The kind's versions are tried newest first; the resource is asked for, not the group, because a
group may serve a version without this kind (Kueue 0.13: queues at v1beta1, Topology at v1alpha1).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from common import api
from webhook.export.controller import ExportError, Obj
from webhook.export.kinds import Kind

_TIMEOUT = 10


def _error(err: ApiException) -> ExportError:
    """The Status message the server sent (e.g. a schema error's), else the HTTP reason."""
    try:
        message = json.loads(err.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return ExportError(int(err.status or 0), str(message or err.reason or "no answer"))


class KubeExportApi:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.objects = client.CustomObjectsApi(api_client)

    def served(self, kind: Kind) -> str | None:
        for version in kind.versions:
            try:
                self.objects.list_cluster_custom_object(
                    kind.group, version, kind.plural, limit=1, _request_timeout=_TIMEOUT
                )
            except ApiException as err:
                if err.status == 404:
                    continue
                raise _error(err) from None
            return version
        return None

    def list(self, kind: Kind, version: str) -> list[Obj]:
        items: list[Obj] = []
        token: str | None = None
        while True:
            try:
                data: Any = self.objects.list_cluster_custom_object(
                    kind.group,
                    version,
                    kind.plural,
                    limit=500,
                    _continue=token,
                    _request_timeout=_TIMEOUT,
                )
            except ApiException as err:
                raise _error(err) from None
            items += data.get("items") or []
            token = (data.get("metadata") or {}).get("continue")
            if not token:
                return items

    def apply(self, kind: Kind, version: str, body: Obj) -> None:
        try:
            self.objects.patch_cluster_custom_object(
                kind.group,
                version,
                kind.plural,
                body["metadata"]["name"],
                dict(body),
                field_manager=api.LABELER_FIELD_MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
                _request_timeout=_TIMEOUT,
            )
        except ApiException as err:
            raise _error(err) from None

    def delete(self, kind: Kind, version: str, name: str) -> None:
        try:
            self.objects.delete_cluster_custom_object(
                kind.group, version, kind.plural, name, _request_timeout=_TIMEOUT
            )
        except ApiException as err:
            if err.status != 404:  # already gone: what we wanted
                raise _error(err) from None

"""KubeExportApi over loopback HTTP, answering as kube-apiserver does
(../shared/reference/k8s-wire: a resource the server does not serve is a 404 Status; an apply the
CRD schema refuses is HTTP 500 "failed to create typed patch object", errors/crd-*.apply.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fakes.http import api_client, reply
from webhook.export.controller import ExportError
from webhook.export.kinds import KINDS
from webhook.export.kube import KubeExportApi

NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server could not find the requested resource",
    "reason": "NotFound",
    "details": {},
    "code": 404,
}
TYPED = (
    "failed to create typed patch object (/gpufabric; kueue.x-k8s.io/v1beta1, Kind=Topology): "
    ".spec.levels[0].alias: field not declared in schema"
)
SCHEMA_500 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": TYPED,
    "code": 500,
}
LIST = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "TopologyList",
    "items": [],
    "metadata": {"continue": "", "resourceVersion": "7"},
}


@pytest.fixture
def server() -> Iterator[tuple[KubeExportApi, list[dict[str, Any]]]]:
    """Serves only kueue.x-k8s.io/v1beta1 topologies; every apply is refused like a schema error."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            url = urlsplit(self.path)
            seen.append(
                {
                    "method": self.command,
                    "path": url.path,
                    "query": parse_qs(url.query),
                    "type": self.headers.get("Content-Type"),
                    "body": json.loads(self.rfile.read(length)) if length else None,
                }
            )
            served = url.path.startswith("/apis/kueue.x-k8s.io/v1beta1/topologies")
            if not served or self.command == "DELETE":
                status, body = 404, NOT_FOUND
            elif self.command == "PATCH":
                status, body = 500, SCHEMA_500
            else:
                status, body = 200, LIST
            reply(self, status, (json.dumps(body, separators=(",", ":")) + "\n").encode())

        do_GET = do_PATCH = do_DELETE = _answer  # noqa: N815 - http.server handler names

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield KubeExportApi(api), seen


def test_served_version_is_the_first_that_lists(server: tuple[KubeExportApi, list[Any]]) -> None:
    api, seen = server
    assert api.served(KINDS["kueue"]) == "v1beta1"
    assert [s["path"] for s in seen] == [
        "/apis/kueue.x-k8s.io/v1beta2/topologies",
        "/apis/kueue.x-k8s.io/v1beta1/topologies",
    ]
    assert api.served(KINDS["volcano"]) is None
    assert api.list(KINDS["kueue"], "v1beta1") == []


def test_apply_is_ssa_as_the_labeler_and_a_schema_500_is_an_export_error(
    server: tuple[KubeExportApi, list[Any]],
) -> None:
    api, seen = server
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "gpufabric"},
        "spec": {"levels": [{"nodeLabel": "gpufabric.io/leaf", "alias": "leaf"}]},
    }
    with pytest.raises(ExportError) as err:
        api.apply(KINDS["kueue"], "v1beta1", body)
    assert err.value.status == 500 and str(err.value) == f"HTTP 500: {TYPED}"
    sent = seen[-1]
    assert sent["method"] == "PATCH" and sent["path"].endswith("/topologies/gpufabric")
    assert sent["query"] == {"fieldManager": ["gpufabric-labeler"], "force": ["true"]}
    assert sent["type"] == "application/apply-patch+yaml" and sent["body"] == body


def test_deleting_what_is_gone_is_fine(server: tuple[KubeExportApi, list[Any]]) -> None:
    api, seen = server
    api.delete(KINDS["kai"], "v1alpha1", "gpufabric-nvlink")
    assert seen[-1]["method"] == "DELETE"


# What each Kueue release serves under kueue.x-k8s.io (its CRDs' served versions, from the
# released tags; ../shared/reference/schedulers/PROVENANCE.md): version -> resources. Kueue 0.13
# serves the group at v1beta1 too (queues, flavors), but Topology only at v1alpha1: the group's
# discovery document alone would name v1beta1, so the exporter asks for the resource itself.
RELEASES: dict[str, dict[str, tuple[str, ...]]] = {
    "0.9-0.13": {"v1beta1": ("clusterqueues", "resourceflavors"), "v1alpha1": ("topologies",)},
    "0.14": {"v1beta1": ("clusterqueues", "resourceflavors", "topologies")},
    "0.15+": {
        "v1beta2": ("clusterqueues", "resourceflavors", "topologies"),
        "v1beta1": ("clusterqueues", "resourceflavors", "topologies"),  # deprecated from 0.16
    },
    "none": {},
}


@pytest.mark.parametrize(
    ("release", "expected"),
    [("0.9-0.13", "v1alpha1"), ("0.14", "v1beta1"), ("0.15+", "v1beta2"), ("none", None)],
)
def test_served_kueue_version_is_the_newest_per_release(release: str, expected: str | None) -> None:
    served = RELEASES[release]
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            asked.append(path)
            _, _, group, version, plural = path.split("/")
            if group == "kueue.x-k8s.io" and plural in served.get(version, ()):
                body = LIST | {"apiVersion": f"{group}/{version}"}
                reply(self, 200, json.dumps(body).encode())
            else:  # what kube-apiserver answers for a group, version or resource it lacks
                reply(self, 404, json.dumps(NOT_FOUND).encode())

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        assert KubeExportApi(api).served(KINDS["kueue"]) == expected
    newest_first = ["v1beta2", "v1beta1", "v1alpha1"]
    looked = newest_first[: newest_first.index(expected) + 1] if expected else newest_first
    assert asked == [f"/apis/kueue.x-k8s.io/{v}/topologies" for v in looked]

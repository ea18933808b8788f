"""KubeLeaseApi over loopback HTTP against the captured kube-apiserver answers
(tests/fixtures/k8s-wire/leases/01-05): what it sends, and how it reads 404/201/200/409."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from kubernetes import client

from tests import reference
from tests.fakes.http import api_client, reply
from webhook.leader import Conflict, Lease, LeaseError
from webhook.leader.kube import KubeLeaseApi

WIRE = reference.WIRE / "leases"
CAPTURED = [
    json.loads((WIRE / f).read_text())
    for f in (
        "01-get-missing.json",
        "02-create.json",
        "03-renew-update.json",
        "04-update-stale-rv-409.json",
        "05-create-exists-409.json",
    )
]


@pytest.fixture
def server() -> Iterator[tuple[KubeLeaseApi, list[dict[str, Any]]]]:
    """Answers the captured responses in order; records what the client sent."""
    answers = iter(CAPTURED)
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append({"method": self.command, "path": self.path, "body": body})
            response = next(answers)["response"]
            data = (json.dumps(response["body"], separators=(",", ":")) + "\n").encode()
            reply(self, response["status"], data)

        do_GET = do_POST = do_PUT = _answer  # noqa: N815 - http.server handler names

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield KubeLeaseApi(api, "gpufabric-system"), seen


def test_lease_api_speaks_the_captured_protocol(
    server: tuple[KubeLeaseApi, list[dict[str, Any]]],
) -> None:
    api, seen = server
    assert api.get("gpufabric-labeler", 2) is None  # 404
    # A whole second: the kubernetes client's isoformat() would send no fraction here (400).
    now = datetime(2026, 11, 22, 14, 26, 49, tzinfo=UTC)
    created = api.create(Lease.new("gpufabric-labeler", "gpufabric-webhook-7d9f-abcde", 15, now), 2)
    assert (created.resource_version, created.holder) == ("1894", "gpufabric-webhook-7d9f-abcde")
    renewed = api.replace(created, 2)
    assert renewed.resource_version == "1897"
    with pytest.raises(Conflict):
        api.replace(created, 2)  # stale resourceVersion: 409 Conflict
    with pytest.raises(Conflict):
        api.create(created, 2)  # 409 AlreadyExists
    for sent, captured in zip(seen, CAPTURED, strict=True):
        assert (sent["method"], sent["path"]) == (
            captured["request"]["method"],
            captured["request"]["path"],
        )
    assert seen[1]["body"]["spec"]["renewTime"] == "2026-11-22T14:26:49.000000Z"
    for sent in seen[1:]:
        for key in ("acquireTime", "renewTime"):
            assert re.fullmatch(
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sent["body"]["spec"][key]
            )


def test_lease_api_turns_a_refused_connection_into_lease_error() -> None:
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(LeaseError):
        KubeLeaseApi(client.ApiClient(cfg), "gpufabric-system").get("gpufabric-labeler", 1)

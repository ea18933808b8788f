"""KubePlacerApi's writes over loopback HTTP/1.1 with keep-alive, as kube-apiserver answers them:
each answer is let go of so its connection is used again (issue 38: unread answers made every
write a new connection, a TLS handshake each on a real API server), and a member's
status.nominatedNodeName is one merge patch of pods/status whose refusal stops nothing."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.fakes.http import api_client, reply
from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import status
from webhook.groups.placer.kube import KubePlacerApi


class Seen:
    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.refuse_status = False  # pods/status answered 403, as RBAC without it does


@pytest.fixture
def server() -> Iterator[tuple[KubePlacerApi, Seen]]:
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver's HTTP/1.1 server

        def setup(self) -> None:  # one per connection
            super().setup()
            with seen.lock:
                seen.connections += 1

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            with seen.lock:
                seen.requests.append(
                    {
                        "method": self.command,
                        "path": self.path.split("?")[0],
                        "type": self.headers.get("Content-Type"),
                        "body": body,
                    }
                )
            if self.path.split("?")[0].endswith("/status") and seen.refuse_status:
                message = 'pods "m-0" is forbidden: User cannot patch resource "pods/status"'
                answer = status(403, "Forbidden", message)
                reply(self, 403, json.dumps(answer).encode())
                return
            pod = gpu_pod("m-0", 8, namespace="team-a")  # what a patch answers: the pod
            reply(self, 201 if self.command == "POST" else 200, json.dumps(pod).encode())

        def do_PATCH(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield KubePlacerApi(api), seen


def test_the_placers_writes_use_one_connection_again_and_again(
    server: tuple[KubePlacerApi, Seen],
) -> None:
    api, seen = server
    pod = gpu_pod("m-0", 8, namespace="team-a")
    ungate = [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    for _ in range(10):
        api.nominate("team-a", "m-0", "node-0001")
        api.patch_pod("team-a", "m-0", ungate)
        api._event(pod, "GroupPlaced", "placed", "Normal", "2026-11-29T05:00:00.000000Z")
    assert len(seen.requests) == 30
    assert seen.connections == 1


def test_a_nomination_is_one_merge_patch_of_the_pods_status(
    server: tuple[KubePlacerApi, Seen],
) -> None:
    api, seen = server
    api.nominate("team-a", "m-0", "node-0007")
    (request,) = seen.requests
    assert request == {
        "method": "PATCH",
        "path": "/api/v1/namespaces/team-a/pods/m-0/status",
        "type": "application/merge-patch+json",
        "body": {"status": {"nominatedNodeName": "node-0007"}},
    }


def test_a_refused_nomination_is_said_once_and_stops_nothing(
    server: tuple[KubePlacerApi, Seen], caplog: pytest.LogCaptureFixture
) -> None:
    """An install whose RBAC predates pods/status: the members are still ungated, and the log
    says why the scheduler searches on its own once, not once a member."""
    api, seen = server
    seen.refuse_status = True
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            api.nominate("team-a", "m-0", "node-0001")
            api.patch_pod("team-a", "m-0", [{"op": "remove", "path": "/spec/schedulingGates/0"}])
    said = [r for r in caplog.records if "nominatedNodeName not set" in r.getMessage()]
    assert len(said) == 1 and getattr(said[0], "status", None) == 403
    assert [r["path"].rsplit("/", 1)[-1] for r in seen.requests] == ["status", "m-0"] * 3

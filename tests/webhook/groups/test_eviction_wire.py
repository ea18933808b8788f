"""KubePlacerApi.evict_pod over loopback HTTP against the fake API server's Eviction answers
(kube-apiserver's pods/eviction: 201 Success Status, 429 TooManyRequests naming the PDB, 404)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.fakes.http import api_client, reply
from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import FakeApi, status
from webhook.groups.placer.kube import KubePlacerApi


@pytest.fixture
def server() -> Iterator[tuple[KubePlacerApi, FakeApi, list[dict[str, Any]]]]:
    fake = FakeApi()
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            seen.append({"path": self.path, "body": body})
            parts = self.path.split("/")  # /api/v1/namespaces/NS/pods/NAME/eviction
            options = body.get("deleteOptions") or {}
            uid = (options.get("preconditions") or {}).get("uid")
            pod = fake.pods.get((parts[4], parts[6]))
            if uid and pod is not None and pod["metadata"].get("uid") != uid:
                message = "Precondition failed: UID in precondition: " + uid
                code, answer = 409, status(409, "Conflict", message)
            else:
                code, answer = fake.eviction(parts[4], parts[6], options.get("dryRun") == ["All"])
            reply(self, code, json.dumps(answer).encode())

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield KubePlacerApi(api), fake, seen


def test_eviction_goes_through_the_eviction_api_and_reads_each_answer(
    server: tuple[KubePlacerApi, FakeApi, list[dict[str, Any]]],
) -> None:
    api, fake, seen = server
    fake.create(gpu_pod("run-0", 8, namespace="batch", node_name="node-0000", phase="Running"))
    protected = gpu_pod("db-0", 8, namespace="batch", node_name="node-0001", phase="Running")
    protected["metadata"]["labels"] = {"app": "db"}
    fake.create(protected)
    fake.add_pdb("db", {"app": "db"}, 0)
    assert api.evict_pod("batch", "run-0") == ("evicted", "")
    assert seen[0] == {
        "path": "/api/v1/namespaces/batch/pods/run-0/eviction",
        "body": {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "run-0", "namespace": "batch"},
        },
    }
    outcome, message = api.evict_pod("batch", "db-0")
    assert outcome == "blocked"
    assert message == (
        "Cannot evict pod as it would violate the pod's disruption budget.; "
        "The disruption budget db needs 1 healthy pods and has 1 currently"
    )
    assert api.evict_pod("batch", "gone-0") == ("gone", "")


def test_a_dry_run_asks_with_delete_options_and_evicts_nothing(
    server: tuple[KubePlacerApi, FakeApi, list[dict[str, Any]]],
) -> None:
    api, fake, seen = server
    pod = gpu_pod("run-0", 8, namespace="batch", node_name="node-0000", phase="Running")
    pod["metadata"]["labels"] = {"app": "web"}
    fake.create(pod)
    fake.add_pdb("web", {"app": "web"}, 1)
    assert api.evict_pod("batch", "run-0", dry_run=True) == ("evicted", "")
    assert seen[0]["body"]["deleteOptions"] == {"dryRun": ["All"]}
    assert "deletionTimestamp" not in fake.pods[("batch", "run-0")]["metadata"]
    assert fake.pdbs["web"]["status"]["disruptionsAllowed"] == 1  # nothing spent
    assert api.evict_pod("batch", "run-0") == ("evicted", "")
    assert fake.pdbs["web"]["status"]["disruptionsAllowed"] == 0
    assert fake.pdbs["web"]["status"]["disruptedPods"] == {"run-0": "2026-11-26T14:00:00Z"}


def test_any_other_refusal_stops_a_plan_with_the_api_servers_words(
    server: tuple[KubePlacerApi, FakeApi, list[dict[str, Any]]],
) -> None:
    api, fake, _ = server
    pod = gpu_pod("run-0", 8, namespace="batch", node_name="node-0000", phase="Running")
    pod["metadata"]["labels"] = {"app": "web", "tier": "a"}
    fake.create(pod)
    fake.add_pdb("web", {"app": "web"}, 5)
    fake.add_pdb("tier", {"tier": "a"}, 5)
    outcome, message = api.evict_pod("batch", "run-0", dry_run=True)
    assert outcome == "blocked"
    assert "more than one PodDisruptionBudget" in message


def test_an_eviction_of_one_pod_by_uid_sends_the_precondition_and_a_newer_pod_is_gone(
    server: tuple[KubePlacerApi, FakeApi, list[dict[str, Any]]],
) -> None:
    api, fake, seen = server
    pod = gpu_pod("g-3", 8, namespace="burst")
    pod["metadata"]["uid"] = "uid-new"  # its controller made it again under the same name
    fake.create(pod)
    assert api.evict_pod("burst", "g-3", uid="uid-old") == ("gone", "")
    assert seen[0]["body"]["deleteOptions"] == {"preconditions": {"uid": "uid-old"}}
    assert "deletionTimestamp" not in fake.pods[("burst", "g-3")]["metadata"]
    assert api.evict_pod("burst", "g-3", dry_run=True, uid="uid-new") == ("evicted", "")
    assert seen[1]["body"]["deleteOptions"] == {
        "dryRun": ["All"],
        "preconditions": {"uid": "uid-new"},
    }

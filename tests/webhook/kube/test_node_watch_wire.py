"""The Node metadata list/watch (webhook), the placer's pod watch and the agent's own-Node watch, through the real
kubernetes client over loopback HTTP: the PartialObjectMetadata Accept headers, paging, a
chunked watch stream with a BOOKMARK, and an expired watch (HTTP 200 + ERROR 410, as captured in
tests/fixtures/k8s-wire/watch/watch-410-too-old-rv.jsonl)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from agent.kube import watch_node
from tests import reference
from tests.fakes.http import api_client, reply
from webhook.groups.placer.kube import _LIVE, core_list_watch
from webhook.groups.placer.slim import slim_pod
from webhook.kube.client import node_list_watch
from webhook.kube.watch import Gone

WIRE = reference.WIRE / "watch"


def meta(name: str, uid: str, rv: str) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": name, "uid": uid, "resourceVersion": rv, "labels": {"a": "b"}},
    }


class Stub:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], str]] = []
        self.watch_lines: list[bytes] = []


@pytest.fixture
def stub() -> Iterator[tuple[Stub, client.ApiClient]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlparse(self.path)
            q = parse_qs(url.query)
            state.requests.append((url.path, q, self.headers.get("Accept", "")))
            if q.get("watch") == ["true"]:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in state.watch_lines:
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            if q.get("continue") == ["page2"]:
                body = {"metadata": {"resourceVersion": "50"}, "items": [meta("n2", "u2", "41")]}
            elif "fieldSelector" in q:
                body = {"metadata": {"resourceVersion": "50"}, "items": [meta("n1", "u1", "40")]}
            else:
                body = {
                    "metadata": {"resourceVersion": "50", "continue": "page2"},
                    "items": [meta("n1", "u1", "40")],
                }
            reply(self, 200, json.dumps(body).encode())

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield state, api


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def test_node_list_watch_asks_for_metadata_pages_and_streams_events(
    stub: tuple[Stub, client.ApiClient],
) -> None:
    state, api_client = stub
    lister, watcher = node_list_watch(api_client)
    pages = list(lister())
    items, version = [i for p in pages for i in p.items], pages[-1].version
    assert [len(p.items) for p in pages] == [1, 1]  # each page handed on by itself
    assert [i["metadata"]["name"] for i in items] == ["n1", "n2"]
    assert version == "50"
    assert all("as=PartialObjectMetadataList" in accept for _, _, accept in state.requests)
    state.watch_lines = [
        line("ADDED", meta("n3", "u3", "51")),
        line("BOOKMARK", {"kind": "PartialObjectMetadata", "metadata": {"resourceVersion": "60"}}),
        line("DELETED", meta("n1", "u1", "61")),
    ]
    events = list(watcher(version))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "DELETED"]
    assert events[0]["object"]["metadata"]["uid"] == "u3"
    _, query, accept = state.requests[-1]
    assert "as=PartialObjectMetadata;" in accept
    assert query["resourceVersion"] == ["50"] and query["allowWatchBookmarks"] == ["true"]


def test_an_expired_node_watch_is_gone(stub: tuple[Stub, client.ApiClient]) -> None:
    state, api_client = stub
    state.watch_lines = [(WIRE / "watch-410-too-old-rv.jsonl").read_bytes()]
    _, watcher = node_list_watch(api_client)
    with pytest.raises(Gone):
        list(watcher("1"))


def test_the_agent_watches_only_its_own_node_and_reports_its_uid(
    stub: tuple[Stub, client.ApiClient],
) -> None:
    state, api_client = stub
    state.watch_lines = [
        line("DELETED", meta("n1", "u1", "51")),
        line("ADDED", meta("n1", "u9", "52")),
    ]
    seen: list[str | None] = []
    stop = threading.Event()

    def on_uid(uid: str | None) -> None:
        seen.append(uid)
        if len(seen) == 3:
            stop.set()

    watch_node(api_client, "n1", on_uid, stop)
    assert seen == ["u1", None, "u9"]
    assert all(q.get("fieldSelector") == ["metadata.name=n1"] for _, q, _ in state.requests)


def test_the_placer_watches_live_pods_as_slim_dicts_and_an_expired_watch_is_gone(
    stub: tuple[Stub, client.ApiClient],
) -> None:
    state, api_client = stub
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "51"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "big/image:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    state.watch_lines = [
        line("ADDED", pod),
        line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "60"}}),
    ]
    _, watcher = core_list_watch(api_client, "pods", _LIVE)
    events = list(watcher("50"))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[0]["object"] == slim_pod(pod)  # a plain dict, only what placement reads
    _, query, _ = state.requests[-1]
    assert query["fieldSelector"] == [_LIVE] and query["resourceVersion"] == ["50"]
    assert query["allowWatchBookmarks"] == ["true"]
    state.watch_lines = [(WIRE / "watch-410-too-old-rv.jsonl").read_bytes()]
    with pytest.raises(Gone):
        list(watcher("1"))


def test_the_placer_lists_and_watches_disruption_budgets_of_every_namespace(
    stub: tuple[Stub, client.ApiClient],
) -> None:
    from tests.webhook.groups.fake_api import FakeApi
    from webhook.groups.placer.kube import budget_list_watch
    from webhook.groups.placer.placer import Placer

    state, api_client = stub
    pdb = {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": {"name": "db", "namespace": "batch", "uid": "b1", "resourceVersion": "52"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1},
    }
    state.watch_lines = [
        line("ADDED", pdb),
        line("BOOKMARK", {"kind": "PodDisruptionBudget", "metadata": {"resourceVersion": "60"}}),
    ]
    lister, watcher = budget_list_watch(api_client)
    assert [i["metadata"]["name"] for p in lister() for i in p.items] == ["n1", "n2"]  # 2 pages
    assert state.requests[0][0] == "/apis/policy/v1/poddisruptionbudgets"
    events = list(watcher("50"))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    path, query, _ = state.requests[-1]
    assert path == "/apis/policy/v1/poddisruptionbudgets" and query["watch"] == ["true"]
    placer = Placer(FakeApi())
    placer.budget_event("ADDED", events[0]["object"])
    (budget,) = placer.ext.preempt.budgets.covering("batch", (("app", "db"),))
    assert (budget.key, budget.allowed) == (("batch", "db"), 0)
    placer.budget_event("DELETED", events[0]["object"])
    assert placer.ext.preempt.budgets.covering("batch", (("app", "db"),)) == ()


def test_each_watch_event_is_decoded_once(
    stub: tuple[Stub, client.ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's Watch, given a return type, decodes an event, encodes its object again and
    decodes that (issue 38: two thirds of a pod event's CPU in serve); ours decodes it once."""
    import types

    import kubernetes.watch.watch as client_watch

    calls = {"loads": 0, "dumps": 0}

    def loads(data: Any) -> Any:
        calls["loads"] += 1
        return json.loads(data)

    def dumps(obj: Any) -> str:
        calls["dumps"] += 1
        return json.dumps(obj)

    counted = types.SimpleNamespace(loads=loads, dumps=dumps, JSONDecodeError=json.JSONDecodeError)
    monkeypatch.setattr(client_watch, "json", counted)
    state, api_client = stub
    state.watch_lines = [line("ADDED", meta(f"n{i}", f"u{i}", str(51 + i))) for i in range(3)]
    _, watcher = node_list_watch(api_client)
    events = list(watcher("50"))
    assert [e["object"]["metadata"]["uid"] for e in events] == ["u0", "u1", "u2"]
    assert calls == {"loads": 3, "dumps": 0}

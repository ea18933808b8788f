"""Relists page by page (issue 22): the GpuNodeStatus list through the real kubernetes client over
loopback, replaying the pages a kube-apiserver 1.36 sent (tests/fixtures/k8s-wire/watch/
list-paginated.json) and its 410 for an expired continue token (list-continue-expired-410.json);
then the cache's side: what a relist did not name is removed when the relist ends, never before."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from common import api
from tests import reference
from tests.fakes.http import api_client, reply
from tests.webhook.helpers import golden_statuses
from webhook.fleet.cache import FabricCache
from webhook.kube.client import as_is, custom_list_watch, pages
from webhook.kube.watch import ListWatch, Obj, listed

WIRE = reference.WIRE / "watch"
PAGES = json.loads((WIRE / "list-paginated.json").read_text())
EXPIRED = json.loads((WIRE / "list-continue-expired-410.json").read_text())["response"]
NAMES = [[i["metadata"]["name"] for i in p["response"]["body"]["items"]] for p in PAGES]


class Recorder:
    """A Sink that writes down what it is given."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.items: list[Obj] = []

    def start(self) -> None:
        self.calls.append("start")

    def page(self, items: list[Obj]) -> None:
        self.calls.append([i["metadata"]["name"] for i in items])
        self.items += items

    def done(self) -> None:
        self.calls.append("done")


class Server:
    def __init__(self) -> None:
        self.queries: list[dict[str, list[str]]] = []
        self.expire_once = False  # answer the first continue with the captured 410


@pytest.fixture
def served() -> Iterator[tuple[Server, client.ApiClient]]:
    state = Server()
    by_token = {p["request"]["query"].get("continue", ""): p["response"] for p in PAGES}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            q = parse_qs(urlparse(self.path).query)
            state.queries.append(q)
            token = q.get("continue", [""])[0]
            if token and state.expire_once:
                state.expire_once = False
                reply(self, EXPIRED["status"], json.dumps(EXPIRED["body"]).encode())
                return
            reply(self, 200, json.dumps(by_token[token]["body"]).encode())

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as api:
        yield state, api


def test_a_status_list_reaches_its_sink_one_page_at_a_time(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api_client = served
    lister, _ = custom_list_watch(api_client, api.NODE_STATUS_PLURAL, limit=3)
    sink = Recorder()
    assert listed(lister, sink) == "390"
    assert sink.calls == ["start", *NAMES, "done"]
    assert [q.get("limit") for q in server.queries] == [["3"]] * 3
    tokens = [q.get("continue", [""])[0] for q in server.queries]
    assert tokens == [p["request"]["query"].get("continue", "") for p in PAGES]
    # Field ownership is dropped as each page is decoded: nobody here reads it.
    assert all("managedFields" not in o["metadata"] for o in sink.items)


def test_an_expired_continue_token_lists_again_from_the_start_at_once(
    served: tuple[Server, client.ApiClient],
) -> None:
    server, api_client = served
    server.expire_once = True
    lister, _ = custom_list_watch(api_client, api.NODE_STATUS_PLURAL, limit=3)
    stop = threading.Event()
    watched: list[str] = []

    def watcher(version: str) -> Iterable[Obj]:
        watched.append(version)
        stop.set()
        yield from ()

    sink = Recorder()
    lw = ListWatch("t", lister, watcher, sink, lambda kind, obj: None)
    lw.run(stop, wait=lambda s: pytest.fail("backed off instead of listing again"))
    assert sink.calls == ["start", NAMES[0], "start", *NAMES, "done"]
    assert (lw.errors, lw.relists, watched) == (0, 1, ["390"])


H100 = dict(golden_statuses())["hgx-h100"]


def test_a_status_gone_since_the_last_list_is_removed_when_the_relist_ends() -> None:
    cache = FabricCache()
    cache.replace_nodes([("a", H100), ("b", H100), ("c", H100)])
    cache.start_nodes()
    cache.page_nodes([("a", H100)])
    cache.page_nodes([("c", H100)])
    assert set(cache.nodes) == {"a", "b", "c"}  # meanwhile reviews see the last good state
    cache.end_nodes()
    assert set(cache.nodes) == {"a", "c"}


def test_a_relist_cut_short_by_an_expired_token_does_not_keep_what_only_it_saw() -> None:
    cache = FabricCache()
    cache.replace_nodes([("a", H100), ("b", H100)])
    cache.start_nodes()
    cache.page_nodes([("a", H100), ("b", H100)])  # then 410: b is deleted before the next try
    cache.start_nodes()
    cache.page_nodes([("a", H100)])
    cache.page_nodes([("c", H100)])
    cache.end_nodes()
    assert set(cache.nodes) == {"a", "c"}


def test_a_node_gone_since_the_last_node_list_stops_counting_when_the_list_ends() -> None:
    cache = FabricCache()
    cache.replace_nodes([("a", H100), ("b", H100)])
    cache.replace_existing_nodes(["a", "b"], {"a": {"zone": "z1"}, "b": {"zone": "z1"}})
    cache.start_existing()
    cache.page_existing([("a", {"zone": "z2"})])
    assert set(cache.nodes) == {"a", "b"}
    cache.end_existing()
    assert set(cache.nodes) == {"a"} and set(cache.absent) == {"b"}
    assert cache._labels is not None and cache._labels.names() == {"a"}
    assert cache._labels.get("a").shared == {"zone": "z2"}  # type: ignore[union-attr]


def test_every_list_gives_one_string_per_object_name() -> None:
    """Consumers key nodes by name: two lists (statuses, Nodes) must not keep two copies each."""

    class Raw:
        def __init__(self, names: list[str]) -> None:
            items = [{"metadata": {"name": n}} for n in names]
            self.data = json.dumps({"metadata": {}, "items": items}).encode()

    def names(listed: Iterable[Any]) -> list[str]:
        return [o["metadata"]["name"] for page in listed for o in page.items]

    first = names(pages(lambda _: Raw(["node-a", "node-b"]), as_is))
    again = names(pages(lambda _: Raw(["node-b", "node-a"]), as_is))
    assert first == ["node-a", "node-b"]
    assert first[0] is again[1] and first[1] is again[0]

"""kube-apiserver's ConfigMap list and watch in one namespace, on loopback HTTP, answering as the
real one does (core v1; the shapes of reference/k8s-wire/watch): list items without kind and
apiVersion, pages by `limit`/`continue` in name order, label selectors (`key`, `key=value`,
`!key`) and `metadata.name=` field selectors, `binaryData` as base64; a watch streams every change
after its resourceVersion as one JSON line per event (chunked), each object with kind and
apiVersion, and turns a change that moves an object out of (into) the selector into DELETED
(ADDED), as the watch cache does. The stream then ends, as at the server's timeout."""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client

from tests.fakes.http import api_client, reply

Obj = dict[str, Any]


def _matches(obj: Obj | None, labels: str, fields: str) -> bool:
    if obj is None:
        return False
    meta = obj["metadata"]
    have = meta.get("labels") or {}
    for term in filter(None, labels.split(",")):
        if term.startswith("!"):
            if term[1:] in have:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if have.get(key) != value:
                return False
        elif term not in have:
            return False
    for term in filter(None, fields.split(",")):
        key, value = term.split("=", 1)
        if key != "metadata.name" or meta["name"] != value:
            return False
    return True


class ConfigMapApi:
    def __init__(self, namespace: str = "gpufabric-system") -> None:
        self.namespace = namespace
        self.objects: dict[str, Obj] = {}
        self.history: list[tuple[int, Obj | None, Obj | None]] = []  # rv, before, after
        self.requests: list[dict[str, list[str]]] = []
        self._rv = 1000
        self._lock = threading.Lock()

    def put(self, obj: Obj) -> None:
        """Create or replace (as `kubectl apply` would leave it)."""
        with self._lock:
            self._rv += 1
            name = obj["metadata"]["name"]
            before = self.objects.get(name)
            new = copy.deepcopy(obj)
            new.pop("kind", None)
            new.pop("apiVersion", None)
            meta = new["metadata"]
            meta.update(
                namespace=self.namespace,
                uid=(before or {}).get("metadata", {}).get("uid") or f"uid-{name}",
                resourceVersion=str(self._rv),
                creationTimestamp="2026-11-26T12:00:00Z",
            )
            # Key order as the server writes a ConfigMap: metadata, data, binaryData.
            self.objects[name] = {k: new[k] for k in ("metadata", "data", "binaryData") if k in new}
            self.history.append((self._rv, before, self.objects[name]))

    def delete(self, name: str) -> None:
        with self._lock:
            self._rv += 1
            self.history.append((self._rv, self.objects.pop(name), None))

    def list_body(self, q: dict[str, list[str]]) -> bytes:
        labels, fields = q.get("labelSelector", [""])[0], q.get("fieldSelector", [""])[0]
        limit = int(q.get("limit", ["0"])[0])
        after = base64.b64decode(q.get("continue", [""])[0]).decode()
        with self._lock:
            found = [
                self.objects[n]
                for n in sorted(self.objects)
                if n > after and _matches(self.objects[n], labels, fields)
            ]
            meta: Obj = {"resourceVersion": str(self._rv)}
        if limit and len(found) > limit:
            found = found[:limit]
            meta["continue"] = base64.b64encode(found[-1]["metadata"]["name"].encode()).decode()
        body = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": found}
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"

    def watch_lines(self, q: dict[str, list[str]]) -> Iterator[bytes]:
        labels, fields = q.get("labelSelector", [""])[0], q.get("fieldSelector", [""])[0]
        since = int(q.get("resourceVersion", ["0"])[0] or 0)
        with self._lock:
            history = [h for h in self.history if h[0] > since]
        for rv, before, after in history:
            was, now = _matches(before, labels, fields), _matches(after, labels, fields)
            if not (was or now):
                continue
            kind = "MODIFIED" if was and now else "ADDED" if now else "DELETED"
            obj = copy.deepcopy(after or before)
            assert obj is not None
            obj["metadata"]["resourceVersion"] = str(rv)
            event = {"type": kind, "object": {"kind": "ConfigMap", "apiVersion": "v1", **obj}}
            yield json.dumps(event, separators=(",", ":")).encode() + b"\n"


@contextmanager
def serving(api: ConfigMapApi) -> Iterator[client.ApiClient]:
    """The fake on a free loopback port; a kubernetes ApiClient pointed at it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlparse(self.path)
            q = parse_qs(url.query)
            api.requests.append(q)
            if url.path != f"/api/v1/namespaces/{api.namespace}/configmaps":
                reply(self, 404, b'{"kind":"Status","code":404}\n')
                return
            if q.get("watch") != ["true"]:
                reply(self, 200, api.list_body(q))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for line in api.watch_lines(q):
                self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: Any) -> None:
            pass

    with api_client(Handler) as served:
        yield served

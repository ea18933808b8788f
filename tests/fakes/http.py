"""Loopback HTTP servers that stand in for the API server in wire tests (127.0.0.1 only)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client


def reply(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    """One JSON answer with its length, as the API server sends a non-watch response."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def start(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve `handler` on a free loopback port in a daemon thread; shut it down when done."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@contextmanager
def api_client(handler: type[BaseHTTPRequestHandler]) -> Iterator[client.ApiClient]:
    """The kubernetes client pointed at `handler` served on loopback; the server is shut down
    when the block ends, however it ends."""
    httpd = start(handler)
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield client.ApiClient(cfg)
    finally:
        httpd.shutdown()
        httpd.server_close()

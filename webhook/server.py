"""aiohttp transport: /mutate, /healthz, /readyz, /metrics; TLS with certificate hot reload.

The handler only reads the in-memory cache; it never calls the API server. A malformed body is an
HTTP 400; the admission decision itself is webhook.admission's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import ssl
import time
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook import review as rv
from webhook.admission import admit
from webhook.cache import FabricCache
from webhook.metrics import WebhookMetrics
from webhook.placement import Settings

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024  # the API server caps requests near 3 MiB; a pod is far smaller
CACHE_KEY = web.AppKey("cache", FabricCache)
SETTINGS_KEY = web.AppKey("settings", Settings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)


def _bad(message: str, metrics: WebhookMetrics) -> web.Response:
    metrics.outcomes.labels(outcome="bad_request").inc()
    return web.json_response({"error": message}, status=400)


async def mutate_handler(request: web.Request) -> web.Response:
    metrics = request.app[METRICS_KEY]
    started = time.perf_counter()
    if request.content_type != "application/json":
        return _bad(f"content type must be application/json, not {request.content_type!r}", metrics)
    if request.content_length is not None and request.content_length > MAX_BODY:
        return _bad(f"body larger than {MAX_BODY} bytes", metrics)
    try:
        body = await request.content.read(MAX_BODY + 1)
    except (OSError, ValueError) as err:
        return _bad(f"cannot read body: {err}", metrics)
    if len(body) > MAX_BODY:
        return _bad(f"body larger than {MAX_BODY} bytes", metrics)
    try:
        parsed = rv.parse(body)
    except rv.BadReview as err:
        return _bad(str(err), metrics)
    answer = admit(parsed, request.app[CACHE_KEY], request.app[SETTINGS_KEY])
    metrics.outcomes.labels(outcome=answer.outcome).inc()
    metrics.duration.observe(time.perf_counter() - started)
    if answer.outcome in ("denied", "warned"):
        log.info("admission", extra={"uid": parsed["uid"], "outcome": answer.outcome})
    return web.Response(
        body=json.dumps(rv.review(answer.response)), content_type="application/json"
    )


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    cache = request.app[CACHE_KEY]
    if cache.synced:
        return web.Response(text="ready\n")
    return web.Response(text="caches not synced\n", status=503)


async def metrics_handler(request: web.Request) -> web.Response:
    metrics, cache = request.app[METRICS_KEY], request.app[CACHE_KEY]
    metrics.cache_nodes.set(len(cache.nodes))
    metrics.cache_claims.set(len(cache.claims))
    metrics.cache_age.set(time.monotonic() - cache.updated)
    body = generate_latest(metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def make_app(
    cache: FabricCache, settings: Settings, metrics: WebhookMetrics | None = None
) -> web.Application:
    # client_max_size above MAX_BODY so the handler, not aiohttp's 413, answers oversized bodies.
    app = web.Application(client_max_size=MAX_BODY * 2)
    app[CACHE_KEY] = cache
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics or WebhookMetrics()
    app.router.add_post("/mutate", mutate_handler)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class CertReloader:
    """Re-reads the certificate and key when their content changes (a renewed Secret), into the
    same SSLContext: new handshakes use the new pair, open connections are not dropped."""

    def __init__(self, ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
        self.ctx, self.cert, self.key = ctx, cert, key
        self.digest = self._digest()

    def _digest(self) -> str:
        h = hashlib.sha256()
        for path in (self.cert, self.key):
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"missing")
        return h.hexdigest()

    def check(self) -> bool:
        digest = self._digest()
        if digest == self.digest:
            return False
        try:
            self.ctx.load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, OSError) as err:
            # A half-written Secret update: keep serving the old pair and try again next time.
            log.warning("certificate reload failed; keeping the old one", extra={"error": str(err)})
            return False
        self.digest = digest
        log.info("certificate reloaded", extra={"cert": str(self.cert)})
        return True

    async def watch(self, interval: float = 10.0) -> None:
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.check)

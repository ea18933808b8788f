"""aiohttp transport: /mutate, /healthz, /readyz, /metrics; TLS with certificate hot reload.

The handler only reads the in-memory cache; it never calls the API server. A malformed body is an
HTTP 400; the admission decision itself is webhook.admission.admit's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import hdrs, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from common.cli import UsageError, os_error
from common.logs import safe
from common.memory import release_memory
from webhook.admission import review as rv
from webhook.admission.admit import Answer, admit
from webhook.admission.jsoncodec import dumps
from webhook.admission.placement import Settings
from webhook.admission.review import has_fabric_annotations
from webhook.fleet.cache import FabricCache
from webhook.kube.watch import ListWatch
from webhook.server import tlsfiles
from webhook.server.connections import ConnectionGuard, GuardedSite, Limits
from webhook.server.metrics import WebhookMetrics

log = logging.getLogger(__name__)

# The largest AdmissionReview to read. etcd refuses objects over 1.5 MiB (--max-request-bytes
# 1572864), so that bounds a pod; the API server sends it to us as JSON, which can be longer than
# the stored bytes (JSON escapes `<`, `>`, `&` and control characters in 6 bytes), and the review
# wraps it with the request fields (and, for UPDATE, the old object too). 8 MiB holds a 1.5 MiB pod
# that grows 2.5x in JSON, twice, with room for the envelope; a body is read only up to this limit.
MAX_BODY = 8 * 1024 * 1024
LARGE_BODY = 1024 * 1024  # a body past this is rare (a review is ~3 KB): trim after it
READ_CHUNK = 256 * 1024
JSON = "application/json"
CACHE_KEY = web.AppKey("cache", FabricCache)
SETTINGS_KEY = web.AppKey("settings", Settings)
METRICS_KEY = web.AppKey("metrics", WebhookMetrics)
# The watches behind the cache (serve sets it): /readyz names the ones that are failing.
WATCHES_KEY: web.AppKey[list[ListWatch]] = web.AppKey("watches")
GUARD_KEY = web.AppKey("guard", ConnectionGuard)
# What serve still waits for before it can answer reviews (the certificate files): /readyz is false
# while this holds anything.
WAITING_KEY: web.AppKey[list[str]] = web.AppKey("waiting")


class BodyError(ValueError):
    """The body could not be read whole within the limits: answered with HTTP 400."""


def _bad(message: str, metrics: WebhookMetrics) -> web.Response:
    metrics.admissions.count("bad_request")
    return web.json_response({"error": message}, status=400)


async def read_body(request: web.Request, limit: int, seconds: float) -> bytes:
    """The whole body, however many chunks it arrives in, up to `limit` bytes and `seconds`."""
    content = request.content
    try:
        if content.is_eof():  # all of it arrived with the head (a review usually does): no wait
            body = content.read_nowait()
            if len(body) > limit:
                raise BodyError(f"body larger than {limit} bytes")
            return body
        if request.content_length is not None and request.content_length > limit:
            raise BodyError(f"body larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async with asyncio.timeout(seconds):
            while chunk := await content.read(READ_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise BodyError(f"body larger than {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise BodyError(f"body not received within {seconds:g} s") from None
    except (OSError, aiohttp.ClientPayloadError, web.HTTPException) as err:
        raise BodyError(f"cannot read body: {safe(err)}") from None
    return b"".join(chunks)


def _last_resort(request: rv.Request) -> Answer:
    """The answer when admission itself failed: never admit a fabric pod unconstrained; leave
    every other pod alone (the webhook never changes those anyway)."""
    uid = request["uid"]
    if has_fabric_annotations(request["object"]):
        return Answer(
            rv.denied(
                uid,
                "gpufabric: internal error while admitting this pod, so it was not admitted; "
                f"the webhook log has the details under uid {safe(uid, 64)}",
                500,
            ),
            "error",
        )
    return Answer(rv.allowed(uid, None, []), "untouched")


@dataclass(frozen=True, slots=True)
class Reply:
    """What /mutate sends back for one body: HTTP status, JSON body, outcome for the metrics."""

    status: int
    body: Mapping[str, Any]
    outcome: str
    uid: str = ""


def reply(body: bytes, cache: FabricCache, settings: Settings) -> Reply:
    """The answer to one request body: HTTP 400 with {"error"} when it is not an AdmissionReview,
    else HTTP 200 with the review's response. Never raises."""
    try:
        parsed = rv.parse(body)
    except rv.BadReview as err:
        return Reply(400, {"error": str(err)}, "bad_request")
    except Exception:  # last resort: a body we could not even classify is the sender's fault
        log.exception("review parsing failed", extra={"bytes": len(body)})
        return Reply(400, {"error": "body is not a readable AdmissionReview"}, "bad_request")
    try:
        answer = admit(parsed, cache, settings, owned=True)  # parsed just now, for this only
    except Exception:  # last resort: log it, answer cleanly (see _last_resort)
        log.exception("admission failed", extra={"uid": parsed["uid"]})
        answer = _last_resort(parsed)
    return Reply(200, rv.review(answer.response), answer.outcome, parsed["uid"])


def mutate_handler(app: web.Application) -> Callable[[web.Request], Awaitable[web.Response]]:
    """POST /mutate of this app (its cache, settings, metrics and limits bound once)."""
    cache, settings, metrics = app[CACHE_KEY], app[SETTINGS_KEY], app[METRICS_KEY]
    limits, count = app[GUARD_KEY].limits, metrics.admissions.count

    async def mutate(request: web.Request) -> web.Response:
        started = time.perf_counter()
        # The header as sent first (what the API server sends); parsed only when it differs.
        if request.headers.get(hdrs.CONTENT_TYPE) != JSON and request.content_type != JSON:
            return _bad(f"content type must be {JSON}, not {request.content_type!r}", metrics)
        try:
            body = await read_body(request, MAX_BODY, limits.body_timeout)
        except BodyError as err:
            release_memory()  # what was read of it: up to MAX_BODY
            return _bad(str(err), metrics)
        out = reply(body, cache, settings)
        if len(body) > LARGE_BODY:  # its megabytes (and its parse) back to the system now
            del body
            release_memory()
        count(out.outcome, time.perf_counter() - started if out.status == 200 else None)
        if out.outcome in ("denied", "warned", "error"):
            log.info("admission", extra={"uid": out.uid, "outcome": out.outcome})
        # Compact JSON (json.dumps(..., separators=(",", ":"))'s bytes): the reply is only parsed.
        return web.Response(body=dumps(out.body), status=out.status, content_type=JSON)

    return mutate


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    cache = request.app[CACHE_KEY]
    # Still ready while a watch fails (the last good cache answers), but say how stale it is.
    stale = "".join(
        f"stale: {w.name} watch failing for {w.stale_seconds():.0f}s; serving the last good cache\n"
        for w in request.app.get(WATCHES_KEY, [])
        if w.stale_seconds() > 0
    )
    waiting = request.app.get(WAITING_KEY)
    if waiting:
        return web.Response(text="".join(f"waiting: {w}\n" for w in waiting), status=503)
    if cache.synced:
        return web.Response(text="ready\n" + stale)
    return web.Response(text="caches not synced\n" + stale, status=503)


async def metrics_handler(request: web.Request) -> web.Response:
    metrics, cache = request.app[METRICS_KEY], request.app[CACHE_KEY]
    metrics.cache_nodes.set(len(cache.nodes))
    metrics.cache_claims.set(len(cache.claims))
    metrics.cache_age.set(time.monotonic() - cache.updated)
    body = generate_latest(metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def make_app(
    cache: FabricCache,
    settings: Settings,
    metrics: WebhookMetrics | None = None,
    limits: Limits | None = None,
) -> web.Application:
    guard = ConnectionGuard(limits or Limits())
    middlewares = [guard.middleware] if guard.needs_middleware else []
    app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
    app[GUARD_KEY] = guard
    app[CACHE_KEY] = cache
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics or WebhookMetrics()
    app.router.add_post("/mutate", mutate_handler(app))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app


async def start_https(
    runner: web.AppRunner, host: str, port: int, ctx: ssl.SSLContext | None
) -> GuardedSite:
    """Serve the runner's app on host:port through its ConnectionGuard (make_app's limits)."""
    app = runner.app
    site = GuardedSite(runner, host, port, app[GUARD_KEY], ssl_context=ctx)
    await site.start()
    return site


def runner_for(app: web.Application) -> web.AppRunner:
    """An AppRunner whose aiohttp keep-alive matches the guard's idle timeout."""
    return web.AppRunner(app, access_log=None, keepalive_timeout=app[GUARD_KEY].limits.idle_timeout)


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS 1.2+ server context; UsageError naming the file when a file is missing or bad."""
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        wrong = tlsfiles.problem(flag, path)
        if wrong is not None:
            raise UsageError(wrong)
        if not path.exists():
            raise UsageError(f"{flag} {path}: no such file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as err:
        raise UsageError(
            f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its key "
            f"({err.reason or err})"
        ) from None
    except OSError as err:
        raise UsageError(f"--tls-cert {cert} / --tls-key {key}: {os_error(err)}") from None
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

"""Bounds on the admission server's connections: how many, how long idle, how long to send a
request, how much memory each costs.

aiohttp keeps an idle connection for 3,630 s and has no limit on their number, and CPython's TLS
layer gives every connection a 256 KiB read buffer (asyncio.sslproto.SSLProtocol.max_size): 1,000
idle TLS connections cost ~280 MB. Here:
- `Limits.idle_timeout`: a connection that has no request in progress is closed once it has been
  so for this long, counted from the handshake or the end of the last response (as the guard
  sees it: at most one sweep interval, <= 1 s, late). It is both the keep-alive timeout and the
  time a client has to send a whole request head (slow senders).
- `Limits.max_connections`: at the cap, a new connection closes the connection idle the longest;
  when every connection is busy, the new one is closed instead.
- `Limits.handshake_timeout` bounds a TLS handshake; `Limits.body_timeout` (applied by the
  handler) bounds reading a body.
- The TLS read buffer is one TLS record (16 KiB of plaintext at most), which is all a read returns.
The API server reuses a few keep-alive connections, so none of this touches its traffic.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)
TLS_RECORD = 16 * 1024  # the largest TLS plaintext record (RFC 8446 §5.1)
# aiohttp's protocol says whether it is handling a request and counts the requests it handled:
# the guard reads both when it sweeps or is at the cap (O(connections), at most once a second)
# and so needs no hook per request (a middleware cost a review 4-5 % of a bare server's CPU).
# An aiohttp without them gets the middleware (make_app asks `needs_middleware`).
CONNECTION_LEVEL = {"_request_in_progress", "_request_count"} <= set(
    getattr(RequestHandler, "__slots__", ())
)


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = 256
    idle_timeout: float = 30.0
    handshake_timeout: float = 10.0
    body_timeout: float = 10.0


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the bookkeeping the guard needs."""

    def __init__(self, inner: Any, guard: ConnectionGuard) -> None:
        self.inner, self.guard = inner, guard
        self.transport: asyncio.BaseTransport | None = None
        self.busy = 0  # requests in progress (the middleware's count)
        self.idle_since = 0.0
        self.handled = 0  # requests aiohttp had handled when the guard last looked

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)
        self.guard.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed(self)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def in_progress(self) -> bool:
        return self.busy > 0 or (CONNECTION_LEVEL and bool(self.inner._request_in_progress))

    def look(self, now: float) -> None:
        """Without the middleware: a request in progress, or one handled since the last look,
        makes the connection idle from now on."""
        if not CONNECTION_LEVEL:
            return
        handled: int = self.inner._request_count
        if handled != self.handled or self.inner._request_in_progress:
            self.handled, self.idle_since = handled, now


class ConnectionGuard:
    """Protocol factory in front of aiohttp's server that enforces Limits (see the module doc)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.server: Callable[[], Any] | None = None  # aiohttp's protocol factory, set by the site
        self.live: dict[Any, _Tracked] = {}  # aiohttp handler -> its connection
        self.evicted = self.refused = self.timed_out = 0
        self._sweeper: asyncio.Task[None] | None = None

    def __call__(self) -> asyncio.Protocol:
        if self.server is None:
            raise RuntimeError("GuardedSite.start sets the server before accepting")
        return _Tracked(self.server(), self)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    @property
    def needs_middleware(self) -> bool:
        return not CONNECTION_LEVEL

    def opened(self, conn: _Tracked) -> None:
        conn.idle_since = now = self._now()
        if len(self.live) >= self.limits.max_connections:
            for c in self.live.values():
                c.look(now)
            idle = [c for c in self.live.values() if not c.in_progress()]
            if not idle:
                self.refused += 1
                conn.close()
                return
            victim = min(idle, key=lambda c: c.idle_since)
            self.live.pop(victim.inner, None)
            victim.close()
            self.evicted += 1
        self.live[conn.inner] = conn

    def closed(self, conn: _Tracked) -> None:
        if self.live.get(conn.inner) is conn:
            del self.live[conn.inner]

    def sweep(self) -> int:
        """Close connections idle longer than the idle timeout; returns how many."""
        now = self._now()
        for c in self.live.values():
            c.look(now)
        deadline = now - self.limits.idle_timeout
        stale = [c for c in self.live.values() if not c.in_progress() and c.idle_since < deadline]
        for c in stale:
            self.live.pop(c.inner, None)
            c.close()
        self.timed_out += len(stale)
        return len(stale)

    async def run_sweeper(self) -> None:
        interval = min(1.0, self.limits.idle_timeout / 4)
        while True:
            await asyncio.sleep(interval)
            self.sweep()

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Marks the connection busy while a request is handled (only where aiohttp does not
        say so itself: see CONNECTION_LEVEL)."""
        conn = self.live.get(request.protocol)
        if conn is None:
            return await handler(request)
        conn.busy += 1
        try:
            return await handler(request)
        finally:
            conn.busy -= 1
            conn.idle_since = self._now()


class GuardedSite(web.TCPSite):
    """web.TCPSite whose connections go through a ConnectionGuard."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        guard: ConnectionGuard,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self.guard = guard
        self._runner_ref = runner

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with the runner
        loop = asyncio.get_running_loop()
        self.guard.server = self._runner_ref.server
        if self._ssl_context is not None:
            # CPython zero-fills a 256 KiB read buffer per TLS connection; one record is enough.
            asyncio.sslproto.SSLProtocol.max_size = TLS_RECORD
        self._server = await loop.create_server(
            self.guard,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            ssl_handshake_timeout=self.guard.limits.handshake_timeout
            if self._ssl_context
            else None,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1]
        self.guard._sweeper = asyncio.create_task(self.guard.run_sweeper())

    @property
    def port(self) -> int:
        return self._bound_port or self._port

    async def stop(self) -> None:
        if self.guard._sweeper is not None:
            self.guard._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.guard._sweeper
        await super().stop()

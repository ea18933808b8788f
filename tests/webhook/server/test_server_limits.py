"""The admission server's limits (issue 11): whole bodies read however they are chunked, up to a
bound; idle and slow connections closed; a connection cap that makes room by closing the longest
idle connection. Real sockets on loopback, timeouts shortened through Limits."""

from __future__ import annotations

import asyncio
import copy
import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.webhook.helpers import golden_cache
from webhook.admission.placement import Settings
from webhook.server.app import MAX_BODY, make_app, runner_for, start_https
from webhook.server.connections import Limits

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admission"
BASE: dict[str, Any] = json.loads((FIXTURES / "pod-create.review.json").read_bytes())
Served = tuple[str, Any]  # the URL and the connection guard
ETCD_OBJECT_LIMIT = 1536 * 1024  # etcd --max-request-bytes default: 1.5 MiB


def large_review(size: int) -> bytes:
    """The captured review with one env value that makes its pod `size` bytes of JSON."""
    doc = copy.deepcopy(BASE)
    container = doc["request"]["object"]["spec"]["containers"][0]
    container["env"] = [{"name": "BIG", "value": ""}]
    pod_len = len(json.dumps(doc["request"]["object"], separators=(",", ":")))
    container["env"][0]["value"] = "x" * (size - pod_len)
    return json.dumps(doc, separators=(",", ":")).encode()


@asynccontextmanager
async def _serving(limits: Limits, release: asyncio.Event | None = None) -> AsyncIterator[Served]:
    """The admission server on a free loopback port: its URL and connection guard; with
    `release`, also GET /hold, answered once `release` is set."""
    app = make_app(golden_cache(), Settings(), limits=limits)
    if release is not None:
        held = release  # not None inside the handler too (mypy narrows no closure)

        async def hold(request: web.Request) -> web.Response:
            await held.wait()
            return web.Response(text="done")

        app.router.add_get("/hold", hold)
    runner = runner_for(app)
    await runner.setup()
    site = await start_https(runner, "127.0.0.1", 0, None)
    try:
        yield f"http://127.0.0.1:{site.port}", site.guard
    finally:
        if release is not None:
            release.set()  # before the cleanup, which waits for handlers in progress
        await runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[Served]:
    async with _serving(Limits(max_connections=4, idle_timeout=0.6, body_timeout=0.6)) as served:
        yield served


async def test_a_pod_at_the_etcd_limit_sent_in_many_chunks_is_admitted(
    server: Served,
) -> None:
    url, _ = server
    body = large_review(ETCD_OBJECT_LIMIT)
    assert (
        len(json.loads(body)["request"]["object"]["spec"]["containers"][0]["env"][0]["value"])
        > 1_500_000
    )

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 7919):  # ~200 chunks, each written separately
            yield body[i : i + 7919]
            if i % (20 * 7919) == 0:
                await asyncio.sleep(0.001)

    async with (
        aiohttp.ClientSession() as s,
        s.post(url + "/mutate", data=chunks(), headers={"Content-Type": "application/json"}) as r,
    ):
        assert r.status == 200
        out = await r.json()
    assert out["response"]["allowed"] is True and "patch" in out["response"]


async def test_a_body_over_the_limit_is_400_with_json(server: Served) -> None:
    url, _ = server
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            url + "/mutate",
            data=io.BytesIO(b"{" + b" " * (MAX_BODY + 10) + b"}"),
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        assert r.status == 400
        assert "larger than" in (await r.json())["error"]


async def test_a_slow_body_is_cut_off(server: Served) -> None:
    url, _ = server
    body = json.dumps(BASE).encode()

    async def trickle() -> AsyncIterator[bytes]:
        yield body[:100]
        await asyncio.sleep(2)
        yield body[100:]

    async with (
        aiohttp.ClientSession() as s,
        s.post(url + "/mutate", data=trickle(), headers={"Content-Type": "application/json"}) as r,
    ):
        assert r.status == 400
        assert "not received within" in (await r.json())["error"]


async def _open(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def _closed(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


async def test_idle_and_slow_header_connections_are_closed(server: Served) -> None:
    url, _ = server
    idle_r, idle_w = await _open(url)
    slow_r, slow_w = await _open(url)
    slow_w.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
    for _ in range(4):
        await asyncio.sleep(0.2)
        slow_w.write(b"X-Slow: 1\r\n")  # still sending, byte by byte
    assert await _closed(idle_r, 3)
    assert await _closed(slow_r, 3)
    idle_w.close()
    slow_w.close()


async def test_keep_alive_connection_is_closed_after_the_idle_timeout(
    server: Served,
) -> None:
    url, _ = server
    reader, writer = await _open(url)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"ok\n"), 2)
    assert b"200 OK" in head and b"Connection: close" not in head  # kept alive ...
    assert await _closed(reader, 3)  # ... until idle for the timeout
    writer.close()


async def test_the_connection_cap_closes_the_longest_idle_one(server: Served) -> None:
    url, guard = server
    conns = [await _open(url) for _ in range(4)]
    await asyncio.sleep(0.05)
    assert len(guard.live) == 4
    newest_r, newest_w = await _open(url)  # the 5th: the oldest idle makes room
    assert await _closed(conns[0][0], 1)
    newest_w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"200 OK" in await asyncio.wait_for(newest_r.readuntil(b"ok\n"), 2)
    assert guard.evicted == 1 and len(guard.live) == 4
    for _, w in [*conns, (newest_r, newest_w)]:
        w.close()


async def test_at_the_cap_with_every_connection_busy_the_new_one_is_closed() -> None:
    release = asyncio.Event()
    async with _serving(Limits(max_connections=2, idle_timeout=5), release) as (url, guard):
        busy = [await _open(url) for _ in range(2)]
        for _, w in busy:
            w.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(0.1)
        extra_r, extra_w = await _open(url)
        assert await _closed(extra_r, 1)
        extra_w.close()
        assert guard.refused == 1
        release.set()
        for r, w in busy:
            assert b"done" in await asyncio.wait_for(r.readuntil(b"done"), 2)
            w.close()


async def test_a_request_in_progress_outlasts_the_idle_timeout() -> None:
    """The guard reads "request in progress" from aiohttp's protocol (no middleware): a handler
    slower than the idle timeout keeps its connection, which closes once idle afterwards."""
    release = asyncio.Event()
    async with _serving(Limits(idle_timeout=0.4), release) as (url, guard):
        reader, writer = await _open(url)
        writer.write(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not await _closed(reader, 1.2)  # three idle timeouts, three sweeps
        release.set()
        assert b"done" in await asyncio.wait_for(reader.readuntil(b"done"), 2)
        assert await _closed(reader, 2)
        assert guard.timed_out + guard.evicted <= 1
        writer.close()

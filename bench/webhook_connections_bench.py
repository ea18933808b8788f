"""Memory of the admission server under many idle TLS connections (issue 11).

Starts two servers on loopback, each in its own process, with the golden cache: `baseline` is
aiohttp's plain TCPSite with its defaults (what `serve` used before: no connection cap, 3,630 s
keep-alive, 256 KiB TLS read buffer per connection), `bounded` is `serve`'s site with
webhook.server.connections.Limits defaults. The client opens N TLS connections to each, completes every
handshake, sends nothing and holds them; the server's RSS growth is read from /proc while they are
held. The bounded server must stay within +50 MB at N=2,000 (issue 11's bar).

    .venv/bin/python bench/webhook_connections_bench.py [--connections 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import resource
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certs.pki import make_ca, make_serving  # noqa: E402

SERVER = """
import asyncio, sys
sys.path.insert(0, {root!r})
from aiohttp import web
from tests.webhook.helpers import golden_cache
from webhook.admission.placement import Settings
from webhook.server.app import make_app, runner_for, start_https, tls_context

async def main(kind):
    ctx = tls_context(__import__("pathlib").Path({cert!r}), __import__("pathlib").Path({key!r}))
    app = make_app(golden_cache(), Settings())
    if kind == "bounded":
        runner = runner_for(app)
        await runner.setup()
        port = (await start_https(runner, "127.0.0.1", 0, ctx)).port
    else:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
    print(port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(sys.argv[1]))
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def hold(port: int, ca: Path, n: int) -> int:
    ctx = ssl.create_default_context(cafile=str(ca))
    held = []
    for _ in range(n):
        try:
            held.append(
                await asyncio.open_connection(
                    "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
                )
            )
        except OSError:
            continue
    await asyncio.sleep(1.0)  # let the server settle (evictions, refusals)
    return len(held)


def measure(kind: str, n: int, files: dict[str, Path]) -> tuple[float, float]:
    code = SERVER.format(root=str(ROOT), cert=str(files["cert"]), key=str(files["key"]))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, kind], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        before = rss_mb(proc.pid)
        loop = asyncio.new_event_loop()
        opened = 0
        peak = before

        async def run() -> None:
            nonlocal opened, peak
            task = asyncio.create_task(hold(port, files["ca"], n))
            while not task.done():
                peak = max(peak, rss_mb(proc.pid))
                await asyncio.sleep(0.05)
            opened = await task
            peak = max(peak, rss_mb(proc.pid))

        loop.run_until_complete(run())
        loop.close()
        return before, peak
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000, help="default: 2000")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.connections)), hard))
    now = dt.datetime.now(dt.UTC)
    tmp = Path(tempfile.mkdtemp())
    ca = make_ca("bench", now)
    serving = make_serving(ca, ["localhost", "127.0.0.1"], now)
    files = {"ca": tmp / "ca.crt", "cert": tmp / "tls.crt", "key": tmp / "tls.key"}
    files["ca"].write_bytes(ca.cert_pem)
    files["cert"].write_bytes(serving.cert_pem)
    files["key"].write_bytes(serving.key_pem)
    print(f"{args.connections} idle TLS connections held against each server (loopback)")
    results = {}
    for kind in ("baseline", "bounded"):
        before, peak = measure(kind, args.connections, files)
        results[kind] = peak - before
        print(f"{kind:9s} RSS {before:7.1f} MB -> peak {peak:7.1f} MB  (+{peak - before:.1f} MB)")
    ratio = results["baseline"] / max(results["bounded"], 0.1)
    print(f"bounded growth is 1/{ratio:.1f} of the baseline's; bar: <= +50 MB")


if __name__ == "__main__":
    main()

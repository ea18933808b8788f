#!/usr/bin/env python3
"""Webhook benchmark: reviews/s and latency over loopback TLS with 5,000 GpuNodeStatus in cache.

    .venv/bin/python bench/webhook_bench.py [--requests 20000] [--concurrency 16] [--nodes 5000]

The server runs in its own process pinned to one core (CPU 0); the load generator on the other.
Server time is measured inside the server around the whole request handler; client latency
includes TLS and loopback. Targets (issue 3): >= 1,000 reviews/s on one core, server p99 <= 5 ms,
server RSS <= 300 MB with 5,000 statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing as mp
import os
import random
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from certs.pki import make_ca, make_serving  # noqa: E402

GOLDEN = ROOT / "tests" / "golden"
POLICY = (ROOT / "daemonset" / "components" / "cufile-policy" / "cufile.json").read_text()


def statuses(n: int, seed: int = 1) -> Iterator[tuple[str, dict[str, Any]]]:
    """n statuses made from the fixture goldens, with some ports down to vary the layouts."""
    base = [yaml.safe_load(p.read_text())["status"] for p in sorted(GOLDEN.glob("*.yaml"))]
    rng = random.Random(seed)
    for i in range(n):
        status = json.loads(json.dumps(base[i % len(base)]))
        summary = status["summary"]
        if summary.get("usableHcas") and rng.random() < 0.1:
            drop = rng.choice(summary["usableHcas"])
            summary["usableHcas"] = [h for h in summary["usableHcas"] if h != drop]
            summary["rdmaPorts"] = len(summary["usableHcas"])
            summary["hcaProfile"] = ""
            summary["fabricHealth"] = "degraded"
        yield (f"gpu-node-{i:05d}", status)


def realistic_pod() -> dict[str, Any]:
    container = {
        "name": "x",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "--nproc-per-node=8", "train.py"],
        "env": [{"name": f"VAR_{i}", "value": str(i)} for i in range(12)],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer-0",
            "namespace": "team-a",
            "labels": {"app": "llm", "job": "j1"},
            "annotations": {
                "gpufabric.io/topology": "nvlink",
                "gpufabric.io/rdma": "required",
                "gpufabric.io/rdma-min-ports": "4",
                "gpufabric.io/cufile": "preferred",
            },
        },
        "spec": {
            "containers": [
                dict(container, name="trainer"),
                dict(container, name="logger", resources={}),
                {"name": "metrics", "image": "prom/node-exporter"},
            ],
            "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": ["zone-a"],
                                    }
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node.kubernetes.io/instance-type",
                                        "operator": "In",
                                        "values": ["ND96isr_H100_v5"],
                                    }
                                ]
                            },
                        ]
                    }
                }
            },
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


def review(i: int, pod: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"uid-{i}",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "team-a",
                "operation": "CREATE",
                "object": pod,
                "userInfo": {"username": "u"},
            },
        }
    ).encode()


def server(port: int, cert: str, key: str, nodes: int, ready: Any, stats: Any) -> None:
    os.sched_setaffinity(0, {0})
    import psutil
    from aiohttp import web

    from webhook.cache import FabricCache
    from webhook.placement import Settings
    from webhook.server import make_app, tls_context

    cache = FabricCache()
    cache.replace_nodes(statuses(nodes))
    cache.replace_claims([])
    durations: list[float] = []

    @web.middleware
    async def timing(request: web.Request, handler: Any) -> web.StreamResponse:
        t = time.perf_counter()
        resp = await handler(request)
        if request.path == "/mutate":
            durations.append(time.perf_counter() - t)
        return resp

    async def report(request: web.Request) -> web.Response:
        d = sorted(durations)
        return web.json_response(
            {
                "count": len(d),
                "p50": d[len(d) // 2],
                "p99": d[int(len(d) * 0.99)],
                "rss": psutil.Process().memory_info().rss,
                "groups": len(cache.groups()),
                "nodes": len(cache.nodes),
            }
        )

    async def reset(request: web.Request) -> web.Response:
        durations.clear()
        return web.Response(text="ok")

    app = make_app(cache, Settings(cufile_policy=POLICY))
    app.middlewares.append(timing)
    app.router.add_get("/bench-stats", report)
    app.router.add_post("/bench-reset", reset)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(
            runner, "127.0.0.1", port, ssl_context=tls_context(Path(cert), Path(key))
        ).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


async def load(port: int, ca: str, total: int, concurrency: int) -> tuple[float, list[float]]:
    import aiohttp

    ctx = ssl.create_default_context(cadata=ca)
    pod = realistic_pod()
    bodies = [review(i, pod) for i in range(256)]
    url = f"https://localhost:{port}/mutate"
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=ctx)
    async with aiohttp.ClientSession(connector=connector) as s:
        for i in range(200):  # warm-up
            async with s.post(
                url, data=bodies[i % 256], headers={"Content-Type": "application/json"}
            ) as r:
                await r.read()
        await s.post(f"https://localhost:{port}/bench-reset")
        counter = iter(range(total))

        async def worker() -> None:
            for i in counter:
                t = time.perf_counter()
                async with s.post(
                    url, data=bodies[i % 256], headers={"Content-Type": "application/json"}
                ) as r:
                    body = await r.read()
                    assert r.status == 200 and b'"allowed": true' in body, body[:200]
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return elapsed, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--port", type=int, default=18443)
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory() as tmp:
        ca = make_ca("bench-ca", now)
        serving = make_serving(ca, ["localhost"], now)
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(serving.cert_pem)
        key.write_bytes(serving.key_pem)
        ready = mp.Event()
        proc = mp.Process(
            target=server,
            args=(args.port, str(cert), str(key), args.nodes, ready, None),
            daemon=True,
        )
        proc.start()
        if not ready.wait(120):
            print("server did not start", file=sys.stderr)
            return 1
        if len(os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, set(os.sched_getaffinity(0)) - {0})
        elapsed, lat = asyncio.run(
            load(args.port, ca.cert_pem.decode(), args.requests, args.concurrency)
        )

        async def stats() -> dict[str, Any]:
            import aiohttp

            ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
            async with (
                aiohttp.ClientSession() as s,
                s.get(f"https://localhost:{args.port}/bench-stats", ssl=ctx) as r,
            ):
                return dict(await r.json())

        st = asyncio.run(stats())
        proc.terminate()
    lat.sort()
    print(
        f"{args.requests} reviews, concurrency {args.concurrency}, {st['nodes']} GpuNodeStatus "
        f"in cache ({st['groups']} distinct layouts), server pinned to 1 core"
    )
    print(f"throughput: {args.requests / elapsed:.0f} reviews/s (target >= 1000)")
    print(
        f"server time: p50 {st['p50'] * 1000:.2f} ms, p99 {st['p99'] * 1000:.2f} ms (target p99 <= 5 ms)"
    )
    print(
        f"client latency (TLS, loopback): p50 {statistics.median(lat) * 1000:.2f} ms, "
        f"p99 {lat[int(len(lat) * 0.99)] * 1000:.2f} ms"
    )
    print(f"server RSS: {st['rss'] / 2**20:.1f} MiB (target <= 300 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

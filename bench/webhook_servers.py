"""The two servers bench/webhook_bench.py compares, and the fleets it loads into the webhook.

- `baseline_server`: a bare aiohttp app on the same TLS setup (webhook.server.app.tls_context) that
  parses the same AdmissionReview and answers `allowed`: the cost of HTTP + TLS + JSON alone.
- `fabric_server`: the real webhook app (webhook.server.app.make_app) over a FabricCache filled with a
  generated fleet, plus /bench/* endpoints that measure inside the server process.
Both run in their own process pinned to CPU 0; CPU per review is the server's process CPU time.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from common.labels import hca_profile  # noqa: E402

GOLDEN = ROOT / "tests" / "golden"
Status = dict[str, Any]


def _bases() -> list[Status]:
    return [yaml.safe_load(p.read_text())["status"] for p in sorted(GOLDEN.glob("*.yaml"))]


def _with(base: Status, **summary: Any) -> Status:
    """The base status with some summary fields changed; everything else shared, not copied."""
    out = dict(base)
    out["summary"] = {**base["summary"], **summary}
    return out


def _usable(summary: Status, usable: list[str]) -> dict[str, Any]:
    return {
        "usableHcas": usable,
        "rdma": bool(usable),
        "rdmaPorts": len(usable),
        "hcaProfile": hca_profile(usable),
        "fabricHealth": "ok" if usable == summary["usableHcas"] else "degraded",
    }


def fleet(n: int, shape: str, variant: int = 0) -> Iterator[tuple[str, Status]]:
    """n statuses made from the fixture goldens (tests/golden, from ../shared/reference dumps).

    alike: the seven fixture nodes, one in ten with one HCA down (~50 layouts at 5,000 nodes).
    distinct: every node its own layout: HGX H100 with a different set of usable HCAs (port
    failures) and a different NVLink bandwidth (links down), as a degraded fleet looks.
    `variant` shifts which nodes are degraded, for a relist that changes some statuses.
    """
    bases = _bases()
    if shape == "alike":
        for i in range(n):
            base = bases[i % len(bases)]
            usable = list(base["summary"].get("usableHcas", ()))  # stored only when not empty
            if usable and (i * 7919 + variant) % 10 == 0:
                usable.remove(usable[(i // len(bases)) % len(usable)])
                yield f"gpu-node-{i:05d}", _with(base, **_usable(base["summary"], usable))
            else:
                yield f"gpu-node-{i:05d}", base
        return
    # The HGX H100 fixture by name (picking "the healthy NVLink node with the most HCAs" took the
    # 16-port OCI node once it counted as healthy: 2^16 subsets, a different fleet).
    hgx = yaml.safe_load((GOLDEN / "hgx-h100.yaml").read_text())["status"]
    hcas = list(hgx["summary"]["usableHcas"])
    subsets = 2 ** len(hcas) - 1
    for i in range(n):
        k = (i + variant) % (subsets * 100)
        mask = k % subsets + 1
        usable = [h for b, h in enumerate(hcas) if mask >> b & 1]
        bandwidth = 900 - 5 * (k // subsets)
        yield (
            f"gpu-node-{i:05d}",
            _with(hgx, nvlinkBandwidthGBps=bandwidth, **_usable(hgx["summary"], usable)),
        )


def _pin() -> None:
    os.sched_setaffinity(0, {0})


async def _serve(app: Any, port: int, cert: str, key: str, ready: Any, bare: bool) -> None:
    from aiohttp import web

    from webhook.server import app as server

    ctx = server.tls_context(Path(cert), Path(key))
    if bare:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx).start()
    else:  # the webhook's own serving path, as `serve` runs it
        runner = server.runner_for(app)
        await runner.setup()
        await server.start_https(runner, "127.0.0.1", port, ctx)
    ready.set()
    await asyncio.Event().wait()


async def _cpu(request: Any) -> Any:
    from aiohttp import web

    return web.json_response({"cpu": time.process_time()})


def baseline_server(port: int, cert: str, key: str, ready: Any) -> None:
    _pin()
    from aiohttp import web

    async def mutate(request: web.Request) -> web.Response:
        review = json.loads(await request.read())
        response = {"uid": review["request"]["uid"], "allowed": True}
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }
        return web.Response(body=json.dumps(body), content_type="application/json")

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/bench/cpu", _cpu)
    asyncio.run(_serve(app, port, cert, key, ready, bare=True))


def node_labels(n: int, one_zone: bool = False) -> dict[str, dict[str, str]]:
    """Node labels as a real GPU node carries them (kubelet, cloud, GPU feature discovery): two
    zones (one_zone: every node in zone-a), two instance types, the rest alike but the hostname
    (issue 17 item 1)."""
    out = {}
    for i in range(n):
        name = f"gpu-node-{i:05d}"
        out[name] = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "topology.kubernetes.io/region": "region-1",
            "topology.kubernetes.io/zone": "zone-a" if i % 2 or one_zone else "zone-b",
            "node.kubernetes.io/instance-type": "gpu-8x" if i % 3 else "gpu-4x",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/cuda.driver.major": "535",
            "nvidia.com/cuda.driver.minor": "161",
            "nvidia.com/mig.capable": "true",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/kernel-version.full": "5.15.0-105-generic",
            "node-role.kubernetes.io/gpu": "",
        }
    return out


def fabric_server(
    port: int,
    cert: str,
    key: str,
    nodes: int,
    shape: str,
    review: bytes,
    ready: Any,
    labels: bool = False,
    one_zone: bool = False,
) -> None:
    _pin()
    import psutil
    from aiohttp import web

    from webhook.admission import review as rv
    from webhook.admission.admit import admit
    from webhook.admission.placement import Settings
    from webhook.fleet.cache import FabricCache
    from webhook.server.app import make_app

    policy = (ROOT / "daemonset" / "components" / "cufile-policy" / "cufile.json").read_text()
    settings = Settings(cufile_policy=policy)
    cache = FabricCache()
    cache.replace_nodes(fleet(nodes, shape))
    cache.replace_claims([])
    if labels:  # serve's Node watch: the pod's own zone / instance-type affinity narrows the nodes
        known = node_labels(nodes, one_zone)
        cache.replace_existing_nodes(list(known), known)
        del known  # the watch's list is gone after it too: RSS counts what the cache keeps
    request = rv.parse(review)
    relist: dict[str, Any] = {}

    def stats() -> dict[str, Any]:
        return {
            "rss": psutil.Process().memory_info().rss,
            "layouts": len(cache.groups()),
            "nodes": len(cache.nodes),
        }

    def change_probe(rounds: int = 21) -> dict[str, Any]:
        """A watch event that gives one node a layout no node had: its cost, and the cost of
        the first review after it (then put the node back)."""
        original = dict(fleet(nodes, shape))
        puts, firsts, seconds = [], [], []
        for k in range(rounds):
            name = f"gpu-node-{(k * 997) % nodes:05d}"
            changed = _with(original[name], nvlinkBandwidthGBps=100 + k)
            t0 = time.perf_counter()
            cache.put_node(name, changed)
            t1 = time.perf_counter()
            admit(request, cache, settings)
            t2 = time.perf_counter()
            admit(request, cache, settings)
            t3 = time.perf_counter()
            cache.put_node(name, original[name])
            admit(request, cache, settings)
            puts.append(t1 - t0)
            firsts.append(t2 - t1)
            seconds.append(t3 - t2)
        return {
            "event_ms": statistics.median(puts) * 1e3,
            "first_ms": statistics.median(firsts) * 1e3,
            "first_max_ms": max(firsts) * 1e3,
            "next_ms": statistics.median(seconds) * 1e3,
        }

    def ingest_probe() -> dict[str, Any]:
        """CPU per status for statuses that change the node, then put back."""
        m = min(nodes, 2000)
        changed = list(fleet(nodes, shape, variant=1))[:m]
        original = list(fleet(nodes, shape))[:m]
        changed = [(n, _with(s, nvlinkBandwidthGBps=1)) for n, s in changed]
        t0 = time.process_time()
        for name, status in changed + original:
            cache.put_node(name, status)
        return {"ingest_us": (time.process_time() - t0) / (2 * m) * 1e6}

    def run_relist(items: list[tuple[str, Status]]) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        cache.replace_nodes(items)
        relist.update(done=True, wall_s=time.perf_counter() - t0, cpu_s=time.thread_time() - c0)

    async def bench_stats(request: web.Request) -> web.Response:
        return web.json_response(stats())

    async def bench_change(request: web.Request) -> web.Response:
        return web.json_response(change_probe())

    async def bench_ingest(request: web.Request) -> web.Response:
        return web.json_response(ingest_probe())

    async def bench_relist(request: web.Request) -> web.Response:
        if request.method == "POST":
            relist.clear()
            relist["done"] = False
            items = list(fleet(nodes, shape, variant=3))  # a relist after a gap: some changed
            threading.Thread(target=run_relist, args=(items,), daemon=True).start()
        return web.json_response(relist)

    app = make_app(cache, settings)
    app.router.add_get("/bench/cpu", _cpu)
    app.router.add_get("/bench/stats", bench_stats)
    app.router.add_post("/bench/change", bench_change)
    app.router.add_post("/bench/ingest", bench_ingest)
    app.router.add_route("*", "/bench/relist", bench_relist)
    asyncio.run(_serve(app, port, cert, key, ready, bare=False))

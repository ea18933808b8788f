#!/usr/bin/env python3
"""One admission review of a group member, three ways: as kube-apiserver times it, inside serve's
handler, and on serve's sockets; with how busy the machine was during the burst.

    .venv/bin/python bench/review_latency.py [--rounds 2] [--pods 64] [--concurrency 8]
                                             [--other PATH/.venv/bin/gpufabric-webhook]

One Kubernetes 1.36.2 control plane (tests/e2e's harness, no kubelet), 64 8-GPU nodes in 8 leaves,
`gpufabric-webhook serve --labeler --placer` as the webhook's ServiceAccount. Each round creates 4
members (so the API server holds warm connections), then `--pods` members of gangs of 8, each gang
on its own thread, `--concurrency` gangs at a time, and prints the mean of
apiserver_admission_webhook_admission_duration_seconds (the API server's webhook call: the request
built, sent, answered, the patch applied), serve's gpufabric_webhook_admission_duration_seconds
(the handler), "wire": serve's own time from the first TLS bytes of a request read off the socket
to the response's TLS bytes handed to the socket (measured by wrapping asyncio's SSLProtocol in
the served process, see `probe`), and the machine's CPU while the burst ran. `--other`: rounds of
another build's program interleaved (a before/after).

Quiet machine (2 cores), 64 members, 8 gangs at a time, 2-4 rounds, ms per review:
API server 5.7-13.9 (mean), handler 0.24-0.37, wire mean 0.6-1.45 (median 0.46-0.59); both cores
97-100 % busy for the whole burst (kube-apiserver ~half of it, serve about a fifth). One at a time:
API server 2.0-2.5 on quiet rounds, handler 0.26-0.32. So the API server's number is mostly its own
work and the wait for a core on a saturated machine, not serve: no connection churn (8 kept, cold
and warm bursts alike), no Nagle stall (asyncio sets TCP_NODELAY; aiohttp writes head and body in
one TLS write), the GIL switch interval (5 ms vs 0.5 ms) and the placer (off) did not move it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bind_bench
import realcluster
from kubernetes import client

from tests.e2e import webhook as serve
from tests.e2e.install import Serving

WIRE = "review-wire-ms"  # the line prefix the probe writes to serve's log
HERE = Path(__file__).resolve().parent


def probe() -> None:
    """In the served process: log each request's socket-to-socket time (see the module doc)."""
    import asyncio.sslproto as sp

    began: dict[int, float] = {}
    read, write = sp.SSLProtocol.buffer_updated, sp.SSLProtocol._write_appdata

    def buffer_updated(self: sp.SSLProtocol, nbytes: int) -> None:
        began.setdefault(id(self), time.perf_counter())
        read(self, nbytes)

    def write_appdata(self: sp.SSLProtocol, data: list[bytes]) -> None:
        write(self, data)
        start = began.pop(id(self), None)
        if start is not None:
            print(f"{WIRE} {(time.perf_counter() - start) * 1e3:.3f}", file=sys.stderr, flush=True)

    sp.SSLProtocol.buffer_updated = buffer_updated  # type: ignore[method-assign]
    sp.SSLProtocol._write_appdata = write_appdata  # type: ignore[method-assign]


def wrapper(program: Path, where: Path) -> Path:
    """A program that runs `program`'s build (its venv's python) with the probe in."""
    python = program.parent / "python"
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import review_latency; "
        f"review_latency.{probe.__name__}(); sys.argv[0] = 'gpufabric-webhook'; "
        "from webhook.__main__ import main; sys.exit(main())"
    )
    out = where / f"probed-{abs(hash(program))}"
    out.write_text(f'#!/bin/sh\nexec {python} -c "{code}" "$@"\n')
    out.chmod(0o755)
    return out


def busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def burst(core: client.CoreV1Api, ns: str, tag: str, pods: int, concurrency: int) -> None:
    def gang(g: int) -> None:
        for i in range(8):
            body = bind_bench.pod_body(f"{tag}{g}-{i}", f"{tag}{g}", 8, "leaf", False)
            core.create_namespaced_pod(ns, body)

    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(gang, range(pods // 8)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--pods", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--other", type=Path, help="another build's gpufabric-webhook, interleaved")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="review-latency-", dir="/tmp"))
    this = Path(sys.executable).parent / "gpufabric-webhook"
    builds = {"this": wrapper(this, work)}
    if args.other is not None:
        builds["other"] = wrapper(args.other.resolve(), work)
    plane = realcluster.up(False, builds["this"], nodes=64, leaves=8)
    api = plane.cluster.client()
    core = client.CoreV1Api(api)
    hook = plane.webhook
    try:
        for r in range(args.rounds):
            for name, program in builds.items():
                if len(builds) > 1 or r:
                    hook = restart(plane, hook, program)
                ns = f"latency-{r}-{name}"
                core.create_namespace({"metadata": {"name": ns}})
                burst(core, ns, "w", 8, 1)  # warm: the API server's connections to serve
                time.sleep(1)
                api0, own0 = sums(api, hook.metrics_port)
                hook.mark()
                m0, w0 = busy(), time.perf_counter()
                burst(core, ns, "g", args.pods, args.concurrency)
                m1, wall = busy(), time.perf_counter() - w0
                time.sleep(0.5)
                api1, own1 = sums(api, hook.metrics_port)
                log = hook.log_since_mark(10**7).splitlines()
                wire = [float(x.split()[1]) for x in log if x.startswith(WIRE)] or [float("nan")]
                n = max(1.0, api1[1] - api0[1])
                print(
                    f"{name} round {r + 1}: API server {(api1[0] - api0[0]) / n * 1e3:.2f} ms, "
                    f"handler {(own1[0] - own0[0]) / max(1.0, own1[1] - own0[1]) * 1e3:.2f} ms, "
                    f"wire mean {statistics.mean(wire):.2f} median {statistics.median(wire):.2f}"
                    f" ms ({n:.0f} reviews); burst {wall:.2f} s, machine "
                    f"{(m1[0] - m0[0]) / max(1, m1[1] - m0[1]) * 100:.0f} % busy",
                    flush=True,
                )
                core.delete_namespace(ns)
    finally:
        realcluster.down(realcluster.Installed(plane.cluster, hook, plane.workdir))
        shutil.rmtree(work, ignore_errors=True)


def restart(plane: realcluster.Installed, hook: serve.Webhook, program: Path) -> serve.Webhook:
    """serve again from `program`, on the port and certificate files installed (env.installed)."""
    serve.stop(hook)
    w = plane.workdir
    serving = Serving(w / "tls.crt", w / "tls.key", b"")  # the CA is only the installer's
    return serve.start(plane.cluster, serving, w, port=hook.port, program=program)


def sums(api: client.ApiClient, port: int) -> tuple[tuple[float, float], tuple[float, float]]:
    method, url, headers, body, _ = api.param_serialize(
        "GET", "/metrics", auth_settings=["BearerToken"]
    )
    text = api.call_api(method, url, headers, body).read().decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        own = r.read().decode()
    return (
        bind_bench.metric_sums(
            text, "apiserver_admission_webhook_admission_duration_seconds", 'name="pods.'
        ),
        bind_bench.metric_sums(own, "gpufabric_webhook_admission_duration_seconds"),
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

"""`gpufabric-webhook serve`: flags checked, certificates waited for, the TLS server started, and
the watches and leader-elected workers that webhook/wiring.py assembles.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import threading
from typing import Any

from aiohttp import web

from common import api
from common.cli import UsageError
from webhook.admission import cufile
from webhook.admission.placement import Settings
from webhook.fleet.cache import FabricCache
from webhook.groups.admission.spines import SpineSizes, most_gpus_in
from webhook.groups.extensions.gang.podgroups import Book as PodGroups
from webhook.groups.extensions.imex.domains import Book
from webhook.groups.extensions.imex.inject import ImexState
from webhook.groups.extensions.imex.nodes import DomainSizes
from webhook.kube.watch import ListWatch
from webhook.server import tlsfiles
from webhook.server.app import (
    WAITING_KEY,
    WATCHES_KEY,
    CertReloader,
    make_app,
    runner_for,
    start_https,
    tls_context,
)
from webhook.server.connections import Limits
from webhook.server.metrics import WebhookMetrics
from webhook.wiring import (
    Serving,
    add_cache_watches,
    add_export,
    add_gang_watch,
    add_imex_watch,
    add_labeler,
    add_network,
    add_placer,
    add_spine_watch,
    start,
)

log = logging.getLogger("webhook")


def _cufile_policy(api_client: Any, name: str) -> str:
    """The cluster cuFile policy from ConfigMap `name` in the webhook's own namespace."""
    from webhook.kube.client import ApiError, read_configmap

    own = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)
    try:
        return cufile.from_configmap(read_configmap(api_client, own, name), own, name)
    except (ApiError, cufile.PolicyError) as err:
        raise UsageError(str(err)) from None


def export_targets(args: argparse.Namespace) -> tuple[str, ...]:
    """`--export kueue,kai,volcano` (repeatable); UsageError for an unknown target or a missing
    --labeler (the exports are the labeler's fabric, under its Lease)."""
    from webhook.export.kinds import parse_targets

    try:
        targets = parse_targets(getattr(args, "export", None))
    except ValueError as err:
        raise UsageError(str(err)) from None
    if targets and not args.labeler:
        raise UsageError("--export needs --labeler: the exports are the labeler's fabric")
    return targets


def admission_settings(
    args: argparse.Namespace,
    policy: str | None,
    cache: FabricCache,
    spines: SpineSizes,
    imex: ImexState | None = None,
    gangs: PodGroups | None = None,
) -> Settings:
    return Settings(
        policy,
        args.inject_nccl_tuning,
        not args.no_nccl_ib_hca,
        largest_spine_gpus=lambda: spines.largest(most_gpus_in(cache)),
        # Without a placer in this process's deployment nothing lifts a group gate: do not set it
        placer=bool(getattr(args, "placer", False)),
        native_gang=(lambda: gangs.served) if gangs is not None else None,
        imex=imex,
    )


def check_ports(args: argparse.Namespace) -> None:
    """--port 0..65535 (0: any free port), --metrics-port 0..65535 (0: no metrics endpoint)."""
    for flag, port in (("--port", args.port), ("--metrics-port", args.metrics_port)):
        if not 0 <= port <= 65535:
            raise UsageError(f"{flag} {port}: not a TCP port (0-65535)")


async def serve(args: argparse.Namespace) -> int:
    from common.kube import load_api_client

    targets = export_targets(args)
    cache, metrics = FabricCache(), WebhookMetrics()
    policy = None
    if args.cufile_configmap:  # read once at start: a changed policy needs a rollout restart
        policy = _cufile_policy(load_api_client(args.kubeconfig), args.cufile_configmap)
    spines, sizes = SpineSizes(), DomainSizes()
    imex = ImexState(Book(), sizes.largest)  # kept current by add_imex_watch
    gangs = PodGroups()  # whether PodGroups are served: kept current by add_gang_watch
    settings = admission_settings(args, policy, cache, spines, imex, gangs)
    # Ports and certificates first: a wrong value, a bad file or a taken port ends the command
    # (one line, exit 2) before any watch thread exists. Certificate files that do not exist yet
    # (first install: the bootstrap Job has not run) are waited for, not ready meanwhile.
    check_ports(args)
    files = (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key))
    for flag, path in files:
        if (wrong := tlsfiles.problem(flag, path)) is not None:
            raise UsageError(wrong)
    limits = Limits(args.max_connections, args.idle_timeout)
    app = make_app(cache, settings, metrics, limits)
    watches: list[ListWatch] = []  # filled below; /readyz reports the failing ones
    app[WATCHES_KEY] = watches
    app[WAITING_KEY] = [f"{f}: no certificate secret yet" for f in tlsfiles.missing(files)]
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    runner = runner_for(app)
    await runner.setup()
    what = f"--metrics-port {args.metrics_port}"
    try:
        if args.metrics_port:  # 0: no metrics endpoint (and no /healthz, /readyz)
            await web.TCPSite(runner, "0.0.0.0", args.metrics_port).start()  # noqa: S104
        if not await tlsfiles.wait_for(files, done):
            await runner.cleanup()
            return 0
        ctx = tls_context(args.tls_cert, args.tls_key)
        app[WAITING_KEY].clear()
        reloader = CertReloader(ctx, args.tls_cert, args.tls_key)
        what = f"--port {args.port}"
        await start_https(runner, "0.0.0.0", args.port, ctx)  # noqa: S104
        api_client = load_api_client(args.kubeconfig)
    except OSError as err:
        await runner.cleanup()
        raise UsageError(f"cannot listen on {what}: {err.strerror or err}") from None
    except BaseException:
        await runner.cleanup()
        raise

    # urllib3 logs each connection retry at WARNING (3 lines a request during an outage); the
    # watches and electors say once that the API server is unreachable, and when it is back.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    s = Serving(args, api_client, cache, metrics, watches=watches)
    add_cache_watches(s)
    add_spine_watch(s, spines)
    add_imex_watch(s, imex, sizes)
    add_gang_watch(s, gangs)
    if args.labeler:
        add_labeler(s)
        add_network(s)
        if targets:
            add_export(s, targets)

    if getattr(args, "placer", False):
        add_placer(s)

    stop = threading.Event()
    electors = start(s, stop)
    reload_task = asyncio.create_task(reloader.watch(args.cert_reload_interval))
    log.info(
        "webhook serving",
        extra={
            "port": args.port,
            "metrics_port": args.metrics_port,
            "leases": sorted(s.elected),
        },
    )
    await done.wait()
    stop.set()
    # Each elector stops its work and hands its Lease back, so a peer takes over at once.
    for t in electors:
        await asyncio.to_thread(t.join, 10)
    reload_task.cancel()
    await runner.cleanup()
    return 0

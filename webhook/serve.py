"""`gpufabric-webhook serve`: watches, the leader-elected labeler, the TLS admission server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import threading
from typing import Any

from aiohttp import web

from common import api
from common.cli import UsageError
from webhook import cufile
from webhook.cache import FabricCache
from webhook.connections import Limits
from webhook.metrics import WebhookMetrics
from webhook.placement import Settings
from webhook.server import CertReloader, make_app, runner_for, start_https, tls_context

log = logging.getLogger("webhook")


def _cufile_policy(api_client: Any, name: str) -> str:
    """The cluster cuFile policy from ConfigMap `name` in the webhook's own namespace."""
    from webhook.kube import ApiError, read_configmap

    own = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)
    try:
        return cufile.from_configmap(read_configmap(api_client, own, name), own, name)
    except (ApiError, cufile.PolicyError) as err:
        raise UsageError(str(err)) from None


async def serve(args: argparse.Namespace) -> int:
    from common.kube import load_api_client
    from webhook.kube import KubeNodeApi, custom_list_watch, run_leader_elected
    from webhook.labeler import Labeler
    from webhook.watch import ListWatch

    cache = FabricCache()
    metrics = WebhookMetrics()
    policy = None
    if args.cufile_configmap:  # read once at start: a changed policy needs a rollout restart
        policy = _cufile_policy(load_api_client(args.kubeconfig), args.cufile_configmap)
    settings = Settings(policy, args.inject_nccl_tuning, not args.no_nccl_ib_hca)
    # Certificates and ports first: a bad file or a taken port ends the command (one line, exit 2)
    # before any watch thread exists.
    ctx = tls_context(args.tls_cert, args.tls_key)
    reloader = CertReloader(ctx, args.tls_cert, args.tls_key)
    limits = Limits(args.max_connections, args.idle_timeout)
    app = make_app(cache, settings, metrics, limits)
    runner = runner_for(app)
    await runner.setup()
    what = f"--port {args.port}"
    try:
        await start_https(runner, "0.0.0.0", args.port, ctx)  # noqa: S104
        what = f"--metrics-port {args.metrics_port}"
        await web.TCPSite(runner, "0.0.0.0", args.metrics_port).start()  # noqa: S104
        api_client = load_api_client(args.kubeconfig)
    except OSError as err:
        await runner.cleanup()
        raise UsageError(f"cannot listen on {what}: {err.strerror or err}") from None
    except BaseException:
        await runner.cleanup()
        raise
    stop = threading.Event()

    def name_of(obj: Any) -> str:
        return str(obj["metadata"]["name"])

    def on_status_event(kind: str, obj: Any) -> None:
        if kind == "DELETED":
            cache.delete_node(name_of(obj))
        else:
            cache.put_node(name_of(obj), obj.get("status"))

    def on_claim_event(kind: str, obj: Any) -> None:
        ns = str(obj["metadata"].get("namespace", "default"))
        if kind == "DELETED":
            cache.delete_claim(ns, name_of(obj))
        else:
            cache.put_claim(ns, name_of(obj), obj.get("spec") or {})

    watches = [
        ListWatch(
            "gpunodestatuses",
            *custom_list_watch(api_client, api.NODE_STATUS_PLURAL),
            on_list=lambda items: cache.replace_nodes((name_of(o), o.get("status")) for o in items),
            on_event=on_status_event,
        ),
        ListWatch(
            "gpuclaims",
            *custom_list_watch(api_client, api.CLAIM_PLURAL),
            on_list=lambda items: cache.replace_claims(
                (str(o["metadata"].get("namespace", "default")), name_of(o), o.get("spec") or {})
                for o in items
            ),
            on_event=on_claim_event,
        ),
    ]
    for w in watches:
        threading.Thread(target=w.run, args=(stop,), name=w.name, daemon=True).start()

    if args.labeler:
        namespace = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)
        identity = os.environ.get("POD_NAME") or socket.gethostname()
        labeler = Labeler(KubeNodeApi(api_client))
        leading = threading.Event()

        def lead() -> None:
            lead_stop = threading.Event()

            def relabel_all(items: list[Any]) -> None:
                for o in items:
                    metrics.labeler_applies.labels(
                        outcome=labeler.sync(name_of(o), o.get("status"))
                    ).inc()

            def on_event(kind: str, obj: Any) -> None:
                metrics.labeler_applies.labels(
                    outcome=labeler.handle({"type": kind, "object": obj})
                ).inc()

            lw = ListWatch(
                "labeler",
                *custom_list_watch(api_client, api.NODE_STATUS_PLURAL),
                on_list=relabel_all,
                on_event=on_event,
            )
            threading.Thread(target=lw.run, args=(lead_stop,), daemon=True).start()
            while leading.is_set() and not stop.is_set():
                stop.wait(1)
            lead_stop.set()

        def on_change(is_leader: bool) -> None:
            (leading.set if is_leader else leading.clear)()
            metrics.labeler_leader.set(1 if is_leader else 0)
            log.info("labeler leadership", extra={"leader": is_leader, "identity": identity})

        threading.Thread(
            target=run_leader_elected,
            args=(api_client, namespace, identity, lead, on_change, stop),
            name="leader-election",
            daemon=True,
        ).start()

    if getattr(args, "placer", False):
        start_placer(api_client, metrics, stop)

    reload_task = asyncio.create_task(reloader.watch(args.cert_reload_interval))
    log.info(
        "webhook serving",
        extra={"port": args.port, "metrics_port": args.metrics_port, "labeler": args.labeler},
    )
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    stop.set()
    reload_task.cancel()
    await runner.cleanup()
    return 0


def start_placer(api_client: Any, metrics: WebhookMetrics, stop: threading.Event) -> None:
    """The group placer beside the labeler: its own Lease, one copy of the work cluster-wide."""
    from webhook.groups.gauges import gauges_every
    from webhook.groups.kube import run_placer
    from webhook.groups.names import PLACER_LEASE
    from webhook.kube import run_leader_elected

    namespace = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    leading = threading.Event()

    def lead() -> None:
        lead_stop = threading.Event()
        worker = threading.Thread(
            target=run_placer,
            args=(api_client, lead_stop, metrics, gauges_every(metrics, 5.0)),
            name="placer",
            daemon=True,
        )
        worker.start()
        while leading.is_set() and not stop.is_set():
            stop.wait(1)
        lead_stop.set()  # before the Lease can pass to another replica (renew deadline < lease)
        worker.join(timeout=5)

    def on_change(is_leader: bool) -> None:
        (leading.set if is_leader else leading.clear)()
        metrics.placer_leader.set(1 if is_leader else 0)
        log.info("placer leadership", extra={"leader": is_leader, "identity": identity})

    threading.Thread(
        target=run_leader_elected,
        args=(api_client, namespace, identity, lead, on_change, stop, PLACER_LEASE),
        name="placer-election",
        daemon=True,
    ).start()

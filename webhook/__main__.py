"""gpufabric-webhook: serve admission over TLS (with the labeler), or mutate/explain offline."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from common import api, logs
from common.logs import configure
from webhook.admission import admit
from webhook.cache import FabricCache
from webhook.explain import explain
from webhook.metrics import WebhookMetrics
from webhook.placement import Settings
from webhook.requirements import Invalid, requirements
from webhook.server import CertReloader, make_app, tls_context

log = logging.getLogger("webhook")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufabric-webhook",
        description="Mutating admission webhook that turns a pod's gpufabric.io requests into node "
        "affinity, NCCL_IB_HCA and cuFile settings; optionally the node labeler.",
    )
    logs.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="serve /mutate over TLS")
    serve.add_argument("--port", type=int, default=8443)
    serve.add_argument("--tls-cert", required=True, type=Path, metavar="FILE")
    serve.add_argument("--tls-key", required=True, type=Path, metavar="FILE")
    serve.add_argument(
        "--labeler",
        action="store_true",
        help="also run the leader-elected labeler (Lease in $POD_NAMESPACE)",
    )
    serve.add_argument(
        "--cufile-configmap",
        metavar="NAME",
        help="ConfigMap with cufile.json to mount into pods that ask for cuFile",
    )
    serve.add_argument(
        "--inject-nccl-tuning",
        action="store_true",
        help="also set NCCL_NET_GDR_LEVEL (an NCCL debugging knob; opt-in)",
    )
    serve.add_argument(
        "--no-nccl-ib-hca",
        action="store_true",
        help="place RDMA pods by affinity only; do not inject NCCL_IB_HCA",
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        default=9401,
        help="plain-HTTP port for /metrics, /healthz, /readyz",
    )
    serve.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), metavar="FILE")
    serve.add_argument("--cert-reload-interval", type=float, default=10.0, metavar="SECONDS")

    for name, text in (
        ("mutate", "print the JSONPatch and the patched pod"),
        ("explain", "say, node by node, which requirement each node meets"),
    ):
        p = sub.add_parser(name, help=text, description=f"Offline: {text} (no cluster needed).")
        p.add_argument("--pod", required=True, type=Path, metavar="FILE", help="pod YAML or JSON")
        p.add_argument(
            "--status",
            required=True,
            nargs="+",
            type=Path,
            metavar="FILE_OR_DIR",
            help="GpuNodeStatus YAML/JSON files (e.g. `gpufabric-agent probe -o yaml`)",
        )
        p.add_argument(
            "--claim", nargs="*", type=Path, default=[], metavar="FILE", help="GpuClaim YAML files"
        )
        p.add_argument("--namespace", default=None, help="pod namespace (default: the pod's own)")
        p.add_argument("--cufile-configmap", metavar="NAME")
        p.add_argument("--inject-nccl-tuning", action="store_true")
    return parser


def _documents(path: Path) -> list[dict[str, Any]]:
    files = (
        sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
        if path.is_dir()
        else [path]
    )
    docs: list[dict[str, Any]] = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind", "").endswith("List"):
                docs += [d for d in doc.get("items") or [] if isinstance(d, dict)]
            elif isinstance(doc, dict):
                docs.append(doc)
    return docs


def offline_cache(status_paths: list[Path], claim_paths: list[Path]) -> FabricCache:
    cache = FabricCache()
    statuses = []
    for path in status_paths:
        for doc in _documents(path):
            if doc.get("kind") == api.NODE_STATUS_KIND:
                statuses.append((str(doc["metadata"]["name"]), doc.get("status")))
    cache.replace_nodes(statuses)
    cache.replace_claims(
        (
            str(d["metadata"].get("namespace", "default")),
            str(d["metadata"]["name"]),
            d.get("spec") or {},
        )
        for path in claim_paths
        for d in _documents(path)
        if d.get("kind") == api.CLAIM_KIND
    )
    return cache


def cmd_offline(args: argparse.Namespace) -> int:
    pod = yaml.safe_load(args.pod.read_text())
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
        print(f"gpufabric-webhook: {args.pod} is not a Pod", file=sys.stderr)
        return 2
    cache = offline_cache(args.status, args.claim)
    if not cache.nodes:
        print("gpufabric-webhook: no GpuNodeStatus found in --status", file=sys.stderr)
        return 2
    namespace = args.namespace or (pod.get("metadata") or {}).get("namespace") or "default"
    settings = Settings(args.cufile_configmap, args.inject_nccl_tuning)
    if args.command == "explain":
        try:
            req = requirements(pod, namespace, cache.claim)
        except Invalid as err:
            print(f"denied: {err}")
            return 1
        sys.stdout.write(explain(pod, req, cache))
        return 0
    request = {
        "uid": "offline",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": namespace,
        "object": pod,
    }
    answer = admit(request, cache, settings)  # type: ignore[arg-type]
    resp = answer.response
    if not resp.get("allowed"):
        print(f"denied: {resp.get('status', {}).get('message')}")
        return 1
    import base64

    patch = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
    for w in resp.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    import jsonpatch

    patched = jsonpatch.apply_patch(pod, patch)
    print("# JSONPatch")
    print(json.dumps(patch, indent=2))
    print("# patched pod")
    print(yaml.safe_dump(patched, sort_keys=False), end="")
    return 0


async def serve(args: argparse.Namespace) -> int:
    from common.kube import load_api_client
    from webhook.kube import KubeNodeApi, custom_list_watch, run_leader_elected
    from webhook.labeler import Labeler
    from webhook.watch import ListWatch

    cache = FabricCache()
    metrics = WebhookMetrics()
    settings = Settings(args.cufile_configmap, args.inject_nccl_tuning, not args.no_nccl_ib_hca)
    api_client = load_api_client(args.kubeconfig)
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

    ctx = tls_context(args.tls_cert, args.tls_key)
    reloader = CertReloader(ctx, args.tls_cert, args.tls_key)
    app = make_app(cache, settings, metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", args.port, ssl_context=ctx).start()  # noqa: S104
    await web.TCPSite(runner, "0.0.0.0", args.metrics_port).start()  # noqa: S104
    reload_task = asyncio.create_task(reloader.watch(args.cert_reload_interval))
    log.info(
        "webhook serving",
        extra={"port": args.port, "metrics_port": args.metrics_port, "labeler": args.labeler},
    )
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    stop.set()
    reload_task.cancel()
    await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_level, args.log_json)
    try:
        if args.command == "serve":
            return asyncio.run(serve(args))
        return cmd_offline(args)
    except (OSError, yaml.YAMLError) as err:
        print(f"gpufabric-webhook: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

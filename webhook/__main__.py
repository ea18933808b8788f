"""gpufabric-webhook: serve admission over TLS (with the labeler), or mutate/explain offline."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import yaml

from common import cli, logs
from common.logs import configure
from webhook.cli import topology

PROG = "gpufabric-webhook"


def _offline_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pod",
        required=True,
        metavar="FILE",
        help="the pod, YAML or JSON; - reads it from standard input",
    )
    p.add_argument(
        "--status",
        required=True,
        nargs="+",
        type=Path,
        metavar="FILE_OR_DIR",
        help="GpuNodeStatus YAML/JSON files or directories (`gpufabric-agent probe -o yaml`, "
        "`kubectl get gpunodestatuses -o yaml`); Node objects found there (`kubectl get nodes "
        "-o yaml`) give the node labels the pod's own affinity is checked against; Pods there "
        "(`kubectl get pods -A -o yaml`): the bound ones hold GPUs in the group section (and may "
        "be preempted), gated group members are the waiting groups",
    )
    p.add_argument(
        "--claim",
        nargs="*",
        type=Path,
        default=[],
        metavar="FILE",
        help="GpuClaim YAML/JSON files (default: none)",
    )
    p.add_argument(
        "--namespace",
        default=None,
        help="the pod's namespace (default: the pod's metadata.namespace, else default)",
    )
    p.add_argument(
        "--cufile-policy",
        type=Path,
        metavar="FILE",
        default=None,
        help="a cufile.json to inject as serve --cufile-configmap would (default: none)",
    )
    p.add_argument(
        "--inject-nccl-tuning",
        action="store_true",
        help="also set NCCL_NET_GDR_LEVEL (default: off)",
    )
    logs.add_arguments(p, repeat=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Mutating admission webhook that turns a pod's gpufabric.io requests into node "
        "affinity, NCCL_IB_HCA and cuFile settings; optionally the node labeler.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {cli.version()}")
    logs.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="serve /mutate over TLS", description="Serve /mutate over TLS."
    )
    serve.add_argument("--port", type=int, default=8443, help="HTTPS port (default: 8443)")
    serve.add_argument(
        "--tls-cert",
        required=True,
        type=Path,
        metavar="FILE",
        help="serving certificate (PEM); while it or the key does not exist yet, serve waits for "
        "it, not ready",
    )
    serve.add_argument(
        "--tls-key", required=True, type=Path, metavar="FILE", help="its private key (PEM)"
    )
    serve.add_argument(
        "--labeler",
        action="store_true",
        help="also run the leader-elected labeler, Lease in $POD_NAMESPACE (default: off)",
    )
    serve.add_argument(
        "--placer",
        action="store_true",
        help="also run the leader-elected group placer, Lease gpufabric-placer in $POD_NAMESPACE; "
        "without it, grouped pods are admitted ungated with a warning (default: off; the "
        "manifests turn it on)",
    )
    serve.add_argument(
        "--topology-labels",
        metavar="PRESET|KEYS",
        help="labeler: network position from existing node labels (aws, gke, oci, topograph, "
        "coreweave, or KEY,KEY,... top level first) when ConfigMap gpufabric-topology is absent",
    )
    serve.add_argument(
        "--export",
        action="append",
        metavar="KUEUE,KAI,VOLCANO",
        help="with --labeler: keep these schedulers' topology objects equal to the fabric "
        "(comma list, repeatable: kueue, kai, volcano; default: none)",
    )
    serve.add_argument(
        "--cufile-configmap",
        metavar="NAME",
        default=None,
        help="ConfigMap (in $POD_NAMESPACE, key cufile.json) whose cuFile policy is injected "
        "into pods that ask for cuFile, in any namespace; read at start (default: none)",
    )
    serve.add_argument(
        "--inject-nccl-tuning",
        action="store_true",
        help="also set NCCL_NET_GDR_LEVEL, an NCCL debugging knob (default: off)",
    )
    serve.add_argument(
        "--no-nccl-ib-hca",
        action="store_true",
        help="place RDMA pods by affinity only; do not inject NCCL_IB_HCA (default: inject)",
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        default=9401,
        help="plain-HTTP port for /metrics, /healthz, /readyz; 0: none of them (default: 9401)",
    )
    cli.add_kubeconfig(serve)
    serve.add_argument(
        "--cert-reload-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to check the certificate files for a renewal (default: 10)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=256,
        metavar="N",
        help="open HTTPS connections at most; the longest idle one makes room (default: 256)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="close a connection with no request in progress after this long; also the time a "
        "client has to send a request's headers (default: 30)",
    )
    logs.add_arguments(serve, repeat=True)

    mutate = sub.add_parser(
        "mutate",
        help="print the JSONPatch and the patched pod",
        description="Offline (no cluster needed): what the webhook would do to a pod. "
        "Exit code 1 when the pod would be denied.",
    )
    _offline_arguments(mutate)
    mutate.add_argument(
        "-o",
        "--output",
        choices=["text", "json", "yaml"],
        default="text",
        help="text: the patch and the pod for a person; json or yaml: one document "
        "{allowed, warnings, patch, pod} (or {allowed: false, message}) (default: text)",
    )
    explain = sub.add_parser(
        "explain",
        help="say, node by node, which requirement each node meets",
        description="Offline (no cluster needed): node by node, every requirement of the pod and "
        "whether the node meets it, with the value and the probe condition behind it.",
    )
    _offline_arguments(explain)
    explain.add_argument(
        "--node",
        metavar="NAME",
        default=None,
        help="show only this node: why it does or does not admit the pod (default: all nodes)",
    )
    topology.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_level, args.log_json)
    try:
        if args.command == "serve":
            from webhook.serve import serve

            return asyncio.run(serve(args))
        if args.command == "topology":
            return topology.cmd_topology(args)
        from webhook.cli.offline import cmd_offline

        return cmd_offline(args)
    except cli.UsageError as err:
        return cli.fail(PROG, str(err))
    except ModuleNotFoundError as err:
        return cli.fail(PROG, cli.missing_module(err))
    except BrokenPipeError:
        return cli.reader_left()
    except OSError as err:
        return cli.fail(PROG, cli.os_error(err))
    except yaml.YAMLError as err:  # a subcommand's own YAML input
        return cli.fail(PROG, f"not YAML: {logs.safe(err, 300)}")
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

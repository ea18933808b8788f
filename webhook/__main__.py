"""gpufabric-webhook: serve admission over TLS (with the labeler), or mutate/explain offline."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import yaml

from common import logs
from common.logs import configure
from webhook import topology


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
        "--placer",
        action="store_true",
        help="also run the leader-elected group placer (Lease gpufabric-placer in $POD_NAMESPACE)",
    )
    serve.add_argument(
        "--topology-labels",
        metavar="PRESET|KEYS",
        help="labeler: network position from existing node labels (aws, gke, oci, topograph, "
        "coreweave, or KEY,KEY,... top level first) when ConfigMap gpufabric-topology is absent",
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
        from webhook.offline import cmd_offline

        return cmd_offline(args)
    except (OSError, yaml.YAMLError) as err:
        print(f"gpufabric-webhook: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

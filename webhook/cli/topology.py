"""`gpufabric-webhook topology`: derive network positions offline from a topology source file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from common import api, logs
from webhook.cli.documents import documents, read_text
from webhook.fabric import join, render
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, SourceError
from webhook.fabric.nodelabels import from_labels
from webhook.fabric.source import derive


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "topology",
        help="show the fabric tree and the network labels each node would get",
        description="Offline: derive leaf / leaf-pair / leaf-quad / spine domains from "
        "ibnetdiscover output, a Slurm topology.conf or topology.yaml, a gpufabric nodes.yaml, "
        "or (with "
        "--topology-labels) the labels of Node objects (`kubectl get nodes -o yaml`).",
    )
    p.add_argument(
        "--source",
        required=True,
        type=Path,
        metavar="FILE",
        help="ibnetdiscover output, Slurm topology.conf/topology.yaml, nodes.yaml, or Node YAML",
    )
    p.add_argument(
        "--status",
        nargs="*",
        default=[],
        type=Path,
        metavar="FILE_OR_DIR",
        help="GpuNodeStatus YAML/JSON (joins an ibnetdiscover dump by HCA GUID), or a "
        "`GUID hostname` map file",
    )
    p.add_argument(
        "--topology-labels",
        metavar="PRESET|KEYS",
        help="read positions from existing node labels: aws, gke, oci, topograph, coreweave, "
        "or KEY,KEY,... (top level first); --source is then Node YAML/JSON",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "yaml", "labels"),
        default="table",
        help="table: the tree; yaml: the GpuFabric status; labels: one line per node "
        "(default: table)",
    )
    logs.add_arguments(p, repeat=True)


def _node_guids(paths: list[Path]) -> dict[str, frozenset[int]] | None:
    if not paths:
        return None
    nodes: dict[str, frozenset[int]] = {}
    for path in paths:
        if not path.is_dir() and join.looks_like_map(text := read_text(path)):
            nodes.update(join.parse_map(text))
            continue
        for doc in documents(path):
            if doc.get("kind") == api.NODE_STATUS_KIND:
                nodes[str(doc["metadata"]["name"])] = join.status_guids(doc.get("status"))
    return nodes


def _node_labels(path: Path) -> dict[str, dict[str, str]]:
    out = {}
    for doc in documents(path):
        if doc.get("kind") == "Node":
            meta = doc.get("metadata") or {}
            out[str(meta.get("name"))] = {
                str(k): str(v) for k, v in (meta.get("labels") or {}).items()
            }
    if not out:
        raise SourceError(
            f"{path}: no Node objects (with --topology-labels, --source is Node YAML/JSON)"
        )
    return out


def fabric_for(args: argparse.Namespace) -> Fabric:
    if args.topology_labels:
        return from_labels(args.topology_labels, _node_labels(args.source))
    return derive(read_text(args.source), args.source.name, _node_guids(args.status))


def cmd_topology(args: argparse.Namespace) -> int:
    try:
        fabric = fabric_for(args)
    except SourceError as err:
        print(f"gpufabric-webhook: {args.source}: {err}", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"gpufabric-webhook: {args.source}: not a text file", file=sys.stderr)
        return 2
    positions = Positions(fabric)
    if args.output == "labels":
        sys.stdout.write(render.label_lines(positions))
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(render.status(fabric, positions), sort_keys=False))
    else:
        sys.stdout.write(render.table(fabric, positions))
    return 0

"""`gpufabric-webhook topology`: derive network positions offline from a topology source file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from common import api, logs, nvlink
from common.cli import UsageError
from common.wire import WireError
from webhook.cli.documents import documents, objects, read_text
from webhook.cli.topology_parts import read_source, write_configmaps
from webhook.export import kueue, slurm, slurm_block
from webhook.export.kinds import KINDS
from webhook.export.model import Model, build
from webhook.fabric import render
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, SourceError
from webhook.fabric.nvdomains import nvlink_view
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive
from webhook.fabric.sources.nodelabels import from_labels
from webhook.fleet.ingest import layout_of

EXPORTS = ("kueue", "kai", "volcano", "slurm-tree", "slurm-block")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "topology",
        help="show the fabric tree and the network labels each node would get",
        description="Offline: derive leaf / leaf-pair / leaf-quad / spine domains from "
        "ibnetdiscover output, a Slurm topology.conf or topology.yaml, a gpufabric nodes.yaml, "
        "or (with "
        "--topology-labels) the labels of Node objects (`kubectl get nodes -o yaml`); with "
        "statuses or Node objects, also which NVLink domains sit in which leaf domain.",
    )
    p.add_argument(
        "--source",
        required=True,
        type=Path,
        metavar="FILE",
        help="ibnetdiscover output, Slurm topology.conf/topology.yaml, nodes.yaml, the ConfigMaps "
        "that hold one (a List as -o configmaps prints it), or Node YAML",
    )
    p.add_argument(
        "--status",
        nargs="*",
        default=[],
        type=Path,
        metavar="FILE_OR_DIR",
        help="GpuNodeStatus YAML/JSON (joins an ibnetdiscover dump by HCA GUID; their GPUs give "
        "the NVLink domains), Node YAML/JSON (NVLink domains from their labels), or a "
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
        choices=("table", "yaml", "labels", "configmaps", *EXPORTS),
        default="table",
        help="table: the tree; yaml: the GpuFabric status; labels: one line per node; "
        "configmaps: the source as ConfigMap parts for the labeler (a List); kueue, "
        "kai, volcano: the scheduler's topology objects; slurm-tree, slurm-block: a Slurm "
        "topology.conf (default: table)",
    )
    p.add_argument(
        "--kueue-api",
        choices=kueue.VERSIONS,
        default=kueue.VERSIONS[0],
        help="with -o kueue: the Topology's API version; Kueue 0.9-0.13 serve only v1alpha1, "
        "0.14 only v1beta1, 0.15 and later v1beta2 (default: %(default)s)",
    )
    p.add_argument(
        "--slurm-version",
        choices=tuple(slurm_block.RELEASES),
        default=slurm_block.NEWEST,
        metavar="X.Y",
        help="with -o slurm-block: the slurmctld release that reads the file ("
        + ", ".join(slurm_block.RELEASES)
        + "; default: %(default)s); 25.05 and later get empty blocks that keep Slurm's "
        "aggregates on the fabric's domains, earlier releases only fabrics that need none",
    )
    p.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE),
        help="-o configmaps: the install namespace (default: $POD_NAMESPACE or "
        f"{api.DEFAULT_NAMESPACE})",
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
        for where, doc in objects(path):
            if doc.get("kind") == api.NODE_STATUS_KIND:
                name, status = _readable_status(where, doc)
                nodes[name] = join.status_guids(status)
    return nodes


def _readable_status(where: str, doc: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The status's node name and body; UsageError naming the file when explain's reader (or the
    HCA join's) cannot read it: joined anyway, a wrong shape would be a traceback or a node
    without HCAs."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: a GpuNodeStatus without metadata.name")
    status = doc.get("status")
    if status is None:
        status = {}
    try:
        if not isinstance(status, dict):
            raise WireError(f"status: expected an object, got {type(status).__name__}")
        layout_of(status)
        join.check_hcas(status)
    except (WireError, ValueError) as err:
        raise UsageError(f"{where}: {name}: unreadable GpuNodeStatus: {err}") from None
    return name, status


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


def _domains(args: argparse.Namespace) -> dict[str, nvlink.Domain]:
    """NVLink domains of the nodes in --status (and the Node YAML of --topology-labels): a
    status's GPUs, else the Node's nvidia.com/gpu.clique, else its gpufabric.io/nvlink-domain
    (`kubectl get nodes -o yaml` of a labelled cluster). The table, yaml and exports read it."""
    own: dict[str, nvlink.Domain] = {}
    labels: dict[str, dict[str, Any]] = {}
    for path in [*args.status, *([args.source] if args.topology_labels else [])]:
        if path.is_file() and join.looks_like_map(path.read_text()):
            continue
        for doc in documents(path):
            found = doc.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            name = str(meta.get("name"))
            if doc.get("kind") == api.NODE_STATUS_KIND:
                status = doc.get("status")
                own[name] = nvlink.status_domain(status if isinstance(status, dict) else None)
            elif doc.get("kind") == "Node" and isinstance(meta.get("labels"), dict):
                labels[name] = meta["labels"]
    domains = {}
    for name in own.keys() | labels.keys():
        mine = labels.get(name, {})
        d = nvlink.resolve(own.get(name, nvlink.NONE), mine.get(api.LABEL_GPU_CLIQUE))
        if d == nvlink.NONE and name not in own:
            d = nvlink.Domain(nvlink.from_clique_label(mine.get(api.LABEL_NVLINK_DOMAIN)))
        domains[name] = d
    return domains


def fabric_for(args: argparse.Namespace) -> Fabric:
    if args.topology_labels:
        return from_labels(args.topology_labels, _node_labels(args.source))
    text, name = read_source(args.source)
    return derive(text, name, _node_guids(args.status))


def cmd_topology(args: argparse.Namespace) -> int:
    try:
        if args.output == "configmaps":
            if args.topology_labels:
                raise SourceError("-o configmaps prints a topology source, not node labels")
            write_configmaps(args.source, args.namespace, sys.stdout)
            return 0
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
        return 0
    try:
        domains = _domains(args)
    except SourceError as err:
        print(f"gpufabric-webhook: {err}", file=sys.stderr)
        return 2
    if args.output in EXPORTS:
        values = {n: d.value for n, d in domains.items() if d.value is not None}
        try:
            model = build(positions, values)
            text = render_export(args.output, model, args.kueue_api, args.slurm_version)
        except slurm.BlockError as err:  # the fabric does not fit the form: input, as above
            print(f"gpufabric-webhook: {err}", file=sys.stderr)
            return 2
        sys.stdout.write(text)
        if args.output == "slurm-block" and (
            note := slurm_block.refusal_note(model, args.slurm_version)
        ):
            print(f"gpufabric-webhook: {note}", file=sys.stderr)  # a warning: the file stands
        return 0
    nv = nvlink_view(domains, positions)
    if args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(render.listing(fabric, positions, nv), sort_keys=False))
    else:
        sys.stdout.write(render.table(fabric, positions, nv))
    return 0


# libyaml's emitter when PyYAML has it: 4,096 HyperNode members print ~10x faster.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def render_export(
    output: str,
    model: Model,
    kueue_api: str = kueue.VERSIONS[0],
    slurm_version: str = slurm_block.NEWEST,
) -> str:
    """The export's text; slurm.BlockError where the block form cannot serve the fabric."""
    if output == "slurm-tree":
        return slurm.tree(model)
    if output == "slurm-block":
        return slurm.block(model, slurm_version)
    kind = KINDS[output]
    objects = kind.objects(model, kueue_api if output == "kueue" else kind.versions[0])
    return yaml.dump_all(objects, Dumper=_DUMPER, sort_keys=False) if objects else ""

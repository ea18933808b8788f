#!/usr/bin/env python3
"""Generate the CRDs in daemonset/base/crds/ from common.model (GpuNodeStatus) and the claim spec.

The GpuNodeStatus schema is derived from the dataclasses (crd_schema.py) so the two cannot
drift; a test checks the committed files equal this output.
Run: python hack/gen_crds.py [--check] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "daemonset" / "base" / "crds"
# The repository for common/, hack/ for crd_schema.py (also when a test loads this file).
sys.path[:0] = [str(ROOT), str(ROOT / "hack")]

import yaml  # noqa: E402
from crd_schema import crd, schema_for  # noqa: E402

from common import api  # noqa: E402
from common.model import Condition, NodeStatus  # noqa: E402


def node_status_crd() -> dict[str, Any]:
    status = whole_entries(schema_for(NodeStatus))
    status["description"] = "What the gpufabric agent saw on this node. Written by the agent only."
    return crd(
        api.NODE_STATUS_KIND,
        api.NODE_STATUS_PLURAL,
        "Cluster",
        ["gns"],
        {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "description": "Unused; the object exists for its status.",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
                "status": status,
            },
        },
        printer=[
            {"name": "GPUs", "type": "integer", "jsonPath": ".status.summary.gpuCount"},
            {"name": "NVLink", "type": "integer", "jsonPath": ".status.summary.nvlinkIslandSize"},
            {"name": "RDMA ports", "type": "integer", "jsonPath": ".status.summary.rdmaPorts"},
            {"name": "cuFile", "type": "string", "jsonPath": ".status.summary.cufile"},
            {"name": "Health", "type": "string", "jsonPath": ".status.summary.fabricHealth"},
        ],
        status_subresource=True,
    )


def whole_entries(status: dict[str, Any]) -> dict[str, Any]:
    """Mark each list entry and each section of the status atomic for server-side apply.

    The agent is the one writer and always applies whole entries, so per-leaf ownership buys
    nothing; recorded per leaf, managedFields doubled every status (~14 KB more per 8-GPU node,
    ~1 GB of etcd at 65,536 nodes). Atomic entries are one path each (`k:{"index":0}`), and the
    lists stay keyed: an entry the agent stops applying is still removed.
    """
    for prop in status["properties"].values():
        if prop["type"] == "object":
            prop["x-kubernetes-map-type"] = "atomic"
        elif prop.get("x-kubernetes-list-type") == "map":
            prop["items"]["x-kubernetes-map-type"] = "atomic"
    return status


def claim_crd() -> dict[str, Any]:
    spec = {
        "type": "object",
        "properties": {
            "topology": {
                "type": "object",
                "properties": {
                    "mode": {
                        "type": "string",
                        "enum": ["any", "same-socket", "nvlink"],
                        "default": "any",
                    },
                    "minBandwidthGBps": {"type": "integer", "minimum": 0},
                },
            },
            "network": {
                "type": "object",
                "properties": {
                    "rdmaRequired": {"type": "boolean"},
                    "minPorts": {"type": "integer", "minimum": 1},
                    "preferredHcas": {
                        "type": "array",
                        "x-kubernetes-list-type": "set",
                        "items": {"type": "string", "maxLength": 64},
                    },
                },
            },
            "storage": {
                "type": "object",
                "properties": {"cuFile": {"type": "string", "enum": ["Required", "Preferred"]}},
            },
        },
    }
    return crd(
        api.CLAIM_KIND,
        api.CLAIM_PLURAL,
        "Namespaced",
        ["gclaim"],
        {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec,
            },
        },
        printer=[
            {"name": "Topology", "type": "string", "jsonPath": ".spec.topology.mode"},
            {"name": "RDMA", "type": "boolean", "jsonPath": ".spec.network.rdmaRequired"},
            {"name": "cuFile", "type": "string", "jsonPath": ".spec.storage.cuFile"},
        ],
        status_subresource=False,
    )


def fabric_crd() -> dict[str, Any]:
    """GpuFabric: the derived cluster network (one object, `cluster`); written by the labeler."""
    strings = {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"}
    count = {"type": "integer", "minimum": 0}
    nvlink_domain = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "leaves": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "nodes": count},
                    "required": ["name"],
                },
            },
            "nodes": count,
        },
        "required": ["name"],
    }
    node_reason = {
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "properties": {"node": {"type": "string"}, "reason": {"type": "string"}},
            "required": ["node", "reason"],
        },
    }
    # Counts only: the object stays small at any size (`topology -o yaml` lists the nodes).
    spine = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            **dict.fromkeys(
                ("switches", "leaves", "pairs", "quads", "nodes", "nvlinkDomains"), count
            ),
        },
        "required": ["name"],
    }
    condition = schema_for(Condition)
    status = {
        "type": "object",
        "description": "The fabric the labeler derived from the topology source: totals, "
        "counts per spine domain, and the first problems, unplaced nodes and NVLink domains "
        "that span leaf domains (never one entry per node). Written by the labeler only.",
        "properties": {
            "source": {"type": "string"},
            "summary": {
                "type": "object",
                "properties": dict.fromkeys(
                    (
                        "spines",
                        "leaves",
                        "nodes",
                        "unplaced",
                        "problems",
                        "nvlinkDomains",
                        "nvlinkSpanning",
                        "nvlinkUnknown",
                    ),
                    count,
                ),
            },
            "tiers": {"type": "array", "items": count, "x-kubernetes-list-type": "atomic"},
            "spines": {"type": "array", "items": spine, "x-kubernetes-list-type": "atomic"},
            "unplaced": node_reason,
            "problems": strings,
            "nvlinkDomains": {
                "type": "array",
                "items": nvlink_domain,
                "x-kubernetes-list-type": "atomic",
            },
            "nvlinkUnknown": node_reason,
            "conditions": {
                "type": "array",
                "items": condition,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        },
    }
    valid = '.status.conditions[?(@.type=="SourceValid")]'
    return crd(
        "GpuFabric",
        "gpufabrics",
        "Cluster",
        ["gfab"],
        {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "status": status,
            },
        },
        printer=[
            {"name": "Source", "type": "string", "jsonPath": ".status.source"},
            {"name": "Valid", "type": "string", "jsonPath": f"{valid}.status"},
            {"name": "Spines", "type": "integer", "jsonPath": ".status.summary.spines"},
            {"name": "Leaves", "type": "integer", "jsonPath": ".status.summary.leaves"},
            {"name": "Nodes", "type": "integer", "jsonPath": ".status.summary.nodes"},
            {"name": "Unplaced", "type": "integer", "jsonPath": ".status.summary.unplaced"},
            {"name": "Problems", "type": "integer", "jsonPath": ".status.summary.problems"},
            {"name": "Message", "type": "string", "jsonPath": f"{valid}.message", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        status_subresource=True,
    )


def render() -> dict[str, str]:
    header = "# Generated by hack/gen_crds.py from common/model.py; do not edit by hand.\n"
    return {
        f"{api.NODE_STATUS_PLURAL}.yaml": header
        + yaml.safe_dump(node_status_crd(), sort_keys=False),
        f"{api.CLAIM_PLURAL}.yaml": header + yaml.safe_dump(claim_crd(), sort_keys=False),
        # JSON round trip: shared sub-schemas would otherwise be dumped as YAML anchors.
        "gpufabrics.yaml": header
        + yaml.safe_dump(json.loads(json.dumps(fabric_crd())), sort_keys=False),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hack/gen_crds.py",
        description="Write the GpuNodeStatus and GpuClaim CRDs, generated from common/model.py.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=CRD_DIR,
        metavar="DIR",
        help=f"directory to write the CRDs to (default: {CRD_DIR.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and name the files that differ from the generated ones",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out: Path = args.out
    if args.check:
        stale = [
            name
            for name, text in render().items()
            if not (out / name).is_file() or (out / name).read_text() != text
        ]
        for name in stale:
            print(f"{out / name} is stale: run hack/gen_crds.py", file=sys.stderr)
        return 1 if stale else 0
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in render().items():
            (out / name).write_text(text)
            print(f"wrote {out / name}")
    except OSError as err:
        print(f"gen_crds: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Offline commands: `mutate` and `explain` against status and claim files, no cluster needed."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from common import api
from common.cli import UsageError
from webhook.admission import cufile
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.admission.requirements import Invalid, requirements
from webhook.cli.documents import STDIN, objects, parse_documents, read_input, read_text
from webhook.cli.explain import NodeFacts, explain
from webhook.fleet.cache import FabricCache


def _name(where: str, doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: a {doc.get('kind')} without metadata.name")
    return name


def load_pod(path: str) -> dict[str, Any]:
    where = "standard input" if path == STDIN else path
    docs = [d for d in parse_documents(read_input(path), where) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("kind", "Pod") != "Pod":
        raise UsageError(f"{where} is not one Pod")
    return docs[0]


def offline_cache(
    status_paths: list[Path], claim_paths: list[Path]
) -> tuple[FabricCache, NodeFacts]:
    cache = FabricCache()
    facts = NodeFacts()
    statuses: list[tuple[str, Any]] = []
    for path in status_paths:
        for where, doc in objects(path):
            if doc.get("kind") == api.NODE_STATUS_KIND:
                name = _name(where, doc)
                status = doc.get("status")
                statuses.append((name, status if isinstance(status, dict) else None))
                facts.statuses[name] = status if isinstance(status, dict) and status else None
            elif doc.get("kind") == "Node" and doc.get("apiVersion", "v1") == "v1":
                labels = (
                    doc["metadata"].get("labels") if isinstance(doc.get("metadata"), dict) else None
                )
                facts.node_labels[_name(where, doc)] = {
                    str(k): str(v) for k, v in (labels if isinstance(labels, dict) else {}).items()
                }
    cache.replace_nodes(statuses)
    for name, labels in facts.node_labels.items():
        cache.set_node_labels(name, labels)
    claims = []
    for path in claim_paths:
        for where, doc in objects(path):
            if doc.get("kind") == api.CLAIM_KIND:
                name = _name(where, doc)  # metadata is a mapping from here on
                namespace = str(doc["metadata"].get("namespace", "default"))
                claims.append((namespace, name, doc.get("spec") or {}))
    cache.replace_claims(claims)
    return cache, facts


def cmd_offline(args: argparse.Namespace) -> int:
    pod = load_pod(args.pod)
    cache, facts = offline_cache(args.status, args.claim)
    if not cache.nodes and not facts.statuses and not facts.node_labels:
        raise UsageError("no GpuNodeStatus or Node found in --status")
    meta = pod.get("metadata")
    own_ns = meta.get("namespace") if isinstance(meta, dict) else None
    namespace = args.namespace or (own_ns if isinstance(own_ns, str) else None) or "default"
    if args.command == "explain":
        try:
            req = requirements(pod, namespace, cache.claim)
        except Invalid as err:
            print(f"denied: {err}")
            return 1
        if args.node and args.node not in facts.known():
            raise UsageError(f"--node {args.node}: no GpuNodeStatus or Node of that name")
        sys.stdout.write(explain(pod, req, cache, facts, only=args.node))
        return 0
    return _mutate(args, pod, namespace, cache)


def _mutate(args: argparse.Namespace, pod: dict[str, Any], namespace: str, cache: Any) -> int:
    policy = None
    if args.cufile_policy:
        try:
            policy = cufile.check(read_text(args.cufile_policy), str(args.cufile_policy))
        except cufile.PolicyError as err:
            raise UsageError(str(err)) from None
    settings = Settings(policy, args.inject_nccl_tuning)
    request = {
        "uid": "offline",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": namespace,
        "object": pod,
    }
    resp = admit(request, cache, settings).response  # type: ignore[arg-type]
    fmt = getattr(args, "output", "text")
    if not resp.get("allowed"):
        message = resp.get("status", {}).get("message", "")
        if fmt == "text":
            print(f"denied: {message}")
        else:
            _dump({"allowed": False, "message": message}, fmt)
        return 1
    patch = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
    warnings = list(resp.get("warnings", []))
    patched = jsonpatch.apply_patch(pod, patch)
    if fmt != "text":
        _dump({"allowed": True, "warnings": warnings, "patch": patch, "pod": patched}, fmt)
        return 0
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print("# JSONPatch")
    print(json.dumps(patch, indent=2))
    print("# patched pod")
    print(yaml.safe_dump(patched, sort_keys=False), end="")
    return 0


def _dump(doc: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(yaml.safe_dump(doc, sort_keys=False), end="")

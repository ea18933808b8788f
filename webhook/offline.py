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
from webhook.admission import admit
from webhook.cache import FabricCache
from webhook.explain import explain
from webhook.placement import Settings
from webhook.requirements import Invalid, requirements


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
    patch = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
    for w in resp.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    patched = jsonpatch.apply_patch(pod, patch)
    print("# JSONPatch")
    print(json.dumps(patch, indent=2))
    print("# patched pod")
    print(yaml.safe_dump(patched, sort_keys=False), end="")
    return 0

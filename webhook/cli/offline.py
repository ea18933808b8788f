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
from webhook.cli.templates import Template, templates
from webhook.fleet.cache import FabricCache


def _name(where: str, doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: a {doc.get('kind')} without metadata.name")
    return name


def load_workload(path: str) -> tuple[dict[str, Any], list[Template]]:
    """The one object in the file and its pod templates (a Pod is its own)."""
    where = "standard input" if path == STDIN else path
    docs = [d for d in parse_documents(read_input(path), where) if d is not None]
    found = templates(docs[0], where) if len(docs) == 1 else []
    if not found:
        raise UsageError(
            f"{where}: not one Pod or object with a pod template (Job, CronJob, Deployment, "
            "StatefulSet, DaemonSet, ReplicaSet, JobSet, PyTorchJob, MPIJob, LeaderWorkerSet, "
            "or a List of them)"
        )
    return docs[0], found


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
            elif doc.get("kind") == "Pod" and doc.get("apiVersion", "v1") == "v1":
                _name(where, doc)
                facts.pods.append(doc)  # bound ones hold GPUs; gated group members wait
            elif doc.get("kind") == "PodDisruptionBudget":
                _name(where, doc)
                facts.budgets.append(doc)  # what a group's preemption would consult
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
    doc, found = load_workload(args.pod)
    cache, facts = offline_cache(args.status, args.claim)
    if not cache.nodes and not facts.statuses and not facts.node_labels:
        raise UsageError("no GpuNodeStatus or Node found in --status")
    if args.command == "explain":
        if args.node and args.node not in facts.known():
            raise UsageError(f"--node {args.node}: no GpuNodeStatus or Node of that name")
        code = 0
        for t in found:
            if t.pointer or len(found) > 1:  # say which template, unless it is the Pod itself
                print(f"Pod template: {t.where}")
            try:
                req = requirements(t.pod, _namespace(args, t.pod), cache.claim)
            except Invalid as err:
                print(f"denied: {err}")
                code = 1
                continue
            sys.stdout.write(explain(t.pod, req, cache, facts, only=args.node))
        return code
    return _mutate(args, doc, found, cache)


def _namespace(args: argparse.Namespace, pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    own = meta.get("namespace") if isinstance(meta, dict) else None
    return str(args.namespace or (own if isinstance(own, str) else None) or "default")


def _mutate(
    args: argparse.Namespace, doc: dict[str, Any], found: list[Template], cache: Any
) -> int:
    policy = None
    if args.cufile_policy:
        try:
            policy = cufile.check(read_text(args.cufile_policy), str(args.cufile_policy))
        except cufile.PolicyError as err:
            raise UsageError(str(err)) from None
    settings = Settings(policy, args.inject_nccl_tuning)
    plain = len(found) == 1 and not found[0].pointer  # a Pod: the output as it always was
    patch: list[dict[str, Any]] = []
    warnings: list[str] = []
    denied: list[str] = []
    for t in found:
        request = {
            "uid": "offline",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": _namespace(args, t.pod),
            "object": t.pod,
        }
        resp = admit(request, cache, settings).response  # type: ignore[arg-type]
        said = "" if plain else f"{t.where}: "
        if not resp.get("allowed"):
            denied.append(said + resp.get("status", {}).get("message", ""))
            continue
        ops = json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []
        patch += _at(t, ops)
        warnings += [said + w for w in resp.get("warnings", [])]
    fmt = getattr(args, "output", "text")
    if denied:
        message = "; ".join(denied)
        if fmt == "text":
            print(f"denied: {message}")
        else:
            _dump({"allowed": False, "message": message}, fmt)
        return 1
    patched = jsonpatch.apply_patch(doc, patch)
    what = "pod" if plain else str(doc.get("kind", "object"))
    if fmt != "text":
        shape = {"pod": patched} if plain else {"templates": [t.where for t in found]}
        if not plain:
            shape["object"] = patched
        _dump({"allowed": True, "warnings": warnings, "patch": patch, **shape}, fmt)
        return 0
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    for t in found if not plain else []:
        print(f"# pod template: {t.where}")
    print("# JSONPatch")
    print(json.dumps(patch, indent=2))
    print(f"# patched {what}")
    print(yaml.safe_dump(patched, sort_keys=False), end="")
    return 0


def _at(t: Template, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A template's ops (against the Pod it creates) against the whole document: a template has
    the Pod's metadata and spec at the same relative paths (ops exist only for a template with
    annotations, so its metadata is there)."""
    return [{**op, "path": t.pointer + op["path"]} for op in ops] if t.pointer else ops


def _dump(doc: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(yaml.safe_dump(doc, sort_keys=False), end="")

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from common.labels import hca_profile
from webhook.fleet.cache import FabricCache

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SAMPLES = ROOT / "samples"
# The example cluster cuFile policy the cufile-policy component installs.
POLICY = (ROOT / "daemonset" / "components" / "cufile-policy" / "cufile.json").read_text()


def golden_statuses() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(GOLDEN.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        out.append((doc["metadata"]["name"], doc["status"]))
    return out


def golden_cache() -> FabricCache:
    cache = FabricCache()
    cache.replace_nodes(golden_statuses())
    claim = yaml.safe_load((SAMPLES / "claims" / "tp8-ib.yaml").read_text())
    cache.replace_claims([("team-a", "tp8-ib", claim["spec"])])
    return cache


def with_usable(status: dict[str, Any], usable: list[str]) -> dict[str, Any]:
    """A copy of `status` whose usable HCAs (and so rdma ports and hca-profile) are `usable`."""
    out = copy.deepcopy(status)
    out["summary"].update(usableHcas=usable, rdmaPorts=len(usable), hcaProfile=hca_profile(usable))
    return out


def pod(annotations: dict[str, str] | None = None, gpus: int = 8, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "annotations": dict(annotations or {})},
        "spec": {
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}},
                {"name": "side", "image": "y"},
            ],
            **copy.deepcopy(spec),
        },
    }


def review(
    obj: dict[str, Any], uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002"
) -> dict[str, Any]:
    """An AdmissionReview v1 as the API server sends it for a pod CREATE."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": obj["metadata"].get("name"),
            "namespace": obj["metadata"].get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (keys and list indexes), the document's own () first."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*prefix, i))
    return out


def put(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value

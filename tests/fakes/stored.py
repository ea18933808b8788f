"""A GpuNodeStatus as kube-apiserver stores it after the agent's two applies (owner, then status):
metadata and managedFields as in a real capture, the status's field set from tests/fakes/fieldset.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from tests import reference
from tests.fakes.fieldset import fields_v1

ROOT = Path(__file__).resolve().parents[2]
# A long but ordinary node name (40 characters), as the scale benches use.
NODE = "gpu-h100-sxm-a17-r042-u33-n0001.int.corp"
NODE_UID = "82e72931-9afa-400a-b271-469bb501b7fd"


def crd_root() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "daemonset/base/crds/gpunodestatuses.yaml").read_text())
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def per_leaf(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without atomic entries, as it was when the captures were made."""
    out = copy.deepcopy(schema)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("x-kubernetes-map-type", None)
            for child in node.values():
                strip(child)

    strip(out)
    return out


def capture(name: str) -> dict[str, Any]:
    return dict(json.loads((reference.WIRE / "ssa" / name).read_text()))


def stored_bytes(status: dict[str, Any], schema: dict[str, Any]) -> int:
    """Compact JSON bytes of the stored object, managedFields included."""
    template = capture("03-status-apply.json")["response"]["body"]
    meta = copy.deepcopy(template["metadata"])
    [entry] = [e for e in meta["managedFields"] if e.get("subresource") == "status"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE_UID}
    owned = {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}
    main = {
        **{k: v for k, v in entry.items() if k != "subresource"},
        "fieldsV1": {"f:metadata": {"f:ownerReferences": {f'k:{{"uid":"{NODE_UID}"}}': owned}}},
    }
    entry["fieldsV1"] = fields_v1({"status": status}, schema)
    meta.update(name=NODE, ownerReferences=[owner], managedFields=[main, entry])
    obj = {"apiVersion": template["apiVersion"], "kind": template["kind"], "metadata": meta}
    return len(json.dumps({**obj, "status": status}, separators=(",", ":")))

"""A GpuNodeStatus as etcd stores it, managedFields included, stays within 16 KiB per node.

At 65,536 nodes that is 1 GiB of etcd (its default quota is 2 GiB); before, with per-leaf
managedFields, an HGX H100 status was ~27 KB stored (1.8 GB at 65,536). Sizes come from the
managedFields model (tests/fakes/fieldset.py), which is first held to a real kube-apiserver's bytes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import reference
from tests.fakes.fieldset import fields_v1

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CAPTURES = (
    "03-status-apply.json",
    "04-status-reapply-identical.json",
    "06-second-manager-same-value.json",
    "08-agent-apply-omits-fields.json",
)
LIMIT = 16 * 1024
# A long but ordinary node name (40 characters), as the scale benches use.
NODE = "gpu-h100-sxm-a17-r042-u33-n0001.int.corp"
NODE_UID = "82e72931-9afa-400a-b271-469bb501b7fd"


def crd_root() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "daemonset/base/crds/gpunodestatuses.yaml").read_text())
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def per_leaf(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as it was when the captures were made: no atomic entries."""
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


@pytest.mark.parametrize("name", CAPTURES)
def test_fieldset_model_matches_what_the_api_server_recorded(name: str) -> None:
    exchange = capture(name)
    body = yaml.safe_load(exchange["request"]["body"])  # JSON or YAML, as apply-patch+yaml allows
    manager = exchange["request"]["query"]["fieldManager"]
    entries = exchange["response"]["body"]["metadata"]["managedFields"]
    [entry] = [e for e in entries if e["manager"] == manager and e.get("subresource") == "status"]
    assert fields_v1({"status": body["status"]}, per_leaf(crd_root())) == entry["fieldsV1"]


def stored(status: dict[str, Any], schema: dict[str, Any]) -> int:
    """Bytes of the object as the API stores it after the agent's two applies (owner, status)."""
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


@pytest.mark.parametrize("golden", sorted(p.stem for p in GOLDEN.glob("*.yaml")))
def test_stored_status_fits_16_kib(golden: str) -> None:
    status = yaml.safe_load((GOLDEN / f"{golden}.yaml").read_text())["status"]
    assert stored(status, crd_root()) <= LIMIT


def test_per_leaf_managed_fields_would_not_fit() -> None:
    """What the atomic entries buy: the same HGX H100 status recorded per leaf is over the limit."""
    status = yaml.safe_load((GOLDEN / "hgx-h100.yaml").read_text())["status"]
    assert stored(status, per_leaf(crd_root())) > LIMIT + 8 * 1024
    assert stored(status, crd_root()) < 16_000


def test_lists_stay_keyed_for_server_side_apply() -> None:
    """DESIGN.md: gpus by index, hcas by name, ports by port, so an entry left out is removed."""
    status = crd_root()["properties"]["status"]["properties"]
    ports = status["hcas"]["items"]["properties"]["ports"]
    for prop, key in ((status["gpus"], "index"), (status["hcas"], "name"), (ports, "port")):
        assert prop["x-kubernetes-list-type"] == "map"
        assert prop["x-kubernetes-list-map-keys"] == [key]
    for name in ("gpus", "hcas", "conditions", "nvlinkIslands"):
        assert status[name]["items"]["x-kubernetes-map-type"] == "atomic", name

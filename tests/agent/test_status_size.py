"""A GpuNodeStatus as etcd stores it, managedFields included, stays within 16 KiB per node.

At 65,536 nodes that is 1 GiB of etcd (its default quota is 2 GiB); before, with per-leaf
managedFields, an HGX H100 status was ~27 KB stored (1.8 GB at 65,536). Sizes come from the
managedFields model (tests/fakes/fieldset.py), which is first held to a real kube-apiserver's bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fakes.fieldset import fields_v1
from tests.fakes.stored import capture, crd_root, per_leaf, stored_bytes

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CAPTURES = (
    "03-status-apply.json",
    "04-status-reapply-identical.json",
    "06-second-manager-same-value.json",
    "08-agent-apply-omits-fields.json",
)
LIMIT = 16 * 1024


@pytest.mark.parametrize("name", CAPTURES)
def test_fieldset_model_matches_what_the_api_server_recorded(name: str) -> None:
    exchange = capture(name)
    body = yaml.safe_load(exchange["request"]["body"])  # JSON or YAML, as apply-patch+yaml allows
    manager = exchange["request"]["query"]["fieldManager"]
    entries = exchange["response"]["body"]["metadata"]["managedFields"]
    [entry] = [e for e in entries if e["manager"] == manager and e.get("subresource") == "status"]
    assert fields_v1({"status": body["status"]}, per_leaf(crd_root())) == entry["fieldsV1"]


@pytest.mark.parametrize("golden", sorted(p.stem for p in GOLDEN.glob("*.yaml")))
def test_stored_status_fits_16_kib(golden: str) -> None:
    status = yaml.safe_load((GOLDEN / f"{golden}.yaml").read_text())["status"]
    assert stored_bytes(status, crd_root()) <= LIMIT


def test_per_leaf_managed_fields_would_not_fit() -> None:
    """What the atomic entries buy: the same HGX H100 status recorded per leaf is over the limit."""
    status = yaml.safe_load((GOLDEN / "hgx-h100.yaml").read_text())["status"]
    assert stored_bytes(status, per_leaf(crd_root())) > LIMIT + 8 * 1024
    assert stored_bytes(status, crd_root()) < 16_000


def test_lists_stay_keyed_for_server_side_apply() -> None:
    """DESIGN.md: gpus by index, hcas by name, ports by port, so an entry left out is removed."""
    status = crd_root()["properties"]["status"]["properties"]
    ports = status["hcas"]["items"]["properties"]["ports"]
    for prop, key in ((status["gpus"], "index"), (status["hcas"], "name"), (ports, "port")):
        assert prop["x-kubernetes-list-type"] == "map"
        assert prop["x-kubernetes-list-map-keys"] == [key]
    for name in ("gpus", "hcas", "conditions", "nvlinkIslands"):
        assert status[name]["items"]["x-kubernetes-map-type"] == "atomic", name

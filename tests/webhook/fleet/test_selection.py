"""A pod's own nodeSelector and required affinity narrow the nodes its HCA list, hca-profile pin and
"no node satisfies" warning are decided on, when the Node labels are known (issue 17 item 1)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.labels import hca_profile
from tests.webhook.helpers import GOLDEN, golden_statuses, pod, with_usable
from webhook.__main__ import main
from webhook.admission.placement import Settings, mutate
from webhook.admission.requirements import requirements
from webhook.fleet.cache import FabricCache
from webhook.fleet.selection import MAX_SELECTIONS

STATUSES = dict(golden_statuses())
HGX, AZURE = STATUSES["hgx-h100"], STATUSES["azure-ndv5"]
ONPREM_HCAS = "=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11"
AZURE_HCAS = "=" + ",".join(AZURE["summary"]["usableHcas"])
LABELS = {
    "hgx-h100": {"pool": "onprem", "topology.kubernetes.io/zone": "dc-1"},
    "azure-ndv5": {"pool": "azure", "topology.kubernetes.io/zone": "eastus-1"},
}
RDMA = {"gpufabric.io/rdma": "required"}


def _zone(zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                  "values": [zone]}]}  # fmt: skip
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip


def _write(tmp_path: Path, p: dict[str, Any]) -> tuple[str, str]:
    (tmp_path / "s").mkdir()
    for name in LABELS:
        (tmp_path / "s" / f"{name}.yaml").write_text((GOLDEN / f"{name}.yaml").read_text())
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": labels}}
        for n, labels in LABELS.items()
    ]
    (tmp_path / "s" / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(p))
    return str(tmp_path / "pod.yaml"), str(tmp_path / "s")


def _env(p: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in p["spec"]["containers"][0].get("env", [])}


def _pinned(p: dict[str, Any]) -> bool:
    terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = [e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]]
    return "gpufabric.io/hca-profile" in keys


@pytest.mark.parametrize(
    ("spec", "hcas"),
    [
        ({"nodeSelector": {"pool": "azure"}}, AZURE_HCAS),
        ({"nodeSelector": {"pool": "onprem"}}, ONPREM_HCAS),
        ({"affinity": _zone("eastus-1")}, AZURE_HCAS),
        ({"affinity": _zone("dc-1")}, ONPREM_HCAS),
    ],
)
def test_offline_mutate_and_explain_decide_on_the_nodes_the_pod_may_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], hcas: str
) -> None:
    pod_file, status = _write(tmp_path, pod(RDMA, **spec))
    assert main(["mutate", "--pod", pod_file, "--status", status, "-o", "json"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert _env(out["pod"])["NCCL_IB_HCA"] == hcas
    assert not _pinned(out["pod"]) and out["warnings"] == []
    assert main(["explain", "--pod", pod_file, "--status", status]) == 0
    assert "1 of 2 nodes admit this pod." in capsys.readouterr().out


def test_offline_selector_that_no_node_meets_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod_file, status = _write(tmp_path, pod(RDMA, nodeSelector={"pool": "gcp"}))
    assert main(["mutate", "--pod", pod_file, "--status", status, "-o", "json"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["warnings"] == [
        "gpufabric: no node currently satisfies: the pod's own nodeSelector and required node "
        "affinity (no node with a GpuNodeStatus has the labels they ask for)"
    ]


def _serve_cache() -> FabricCache:
    cache = FabricCache()
    cache.replace_nodes([("hgx-h100", HGX), ("azure-ndv5", AZURE)])
    cache.replace_claims([])
    cache.replace_existing_nodes(list(LABELS), LABELS)
    return cache


def _hcas(cache: FabricCache, p: dict[str, Any]) -> tuple[str | None, bool, list[str]]:
    d = mutate(p, requirements(p, "team-a", cache.claim), cache.fleet_for(p), Settings())
    return _env(d.pod).get("NCCL_IB_HCA"), _pinned(d.pod), d.warnings


def test_serve_cache_follows_node_label_changes() -> None:
    cache = _serve_cache()
    p = pod(RDMA, nodeSelector={"pool": "azure"})
    assert _hcas(cache, p) == (AZURE_HCAS, False, [])
    # The on-prem node joins the azure pool: no one list fits both, so the pod is pinned.
    cache.node_exists("hgx-h100", True, {"pool": "azure"})
    assert _hcas(cache, p)[1]
    # It leaves again, and the Node of the azure one is deleted: nothing left for the pod.
    cache.node_exists("hgx-h100", True, LABELS["hgx-h100"])
    cache.node_exists("azure-ndv5", False)
    assert _hcas(cache, p)[2] == [
        "gpufabric: no node currently satisfies: the pod's own nodeSelector and required node "
        "affinity (no node with a GpuNodeStatus has the labels they ask for)"
    ]
    # A status change reaches the selection too.
    cache.node_exists("azure-ndv5", True, LABELS["azure-ndv5"])
    assert _hcas(cache, p) == (AZURE_HCAS, False, [])


def test_pods_without_node_constraints_use_the_whole_fleet() -> None:
    cache = _serve_cache()
    assert cache.fleet_for(pod(RDMA)) is cache.groups()
    only_ours = pod(RDMA, nodeSelector={"gpufabric.io/rdma": "true"})
    assert cache.fleet_for(only_ours) is cache.groups()


def test_before_node_labels_are_known_nothing_changes() -> None:
    cache = FabricCache()
    cache.replace_nodes([("hgx-h100", HGX), ("azure-ndv5", AZURE)])
    p = pod(RDMA, nodeSelector={"pool": "azure"})
    assert cache.fleet_for(p) is cache.groups()


def _azure_with(usable: list[str]) -> dict[str, Any]:
    return with_usable(AZURE, usable)


def test_a_tie_between_layouts_goes_to_more_rails_not_to_the_profile_name() -> None:
    full = list(AZURE["summary"]["usableHcas"])
    extra = "mlx5_ib99"

    def split(i: int) -> tuple[list[str], list[str]]:
        return full[i : i + 4], [*full[:i], *full[i + 4 :], extra]  # four rails, five rails

    # Two nodes, disjoint HCA lists, one node each: the 4-rail one sorts first by profile value.
    few, many = next(
        split(i) for i in range(5) if hca_profile(split(i)[0]) < hca_profile(split(i)[1])
    )
    cache = FabricCache()
    cache.replace_nodes([("a", _azure_with(few)), ("b", _azure_with(many))])
    cache.replace_claims([])
    hcas, pinned, warnings = _hcas(cache, pod(RDMA))
    assert pinned and hcas == "=" + ",".join(many), warnings
    assert "the 1 node on which" in warnings[0]


@pytest.mark.parametrize("by", ["hostname", "matchFields"])
def test_nodes_alike_but_for_their_name_are_told_apart(by: str) -> None:
    # Both nodes share one label set; only the name (hostname label or metadata.name) decides.
    cache = FabricCache()
    cache.replace_nodes([("hgx-h100", HGX), ("azure-ndv5", AZURE)])
    cache.replace_claims([])
    labels = {n: {"pool": "x", "kubernetes.io/hostname": n} for n in LABELS}
    cache.replace_existing_nodes(list(labels), labels)
    if by == "hostname":
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                      "values": ["azure-ndv5"]}]}  # fmt: skip
    else:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In",
                                 "values": ["azure-ndv5"]}]}  # fmt: skip
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    assert _hcas(cache, pod(RDMA, affinity=affinity)) == (AZURE_HCAS, False, [])


def test_alike_constraints_share_one_selection_and_the_kept_shapes_are_bounded() -> None:
    cache = _serve_cache()
    azure = cache.fleet_for(pod(RDMA, nodeSelector={"pool": "azure"}))
    # Equal constraints in fresh objects (each review decodes its own) find the same selection,
    # whichever shape was asked in between.
    onprem = cache.fleet_for(pod(RDMA, affinity=_zone("dc-1")))
    assert cache.fleet_for(pod(RDMA, nodeSelector={"pool": "azure"})) is azure
    assert cache.fleet_for(pod(RDMA, affinity=_zone("dc-1"))) is onprem
    assert [g.nodes for g in azure.groups()] == [("azure-ndv5",)]
    for i in range(MAX_SELECTIONS + 4):
        cache.fleet_for(pod(RDMA, nodeSelector={"pool": f"p{i}"}))
    assert len(cache._selections) == MAX_SELECTIONS


def test_selector_keys_equal_but_of_another_type_are_told_apart() -> None:
    # 1 == True, so {1: "x"} == {True: "x"}; the scheduler's reading is str(key): "1" vs "True".
    cache = FabricCache()
    cache.replace_nodes([("hgx-h100", HGX), ("azure-ndv5", AZURE)])
    cache.replace_claims([])
    labels = {"hgx-h100": {"1": "x"}, "azure-ndv5": {"True": "x"}}
    cache.replace_existing_nodes(list(labels), labels)
    ones = cache.fleet_for(pod(RDMA, nodeSelector={1: "x"}))
    trues = cache.fleet_for(pod(RDMA, nodeSelector={True: "x"}))
    assert [g.nodes for g in ones.groups()] == [("hgx-h100",)]
    assert [g.nodes for g in trues.groups()] == [("azure-ndv5",)]


def _with_ours(affinity: dict[str, Any], expr: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(affinity)
    terms = out["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms["nodeSelectorTerms"][0]["matchExpressions"].append(expr)
    return out


def test_the_scope_hands_placement_the_pods_own_conditions_read_once() -> None:
    # The selection lookup reads the pod's constraints (review by review: the last shape asked,
    # or a kept one); placement takes their conditions on our labels from it instead of reading
    # the pod again. Decisions must be those of a placement that reads the pod itself.
    cache = _serve_cache()
    no_ports = {"key": "gpufabric.io/rdma-ports", "operator": "Gt", "values": ["100"]}
    shapes: dict[str, dict[str, Any]] = {
        "zone": {"affinity": _zone("dc-1")},
        "zone and ours": {"affinity": _with_ours(_zone("dc-1"), no_ports)},
        "selector and ours": {"nodeSelector": {"pool": "onprem", "gpufabric.io/rdma": "false"}},
        "ours only": {"nodeSelector": {"gpufabric.io/rdma": "false"}},  # no selection: the query
        "none": {},
    }
    order = ["zone", "zone and ours", "zone", "selector and ours", "zone and ours", "ours only"]
    for name in [*order, "none", "selector and ours", "selector and ours"]:
        p = pod(RDMA, **shapes[name])
        req = requirements(p, "team-a", cache.claim)
        fleet, own = cache.scope_for(p)
        assert fleet is cache.fleet_for(p)
        scoped = mutate(copy.deepcopy(p), req, fleet, Settings(), in_place=True, own=own)
        read = mutate(p, req, fleet, Settings())
        assert (scoped.ops, scoped.warnings) == (read.ops, read.warnings), name
        unmet = any("no node currently satisfies" in w for w in read.warnings)
        assert unmet == (name != "zone" and name != "none"), (name, read.warnings)

"""NVLink domains in the network position model: the real GB200 NVL72 SuperPOD dump (one leaf domain
per rack) joined to tray statuses whose GPUs name their rack's NVLink domain (tests/nvl72.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import nvlink
from tests.nvl72 import cluster_uuid, domain, tray_status
from tests.webhook.fabric.helpers import ref, ref_path, statuses_from_descriptions
from webhook.__main__ import main
from webhook.fabric import render
from webhook.fabric.controller import FabricController
from webhook.fabric.levels import Positions
from webhook.fabric.nvdomains import nvlink_view
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive

DUMP = "ibnetdiscover/topograph-gb200-railopt-example.out"
CLIQUE = "nvidia.com/gpu.clique"


def rack_of(host: str) -> int:
    return int(re.search(r"-dgx-(\d\d)-", host).group(1))  # type: ignore[union-attr]


def tray_statuses(moved: int = 0) -> dict[str, dict[str, Any]]:
    """Every tray of the dump with its HCAs and 4 GPUs in its rack's NVLink domain; the first
    `moved` trays of rack 02 (c01, c02, ...) are cabled into rack 01's NVLink domain instead."""
    out = {}
    for host, st in statuses_from_descriptions(ref(DUMP)).items():
        if "-dgx-" not in host:
            continue
        rack = rack_of(host)
        tray = int(host.rsplit("-c", 1)[1]) - 1
        if rack == 2 and tray < moved:
            rack = 1
        out[host] = {**st, "gpus": tray_status(rack, tray)["status"]["gpus"]}
    return out


def view_of(statuses: dict[str, dict[str, Any]]) -> tuple[Positions, Any]:
    fabric = derive(ref(DUMP), "ibnetdiscover", join.from_statuses(statuses.items()))
    positions = Positions(fabric)
    domains = {n: nvlink.status_domain(s) for n, s in statuses.items()}
    return positions, nvlink_view(domains, positions)


def test_each_nvl72_rack_is_one_nvlink_domain_inside_its_leaf_domain() -> None:
    positions, view = view_of(tray_statuses())
    leaves = [leaf for leaf in positions.fabric.leaves if leaf.nodes]
    assert len(view.domains) == len(leaves) == 8
    for d, leaf in zip(view.domains, leaves, strict=True):  # both in fabric order
        assert d.per_leaf == ((leaf.id, len(leaf.nodes)),)
        assert not d.spans
        assert d.value == domain(rack_of(d.nodes[0]))
        assert {rack_of(n) for n in d.nodes} == {rack_of(leaf.nodes[0])}
    body = render.status(positions.fabric, positions, view)
    assert body["summary"]["nvlinkDomains"] == 8
    assert (body["summary"]["nvlinkSpanning"], sum(s["nvlinkDomains"] for s in body["spines"])) == (
        0,
        8,
    )
    assert "nvlinkDomains" not in body  # only the ones that span leaf domains are listed
    first = render.listing(positions.fabric, positions, view)["spines"][0]["leaves"][0]
    assert first["nvlinkDomains"] == [view.domains[0].value]


def test_an_nvlink_domain_spanning_two_leaf_domains_is_valid_and_reported() -> None:
    positions, view = view_of(tray_statuses(moved=4))
    wide = next(d for d in view.domains if d.value == domain(1))
    first, second = positions.fabric.leaves[:2]
    leaf1, leaf2, n1 = first.id, second.id, len(first.nodes)  # the dump holds 10 of rack 01's trays
    assert wide.per_leaf == ((leaf1, n1), (leaf2, 4))
    assert wide.spans
    table = render.table(positions.fabric, positions, view)
    assert f"  {domain(1)} spans leaf domains {leaf1}, {leaf2}" in table
    assert f"        nvlink-domain {domain(1)}  (4 nodes; also in {leaf1})" in table
    assert "8 NVLink domain(s), 1 spanning more than one leaf domain" in table
    body = render.status(positions.fabric, positions, view)
    listed = next(d for d in body["nvlinkDomains"] if d["name"] == domain(1))
    assert listed["leaves"] == [{"name": leaf1, "nodes": n1}, {"name": leaf2, "nodes": 4}]


def test_without_nvlink_domains_the_status_and_table_are_unchanged() -> None:
    statuses = {h: {k: v for k, v in s.items() if k != "gpus"} for h, s in tray_statuses().items()}
    positions, view = view_of(statuses)
    assert render.status(positions.fabric, positions, view) == render.status(
        positions.fabric, positions
    )
    assert render.table(positions.fabric, positions, view) == render.table(
        positions.fabric, positions
    )


def test_controller_publishes_domains_from_statuses_and_clique_labels_without_rederiving() -> None:
    c = FabricController(now=lambda: "2026-11-25T16:00:00Z")
    c.configmap({"topology.conf": "SwitchName=s0 Nodes=t[1-2]\nSwitchName=s1 Nodes=t[3-4]\n"})
    c.statuses([("t1", tray_status(0, 0)["status"]), ("t2", tray_status(0, 1)["status"])])
    c.node("t3", {CLIQUE: domain(0)})  # GFD's label: the same rack across the other leaf
    c.node("t4", {})
    _, body = c.refresh()
    assert body is not None
    (d,) = body["status"]["nvlinkDomains"]
    assert d == {
        "name": domain(0),
        "leaves": [{"name": "s0", "nodes": 2}, {"name": "s1", "nodes": 1}],
        "nodes": 3,
    }
    # t2's GPUs start to disagree: it leaves the domain, and the status says why.
    c.status("t2", tray_status(0, 1, racks=(0, 0, 3, 3))["status"])
    changed, body = c.refresh()
    assert not changed and body is not None  # labels untouched, the body re-rendered
    assert body["status"]["nvlinkDomains"][0]["nodes"] == 2
    (unknown,) = body["status"]["nvlinkUnknown"]
    assert unknown["node"] == "t2"
    assert unknown["reason"].startswith("GPUs disagree on their NVLink domain")
    assert cluster_uuid(3) in unknown["reason"]
    assert c.refresh() == (False, None)  # nothing new: nothing to do
    assert c.nvlink_domains() == {"t1": domain(0), "t3": domain(0)}


def test_topology_command_shows_domains_from_status_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [
        {
            "apiVersion": "gpufabric.io/v1alpha1",
            "kind": "GpuNodeStatus",
            "metadata": {"name": h},
            "status": s,
        }
        for h, s in tray_statuses(moved=4).items()
    ]
    (tmp_path / "trays.yaml").write_text(yaml.safe_dump_all(docs))
    args = ["topology", "--source", str(ref_path(DUMP)), "--status", str(tmp_path / "trays.yaml")]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "8 NVLink domain(s), 1 spanning more than one leaf domain" in table
    assert main([*args, "-o", "yaml"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["summary"]["nvlinkDomains"] == 8
    assert main([*args, "-o", "labels"]) == 0
    assert "nvlink" not in capsys.readouterr().out  # network labels only, as DESIGN fixes


def _pruned(value: Any, schema: dict[str, Any], at: str = "") -> list[str]:
    """Paths the API server would prune (fields the structural schema does not declare)."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out = [f"{at}.{k}" for k in value if k not in props]
        return out + [
            p for k, v in value.items() if k in props for p in _pruned(v, props[k], f"{at}.{k}")
        ]
    if isinstance(value, list):
        return [p for v in value for p in _pruned(v, schema.get("items", {}), f"{at}[]")]
    return []


def test_the_crd_keeps_every_nvlink_field_of_the_status() -> None:
    crd = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "daemonset/base/crds/gpufabrics.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    statuses = tray_statuses(moved=4)
    statuses["a06-p1-dgx-02-c07"]["gpus"] = tray_status(2, 6, cliques=(1, None, 1, 1))["status"][
        "gpus"
    ]
    positions, view = view_of(statuses)
    body = render.status(positions.fabric, positions, view)
    assert body["nvlinkUnknown"] and body["nvlinkDomains"]
    assert _pruned(body, schema) == []


def test_nvlink_domains_follow_each_event_and_the_status_wins_over_the_clique_label() -> None:
    """What the exports read (webhook/export takes node -> domain from here): remembered between
    calls, and forgotten on every input that could change it."""
    c = FabricController()
    c.node("t1", {CLIQUE: domain(5)})
    c.node("t2", {CLIQUE: domain(5)})
    assert c.nvlink_domains() == {"t1": domain(5), "t2": domain(5)}
    c.status("t1", tray_status(0, 0)["status"])
    assert c.nvlink_domains() == {"t1": domain(0), "t2": domain(5)}  # the GPUs win
    c.status("t1", None)
    c.node("t2", None)
    assert c.nvlink_domains() == {"t1": domain(5)}  # back to its label; t2 gone
    c.statuses([("t3", tray_status(1, 0)["status"])])
    assert c.nvlink_domains() == {"t1": domain(5), "t3": domain(1)}

"""Which HCAs form the compute fabric (issue 7 item 2). Fixture facts were checked by hand against
the dumps named in each fixture's provenance; the rule's edge cases reuse those dumps' HCAs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from agent import __main__ as cli
from agent.assemble import Assembled
from agent.hca_select import Candidate, select, split_patterns
from common.labels import labels_for
from common.model import Hca, HcaPort

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
RAILS = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")


def hcas(result: Assembled) -> dict[str, Hca]:
    return {h.name: h for h in result.status.hcas}


def test_hgx_h100_front_end_nic_is_not_a_rail(probed: dict[str, Assembled]) -> None:
    # ibstat.47.0.h100.some.down.0: eight MT4129 InfiniBand 400G rails; mlx5_1 is an MT4125
    # (ConnectX-6 Dx) 100G Ethernet port on GPU0's PCIe switch (lspci-vvv bus 1b).
    status = probed["hgx-h100"].status
    assert status.summary.usable_hcas == RAILS
    assert labels_for(status.summary)["gpufabric.io/rdma-ports"] == "8"
    front = hcas(probed["hgx-h100"])["mlx5_1"]
    assert front.ports[0].state == "ACTIVE" and not front.compute_fabric
    assert "Ethernet" in front.selection and "InfiniBand" in front.selection
    assert all(hcas(probed["hgx-h100"])[n].compute_fabric for n in RAILS)


def test_azure_ndv4_ethernet_vf_is_not_a_rail(probed: dict[str, Assembled]) -> None:
    # lspci.nn.a100: eight ConnectX-6 IB VFs 0101-0108 (in ndv4-topo.xml) + a ConnectX-4 Lx VF.
    status = probed["azure-ndv4"].status
    assert status.summary.usable_hcas == tuple(f"mlx5_ib{i}" for i in range(8))
    assert status.summary.rdma_ports == 8
    assert not hcas(probed["azure-ndv4"])["mlx5_an0"].compute_fabric


def test_roce_rails_that_are_down_stay_compute_fabric(probed: dict[str, Assembled]) -> None:
    # ibstat.47.0.h100.all.active.1: CX-7 (MT4129) 400G and CX-6 Dx (MT4125) 100G, all Ethernet;
    # mlx5_10/11 were set DOWN for the fixture.
    got = hcas(probed["hgx-roce-degraded"])
    assert [n for n, h in got.items() if h.compute_fabric] == list(RAILS)
    assert got["mlx5_10"].compute_fabric and "no port ACTIVE" in got["mlx5_10"].selection
    usable = probed["hgx-roce-degraded"].status.summary.usable_hcas
    assert usable == tuple(n for n in RAILS if n not in ("mlx5_10", "mlx5_11"))


@pytest.mark.parametrize(
    ("host", "usable"),
    [
        ("esc8000a-pcie", ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")),  # all NICs behind the CPU
        ("aws-p4d", ("rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27")),  # 4 NICs, 8 GPUs
        ("azure-ndv5", tuple(f"mlx5_ib{i}" for i in range(8))),
        ("cpu-only", ()),  # mlx4_0 is the fabric, but nothing provides GPUDirect RDMA
    ],
)
def test_nodes_without_front_end_nics_keep_every_hca(
    probed: dict[str, Assembled], host: str, usable: tuple[str, ...]
) -> None:
    assert probed[host].status.summary.usable_hcas == usable
    hw = [h for h in probed[host].status.hcas if h.pci_bus_id]
    assert all(h.compute_fabric for h in hw), [(h.name, h.selection) for h in hw]


def test_port_guid_is_gid0_low_64_bits(probed: dict[str, Assembled]) -> None:
    # hwloc 32em64t-2n8c snapshot: node_guid 0002:c903:00f9:bfa0, ports/1/gids/0
    # fe80:0000:0000:0000:0002:c903:00f9:bfa1 (mlx4 numbers ports from node GUID + 1).
    mlx4 = hcas(probed["cpu-only"])["mlx4_0"]
    assert (mlx4.node_guid, mlx4.ports[0].guid) == ("0002:c903:00f9:bfa0", "0002:c903:00f9:bfa1")
    assert hcas(probed["hgx-h100"])["mlx5_0"].ports[0].guid == "946d:ae03:00cd:e72c"
    assert hcas(probed["hgx-roce-degraded"])["mlx5_0"].ports[0].guid == ""  # RoCE: no port GUID


# ---- the rule on shapes no fixture has, built from the fixtures' own HCAs


def candidates(result: Assembled) -> list[Candidate]:
    near = {n.name: n.distance for g in result.status.gpus for n in g.nearest_hcas}
    return [
        Candidate(h.name, h.ports, f"{h.model}/{h.board_id}", True, near.get(h.name, "PIX"))
        for h in result.status.hcas
    ]


def down(c: Candidate) -> Candidate:
    ports = tuple(replace(p, state="DOWN", phys_state="Polling", rate_gbps=40.0) for p in c.ports)
    return replace(c, ports=ports)


def chosen(result: dict[str, object]) -> list[str]:
    return [n for n, c in result.items() if getattr(c, "compute_fabric", False)]


def test_all_roce_rails_down_with_front_end_up(probed: dict[str, Assembled]) -> None:
    cands = [down(c) if c.name in RAILS else c for c in candidates(probed["hgx-roce-degraded"])]
    assert chosen(dict(select(cands))) == list(RAILS)


def test_all_ib_rails_down(probed: dict[str, Assembled]) -> None:
    cands = [down(c) if c.name in RAILS else c for c in candidates(probed["hgx-h100"])]
    assert chosen(dict(select(cands))) == list(RAILS)


def test_storage_nics_behind_the_cpu_do_not_count(probed: dict[str, Assembled]) -> None:
    # DGX A100 shape: the storage HCAs are the same IB cards as the rails but hang off the CPU.
    cands = [
        replace(c, gpu_distance="NODE") if c.name in ("mlx5_10", "mlx5_11") else c
        for c in candidates(probed["hgx-h100"])
    ]
    result = select(cands)
    assert chosen(dict(result)) == list(RAILS[:-2])
    assert "NODE to the nearest GPU" in result["mlx5_10"].selection


def test_a_rail_running_slow_does_not_count(probed: dict[str, Assembled]) -> None:
    cands = candidates(probed["hgx-h100"])
    slow = [
        replace(c, ports=(replace(c.ports[0], rate_gbps=200.0),)) if c.name == "mlx5_3" else c
        for c in cands
    ]
    result = select(slow)
    assert not result["mlx5_3"].compute_fabric and "below" in result["mlx5_3"].selection


def test_unknown_locality_falls_back_to_link_layer_and_rate(probed: dict[str, Assembled]) -> None:
    cands = [replace(c, gpu_distance=None) for c in candidates(probed["hgx-h100"])]
    assert chosen(dict(select(cands))) == list(RAILS)


def test_operator_overrides() -> None:
    port = HcaPort(1, "ACTIVE", "LinkUp", 400.0, "InfiniBand")
    cands = [Candidate(f"mlx5_{i}", (port,), "MT4129") for i in range(4)]
    assert chosen(dict(select(cands, exclude=("mlx5_3",)))) == ["mlx5_0", "mlx5_1", "mlx5_2"]
    only = select(cands, include=("mlx5_[01]",), exclude=("mlx5_1",))
    assert chosen(dict(only)) == ["mlx5_0"]
    assert only["mlx5_1"].selection == "excluded by --hca-exclude mlx5_1"
    assert only["mlx5_2"].selection == "not named by --hca-include"
    assert split_patterns(["mlx5_0, mlx5_1", "eth*"]) == ("mlx5_0", "mlx5_1", "eth*")


def test_cli_overrides_change_the_labels(capsys: pytest.CaptureFixture[str]) -> None:
    archive = str(FIXTURES / "hgx-h100.tar.gz")
    assert (
        cli.main(["probe", "--from", archive, "-o", "labels", "--hca-exclude", "mlx5_0,mlx5_3"])
        == 0
    )
    assert "gpufabric.io/rdma-ports=6\n" in capsys.readouterr().out
    assert cli.main(["probe", "--from", archive, "-o", "labels", "--hca-include", "mlx5_1"]) == 0
    assert "gpufabric.io/rdma-ports=1\n" in capsys.readouterr().out
    assert cli.main(["probe", "--from", archive, "-o", "table", "--hca-exclude", "mlx5_0"]) == 0
    assert "not compute fabric: excluded by --hca-exclude mlx5_0" in capsys.readouterr().out


def test_patterns_that_match_nothing_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 17 item 5: a typo in --hca-include left rdma=false with every condition True, exit 0.
    archive = str(FIXTURES / "hgx-h100.tar.gz")
    args = ["probe", "--from", archive, "-o", "json", "--hca-include", "mlx5-*"]
    assert cli.main([*args, "--hca-exclude", "mlx5_1,eth*"]) == 0
    out, err = capsys.readouterr()
    rdma = next(c for c in json.loads(out)["status"]["conditions"] if c["type"] == "RdmaProbed")
    assert (rdma["status"], rdma["reason"]) == ("False", "HcaPatternUnmatched")
    assert rdma["message"].startswith(
        "--hca-include mlx5-* matches no RDMA device; --hca-exclude eth* matches no RDMA device "
        "(devices: mlx5_0, mlx5_1,"
    )
    warnings = [line for line in err.splitlines() if "WARNING" in line]
    assert len(warnings) == 2
    assert "flag=--hca-include pattern=mlx5-*" in warnings[0]
    assert "flag=--hca-exclude pattern=eth*" in warnings[1]
    # Patterns that each name an HCA leave the condition as it was.
    assert cli.main([*args[:-1], "mlx5_[0-9]", "--hca-exclude", "mlx5_1"]) == 0
    out, err = capsys.readouterr()
    conds = {c["type"]: c for c in json.loads(out)["status"]["conditions"]}
    assert conds["RdmaProbed"]["status"] == "True" and "WARNING" not in err

"""Facts checked by hand against the source dumps in ../shared/reference (see each fixture's
gather.json provenance). These pin what the goldens must keep saying."""

from __future__ import annotations

from agent.assemble import Assembled
from agent.table import render
from common.labels import labels_for


def test_hgx_h100_gpu_bus_ids_match_lspci_and_nvidia_smi(probed: dict[str, Assembled]) -> None:
    # lspci-vvv: 3D controllers 10de:2330 at 19/3b/4c/5d/9b/bb/cb/db.
    buses = [g.pci_bus_id for g in probed["hgx-h100"].status.gpus]
    assert buses == [f"0000:{b}:00.0" for b in ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")]


def test_hgx_h100_gpu0_shares_the_pex_switch_with_cx7_and_nvme(
    probed: dict[str, Assembled],
) -> None:
    # lspci-vvv: 15:01.0 -> 16:00.0 (PEX890xx USP) -> 17:0x.0 DSPs -> 18 NVMe, 19 GPU, 1a CX-7, 1b CX-6 Dx.
    gpu0 = probed["hgx-h100"].status.gpus[0]
    assert gpu0.pcie_root == "pci0000:15"
    assert gpu0.pcie_switch == "0000:16:00.0"
    assert gpu0.numa_node == 0
    assert gpu0.pcie_link_speed == "32.0 GT/s" and gpu0.pcie_link_width == 16
    near = {(h.name, h.distance) for h in gpu0.nearest_hcas}
    assert near == {("mlx5_0", "PIX"), ("mlx5_1", "PIX"), ("mlx5_2", "PIX")}
    nvme0 = probed["hgx-h100"].status.gpudirect.storage.nvme_peers[0]
    assert (nvme0.pci_bus_id, nvme0.nearest_gpus, nvme0.distance) == ("0000:18:00.0", (0,), "PIX")


def test_hgx_h100_nvlink_is_one_island_of_8_at_900(probed: dict[str, Assembled]) -> None:
    status = probed["hgx-h100"].status
    assert [i.gpus for i in status.nvlink_islands] == [tuple(range(8))]
    assert status.nvlink_islands[0].bandwidth_gbps == 900  # 18 NVLink4 links x 50 GB/s
    gpu = status.gpus[3]
    assert gpu.nvlink is not None and gpu.nvlink.version == 4 and gpu.nvlink.active_links == 18
    assert sorted(p.links for p in gpu.nvlink.peers) == [4, 4, 5, 5]


def test_hgx_h100_hcas_match_ibstat(probed: dict[str, Assembled]) -> None:
    # ibstat.47.0.h100.some.down.0: 8x MT4129 IB 400 Active; MT4125 Ethernet: mlx5_1 Active 100,
    # mlx5_2/7/8 Down/Disabled.
    hcas = {h.name: h for h in probed["hgx-h100"].status.hcas}
    assert hcas["mlx5_0"].node_guid == "946d:ae03:00cd:e72c"
    assert (
        hcas["mlx5_0"].ports[0].rate_gbps == 400
        and hcas["mlx5_0"].ports[0].link_layer == "InfiniBand"
    )
    assert [hcas[n].ports[0].state for n in ("mlx5_2", "mlx5_7", "mlx5_8")] == ["DOWN"] * 3
    summary = probed["hgx-h100"].status.summary
    # mlx5_1 is ACTIVE but a 100G Ethernet front-end port, not a rail (test_compute_fabric).
    assert summary.usable_hcas == tuple(f"mlx5_{i}" for i in (0, 3, 4, 5, 6, 9, 10, 11))
    # Disabled front-end ports are a choice, not a fault.
    assert summary.fabric_health == "ok"


def test_hgx_h100_labels(probed: dict[str, Assembled]) -> None:
    labels = labels_for(probed["hgx-h100"].status.summary)
    assert labels["gpufabric.io/gpu-count"] == "8"
    assert labels["gpufabric.io/nvlink-island-size"] == "8"
    assert labels["gpufabric.io/nvlink-bandwidth-gbps"] == "900"
    assert labels["gpufabric.io/numa-gpus-max"] == "4"
    assert labels["gpufabric.io/rdma"] == "true"
    assert labels["gpufabric.io/rdma-ports"] == "8"
    assert labels["gpufabric.io/cufile"] == "true"
    assert labels["gpufabric.io/fabric-health"] == "ok"


def test_esc8000a_matrix_equals_the_published_topo_m(probed: dict[str, Assembled]) -> None:
    # nvidia-smi topo -m of the ESC8000A-E12 (stelline-asus-esc8000a-e12-topo-m.txt), GPU/NIC block.
    expected = """\
GPU0 X NODE SYS SYS NODE NODE SYS SYS
GPU1 NODE X SYS SYS NODE NODE SYS SYS
GPU2 SYS SYS X NODE SYS SYS NODE NODE
GPU3 SYS SYS NODE X SYS SYS NODE NODE
NIC0 NODE NODE SYS SYS X PIX SYS SYS
NIC1 NODE NODE SYS SYS PIX X SYS SYS
NIC2 SYS SYS NODE NODE SYS SYS X PIX
NIC3 SYS SYS NODE NODE SYS SYS PIX X"""
    rows = render(probed["esc8000a-pcie"]).splitlines()[1:9]
    got = "\n".join(" ".join(r.split()[:9]) for r in rows)
    assert got == expected
    assert probed["esc8000a-pcie"].status.summary.nvlink_island_size == 0


def test_azure_ndv5_pairs_each_gpu_with_its_ib_vf(probed: dict[str, Assembled]) -> None:
    # ndv5-topo.xml: GPU 0001 and NIC 0101 share fake switch ffff:ff:01.0, and so on.
    gpus = probed["azure-ndv5"].status.gpus
    pairs = [(g.pci_bus_id[:4], [(h.name, h.distance) for h in g.nearest_hcas]) for g in gpus]
    assert pairs[0] == ("0001", [("mlx5_ib0", "PIX")])
    assert pairs[4] == ("0009", [("mlx5_ib4", "PIX")])
    assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0].pcie_switch == "ffff:ff:01.0"


def test_aws_p4d_two_gpus_and_one_efa_per_switch(probed: dict[str, Assembled]) -> None:
    gpus = probed["aws-p4d"].status.gpus
    assert [h.name for h in gpus[0].nearest_hcas] == ["rdmap16s27"]
    assert [h.name for h in gpus[1].nearest_hcas] == ["rdmap16s27"]
    assert [h.name for h in gpus[7].nearest_hcas] == ["rdmap160s27"]
    assert probed["aws-p4d"].status.summary.nvlink_bandwidth_gbps == 600


def test_missing_driver_still_finds_gpus_on_pci(probed: dict[str, Assembled]) -> None:
    status = probed["hgx-h100-nodriver"].status
    assert status.summary.gpu_count == 8
    assert status.gpus[0].product == "NVIDIA H100 80GB HBM3" and status.gpus[0].uuid == ""
    nvml = next(c for c in status.conditions if c.type == "NvmlAvailable")
    assert (nvml.status, nvml.reason) == ("False", "LibraryNotFound")
    assert "8 NVIDIA GPUs found on PCI" in nvml.message
    assert status.summary.fabric_health == "degraded"


def test_roce_node_with_ports_down_is_degraded_and_broken_cufile_is_reported(
    probed: dict[str, Assembled],
) -> None:
    status = probed["hgx-roce-degraded"].status
    assert status.summary.fabric_health == "degraded"
    assert "mlx5_10" not in status.summary.usable_hcas
    assert all(p.link_layer == "Ethernet" for h in status.hcas for p in h.ports)
    gds = next(c for c in status.conditions if c.type == "GdsProbed")
    assert (gds.status, gds.reason) == ("False", "ConfigInvalid")
    assert status.summary.cufile == "false"


def test_cpu_only_node_is_an_honest_empty_status(probed: dict[str, Assembled]) -> None:
    status = probed["cpu-only"].status
    assert status.gpus == () and status.summary.gpu_count == 0
    assert status.summary.rdma is False  # mlx4_0 is up, but nothing provides GPUDirect RDMA
    assert status.summary.fabric_health == "ok"

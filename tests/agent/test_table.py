"""`probe -o table` for people (issue 7, "What a person reads"): fits 160 columns, marks HCAs that
are not compute fabric, says when NVLink is unknown."""

from __future__ import annotations

from agent.assemble import Assembled
from agent.gather import Snapshot
from agent.table import render
from tests.conftest import probe_snapshot


def test_table_fits_160_columns_and_marks_front_end_nics(probed: dict[str, Assembled]) -> None:
    # hgx-h100: 8 GPUs, 12 HCAs, 8 NVMe drives; the old single matrix was 219 columns wide.
    text = render(probed["hgx-h100"])
    assert max(len(line) for line in text.splitlines()) <= 160
    rows = [line.split()[0] for line in text.splitlines() if line[:4] in ("GPU0", "NVME")]
    assert rows.count("GPU0") == 2 and "NVME7" in rows  # every device, in two column blocks
    assert "NIC1*  PIX" in text and "NIC0   PIX" in text
    assert "NIC1*: mlx5_1 0000:1b:00.0" in text and "not compute fabric: front-end" in text


def test_table_says_nvlink_unknown_without_nvml(probed: dict[str, Assembled]) -> None:
    # hgx-h100-nodriver: same board, NVML missing; the old table printed NODE/SYS between GPUs.
    text = render(probed["hgx-h100-nodriver"])
    gpu0 = next(line for line in text.splitlines() if line.startswith("GPU0 "))
    assert gpu0.split()[1:9] == ["X"] + ["NV?"] * 7
    assert "NV?  = NVLink unknown" in text and "NVLink unknown (no NVML)" in text
    # oci-bm-gpu4 has no NVML either, but its topology file gives the NVLinks.
    oci = render(probed["oci-bm-gpu4"])
    assert next(x for x in oci.splitlines() if x.startswith("GPU0 ")).split()[2] == "NV12"
    # esc8000a: NVML works and the RTX 6000 Ada has no NVLink: PCIe distances stay.
    esc = render(probed["esc8000a-pcie"])
    assert next(x for x in esc.splitlines() if x.startswith("GPU0 ")).split()[2] == "NODE"


def test_summary_says_none_and_unknown_instead_of_zero(
    probed: dict[str, Assembled], snapshots: dict[str, Snapshot]
) -> None:
    # Issue 17 item 15: "largest NVLink island 0 GPUs at 0 GB/s", "at most 0 GPUs per NUMA node".
    esc = summary_line(render(probed["esc8000a-pcie"]))  # NVML works; RTX 6000 Ada has no NVLink
    assert "no NVLink, at most 2 GPUs per NUMA node" in esc and "island" not in esc
    # azure-ndv4 without its topology file: Hyper-V hides every GPU's NUMA node (-1).
    vm = summary_line(render(probe_snapshot(snapshots["azure-ndv4"], use_topo=False)))
    assert "GPUs per NUMA node unknown" in vm and "at most 0" not in vm
    cpu = summary_line(render(probed["cpu-only"]))
    assert cpu.startswith("Summary: 0 GPUs, no NVLink, RDMA no") and "NUMA" not in cpu


def test_an_active_rail_without_gpudirect_rdma_says_so(probed: dict[str, Assembled]) -> None:
    # cpu-only: an ACTIVE InfiniBand port, no nvidia_peermem and no dma-buf on the node. It was
    # "not usable now", as if the port were down.
    text = render(probed["cpu-only"])
    assert "compute fabric, ACTIVE but no GPUDirect RDMA on this node" in text
    assert "not usable now" not in text
    # hgx-roce-degraded: rails whose ports are down are the ones "not usable now".
    roce = render(probed["hgx-roce-degraded"])
    assert roce.count("compute fabric, not usable now (no port ACTIVE)") == 2


def summary_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Summary:"))

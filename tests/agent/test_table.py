"""`probe -o table` for people (issue 7, "What a person reads"): fits 160 columns, marks HCAs that
are not compute fabric, says when NVLink is unknown."""

from __future__ import annotations

from agent.assemble import Assembled
from agent.table import render


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

#!/usr/bin/env python3
"""Build the gather-format fixture hosts in tests/fixtures/hosts/ from ../shared/reference/ dumps.

Each host tree is laid out in the kernel's sysfs ABI from a real machine's published dumps, then
captured with the agent's own gather code (so a fixture holds exactly what the probes read).
Provenance goes into each archive's gather.json. Run: python hack/make_fixtures.py [REFERENCE_DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixture_metal import (  # noqa: E402
    host_cpu_only,
    host_esc8000a,
    host_hgx_h100,
    host_hgx_nodriver,
    host_roce_degraded,
)
from fixture_vms import host_aws_p4d, host_azure_ndv4, host_azure_ndv5, host_oci_bm_gpu4  # noqa: E402

from agent import gather  # noqa: E402
from agent.host import HostReader  # noqa: E402
from agent.nvml import SnapshotNvml  # noqa: E402
from agent.probe import ProbeConfig, probe_node  # noqa: E402
from tests.fakes.sysfs import HostBuilder  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "hosts"
REFERENCE = ROOT.parent / "shared" / "reference"

HOSTS = {
    "hgx-h100": (
        host_hgx_h100,
        "HGX H100 (8x H100 SXM5, 4 NVSwitch, 8x ConnectX-7 NDR IB + "
        "2x ConnectX-6 Dx): PCI tree, NUMA and link status from gpud-fixtures/lspci-vvv; "
        "HCAs from gpud-fixtures/ibstat.47.0.h100.some.down.0 in the attribute formats of "
        "gpud-fixtures/sys-class-infiniband-h100.0 (board_id MT_0000000838); GPUs from "
        "gpud-fixtures/nvidia-smi-query.535.161.08.out.0.valid; CPU lists from "
        "nvidia-smi-topo/ml-engineering-h100-8gpu-topo-m.txt. mlx5 names assigned in PCI "
        "order (matches the CX-7/CX-6 Dx pattern of ibstat).",
    ),
    "hgx-h100-nodriver": (
        host_hgx_nodriver,
        "The hgx-h100 layout with the NVIDIA driver missing "
        "(NVML LibraryNotFound): GPUs must still be found on PCI.",
    ),
    "hgx-roce-degraded": (
        host_roce_degraded,
        "HGX H100 with RoCE: PCI from gpud-fixtures/lspci-vvv, "
        "HCAs from gpud-fixtures/ibstat.47.0.h100.all.active.1 (CX-7 400G "
        "Ethernet); DERIVED: mlx5_10 and mlx5_11 set to DOWN/Polling to model "
        "unplugged cables, and a broken cufile.json.",
    ),
    "esc8000a-pcie": (
        host_esc8000a,
        "ASUS ESC8000A-E12 (2x Genoa), 4x RTX 6000 Ada PCIe, 2x "
        "dual-port ConnectX-7, NVMe behind PLX/HighPoint switches: "
        "stelline-pcie-servers/asus-esc8000a-e12.md (lspci -tv, numactl, topo -m).",
    ),
    "azure-ndv5": (
        host_azure_ndv5,
        "Azure ND H100 v5 VM: GPU and IB bus ids from "
        "azure-nd-topo/ndv5-topo.xml (shipped in the host at /opt/microsoft); Hyper-V "
        "vPCI sysfs layout with hidden NUMA; mlx5_ib* names of the Azure HPC image.",
    ),
    "azure-ndv4": (
        host_azure_ndv4,
        "Azure ND A100 v4 VM: GPU and IB VF bus ids from azure-nd-topo/ndv4-topo.xml (at "
        "/opt/microsoft), NVSwitch bridges and the ConnectX-4 Lx Ethernet VF from "
        "gpud-fixtures/lspci.nn.a100 (same bus ids); Hyper-V vPCI sysfs with hidden NUMA; "
        "8x 200G HDR as Azure documents for NDv4. DERIVED: the Ethernet VF's name mlx5_an0, "
        "its 40 Gb/s rate, firmware strings and GPU UUIDs are assumed.",
    ),
    "oci-bm-gpu4": (
        host_oci_bm_gpu4,
        "OCI BM.GPU4.8 bare metal (8x A100-SXM4-40GB, 6 NVSwitch, 8 dual-port ConnectX-5 Ex "
        "RoCE 100G = 16 RDMA devices, 4-level Broadcom PEX tree, 4 NUMA): PCI tree, NUMA, CPU "
        "masks, HCA names, ports and GUIDs from oci-topo/oke-BM.GPU4.8.xml (an NCCL topology "
        "dump, also shipped at its OKE path); NVML library missing (LibraryNotFound), so NVLink "
        "comes from the file. DERIVED: root complexes, root ports and downstream-port bus ids "
        "(NCCL's XML leaves them out), firmware strings.",
    ),
    "aws-p4d": (
        host_aws_p4d,
        "AWS p4d.24xlarge: 8x A100-SXM4-40GB + 4 EFA; bus ids and switch "
        "layout from aws-ofi-nccl-topo/p4d-24xl-topo.xml (at the aws-ofi-nccl install "
        "path); flat Nitro PCI tree; efa device names rdmap<bus>s<slot>.",
    ),
    "cpu-only": (
        host_cpu_only,
        "CPU-only server: the real sysfs snapshot "
        "hwloc-tests/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2 (mlx4_0 FDR IB, SCIF, Xeon "
        "Phi), no NVIDIA driver.",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hack/make_fixtures.py",
        description="Rebuild the gather-format fixture hosts from the real dumps in the reference "
        "directory (provenance goes into each archive's gather.json).",
    )
    parser.add_argument(
        "reference",
        nargs="?",
        type=Path,
        default=REFERENCE,
        metavar="REFERENCE_DIR",
        help="the shared reference dumps (default: ../shared/reference beside the repository)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        metavar="DIR",
        help=f"where to write the archives (default: {OUT.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(HOSTS),
        metavar="HOST",
        help=f"build only this fixture (repeatable; one of: {', '.join(sorted(HOSTS))})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ref: Path = args.reference
    if not ref.is_dir():
        print(f"make_fixtures: reference directory {ref} not found", file=sys.stderr)
        return 2
    out: Path = args.out
    hosts = {n: HOSTS[n] for n in args.only} if args.only else HOSTS
    out.mkdir(parents=True, exist_ok=True)
    for name, (build, provenance) in hosts.items():
        with tempfile.TemporaryDirectory() as tmp:
            b = HostBuilder(Path(tmp))
            nvml, options = build(b, ref)
            reader = HostReader(tmp, record=True)
            config = ProbeConfig(nccl_topo=options.get("ncclTopo"))  # type: ignore[arg-type]
            probe_node(reader, SnapshotNvml(nvml), config)
            assert reader.recording is not None
            meta = {
                "node": name,
                "nvml": nvml,
                "options": options,
                "provenance": provenance + " Built by hack/make_fixtures.py.",
            }
            count = gather.write(out / f"{name}.tar.gz", reader.recording, meta)
            print(f"{name}: {count} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Build the gather-format fixture hosts in tests/fixtures/hosts/ from ../shared/reference/ dumps.

Each host tree is laid out in the kernel's sysfs ABI from a real machine's published dumps, then
captured with the agent's own gather code (so a fixture holds exactly what the probes read).
Provenance goes into each archive's gather.json. Run: python hack/make_fixtures.py [REFERENCE_DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent import gather  # noqa: E402
from agent.host import HostReader  # noqa: E402
from agent.nvml import NvmlGpu, NvmlInventory, SnapshotNvml  # noqa: E402
from agent.probe import ProbeConfig, probe_node  # noqa: E402
from tests.fakes.sysfs import HostBuilder, Port, ib_guid  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "hosts"
REFERENCE = ROOT.parent / "shared" / "reference"
CUFILE = """{
    // cuFile configuration, trimmed from the GDS default layout (comments kept on purpose)
    "logging": { "dir": "/var/log/cufile", "level": "ERROR" },
    "profile": { "nvtx": false, "cufile_stats": 0 },
    /* NVMe and NVMe-oF go through nvidia-fs; fall back to POSIX when it is not usable */
    "properties": {
        "max_direct_io_size_kb": 16384,
        "max_device_cache_size_kb": 131072,
        "allow_compat_mode": true,
        "use_pci_p2pdma": false,
        "rdma_dev_addr_list": [],
    },
    "fs": { "generic": { "posix_unaligned_writes": false } }
}
"""
from fixture_dumps import (  # noqa: E402
    chain,
    gts,
    h100_inventory,
    hgx_cpus,
    ib_port,
    parse_ibstat,
    parse_lspci,
)
from fixture_vms import host_aws_p4d, host_azure_ndv4, host_azure_ndv5, host_oci_bm_gpu4  # noqa: E402


# --------------------------------------------------------------------------- hosts
def build_hgx(b: HostBuilder, ref: Path, ibstat_file: str, degrade: tuple[str, ...] = ()) -> None:
    devs = parse_lspci((ref / "gpud-fixtures/lspci-vvv").read_text())
    kinds = {
        "NVIDIA Corporation Device 2330": (0x10DE, 0x2330, 0x030200),
        "NVIDIA Corporation Device 22a3": (0x10DE, 0x22A3, 0x068000),
        "[ConnectX-7]": (0x15B3, 0x1021, 0x020000),
        "[ConnectX-6 Dx]": (0x15B3, 0x101D, 0x020000),
        "Non-Volatile memory controller": (0x8086, 0x0B60, 0x010802),
    }
    placed: dict[str, list[str]] = {"[ConnectX-7]": [], "[ConnectX-6 Dx]": [], "nvme": []}
    for bdf, dev in sorted(devs.items()):
        kind = next((k for k in kinds if k in dev.desc), None)
        if kind is None:
            continue
        vendor, device, klass = kinds[kind]
        root, bridges = chain(devs, bdf)
        numa = dev.numa if dev.numa is not None else 0
        b.pci(
            bdf,
            root=root,
            bridges=bridges,
            vendor=vendor,
            device=device,
            klass=klass,
            numa=numa,
            cpulist=hgx_cpus(numa),
            speed=gts(dev.speed),
            width=dev.width,
            max_speed=gts(dev.cap_speed),
            max_width=dev.cap_width,
        )
        if kind in placed:
            placed[kind].append(bdf)
        elif kind.startswith("Non-Volatile"):
            placed["nvme"].append(bdf)
    # mlx5 names follow PCI probe order, which the ibstat CA list (CX-7/CX-6 Dx pattern) matches.
    cas = parse_ibstat((ref / "gpud-fixtures" / ibstat_file).read_text())
    order = sorted(cas, key=lambda n: int(n.split("_")[1]))
    functions = sorted(placed["[ConnectX-7]"] + placed["[ConnectX-6 Dx]"])
    for name, bdf in zip(order, functions, strict=True):
        ca = cas[name]
        port = ib_port(ca)
        if name in degrade:
            port = Port(1, "1: DOWN", "2: Polling", "40 Gb/sec (4X QDR)", port.link_layer)
        cx7 = ca["CA type"] == "MT4129"
        netdevs = (f"ens{int(bdf[5:7], 16)}np0",) if port.link_layer == "Ethernet" else ()
        b.hca(
            name,
            bdf,
            hca_type=ca["CA type"],
            board_id="MT_0000000838" if cx7 else "",
            fw=ca["Firmware version"],
            node_guid=ib_guid(ca["Node GUID"]),
            ports=(port,),
            netdevs=netdevs,
        )
    for i, bdf in enumerate(placed["nvme"]):
        b.nvme(f"nvme{i}", bdf)
    b.module("nvidia_peermem", "535.161.08")
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Wed Feb 14 2024\n",
    )
    b.file("/proc/sys/kernel/osrelease", "5.15.0-105-generic\n")


def nvswitch_buses(b: HostBuilder) -> list[str]:
    return sorted(
        bdf.upper().replace("0000:", "00000000:", 1)
        for bdf in b.paths
        if re.match(r"0000:8[3-6]:00\.0", bdf)
    )


def host_hgx_h100(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    build_hgx(b, ref, "ibstat.47.0.h100.some.down.0")
    b.module("nvidia_fs", "2.17.5")
    b.file(
        "/proc/driver/nvidia-fs/stats",
        "GDS Version: 1.9.1.3 \nNVFS statistics(ver: 4.0)\n"
        "NVFS Driver(version: 2.17.5)\nMellanox PeerDirect Supported: True\n",
    )
    b.file("/etc/cufile.json", CUFILE)
    inv = h100_inventory(
        (ref / "gpud-fixtures/nvidia-smi-query.535.161.08.out.0.valid").read_text(),
        nvswitch_buses(b),
    )
    return {"inventory": inv.to_dict()}, {}


def host_hgx_nodriver(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    build_hgx(b, ref, "ibstat.47.0.h100.some.down.0")
    (b.root / "proc/driver/nvidia/version").unlink()
    return {
        "error": {
            "reason": "LibraryNotFound",
            "message": "nvmlInit failed: NVML Shared Library Not Found",
        }
    }, {}


def host_roce_degraded(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    build_hgx(b, ref, "ibstat.47.0.h100.all.active.1", degrade=("mlx5_10", "mlx5_11"))
    b.file(
        "/etc/cufile.json",
        '{\n  "properties": {\n    "allow_compat_mode": true,\n'
        "    // a stray comma and an unclosed brace: broken on purpose\n    ,\n",
    )
    inv = h100_inventory(
        (ref / "gpud-fixtures/nvidia-smi-query.535.161.08.out.0.valid").read_text(),
        nvswitch_buses(b),
    )
    return {"inventory": inv.to_dict()}, {}


def host_esc8000a(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # lspci -tv of the ASUS ESC8000A-E12 (2x Genoa): one root complex per quadrant, 0000:00-60 on
    # NUMA 0 and 0000:80-e0 on NUMA 1 (numactl --hardware: node 0 cpus 0-31, node 1 32-63).
    cpus = {0: "0-31", 1: "32-63"}
    gpus = [
        ("0000:01:00.0", "pci0000:00", ("0000:00:01.1",), 0),
        ("0000:41:00.0", "pci0000:40", ("0000:40:01.1",), 0),
        ("0000:c1:00.0", "pci0000:c0", ("0000:c0:01.1",), 1),
        ("0000:e1:00.0", "pci0000:e0", ("0000:e0:01.1",), 1),
    ]
    for bdf, root, bridges, numa in gpus:
        b.pci(
            bdf,
            root=root,
            bridges=bridges,
            vendor=0x10DE,
            device=0x26B1,
            klass=0x030000,
            numa=numa,
            cpulist=cpus[numa],
            speed="16.0 GT/s PCIe",
        )
    nics = [
        ("0000:21:00.0", "pci0000:20", ("0000:20:03.1",), 0),
        ("0000:21:00.1", "pci0000:20", ("0000:20:03.1",), 0),
        ("0000:81:00.0", "pci0000:80", ("0000:80:01.1",), 1),
        ("0000:81:00.1", "pci0000:80", ("0000:80:01.1",), 1),
    ]
    for i, (bdf, root, bridges, numa) in enumerate(nics):
        b.pci(
            bdf,
            root=root,
            bridges=bridges,
            vendor=0x15B3,
            device=0x1021,
            klass=0x020000,
            numa=numa,
            cpulist=cpus[numa],
            speed="32.0 GT/s PCIe",
        )
        b.hca(
            f"mlx5_{i}",
            bdf,
            hca_type="MT4129",
            fw="28.43.1014",
            ports=(Port(1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "Ethernet"),),
            netdevs=(f"enp{int(bdf[5:7], 16)}s0f{bdf[-1]}np{bdf[-1]}",),
        )
    nvme = [
        ("0000:02:00.0", "pci0000:00", ("0000:00:05.1",), 0),
        (
            "0000:65:00.0",
            "pci0000:60",
            ("0000:60:01.1", "0000:61:00.0", "0000:62:00.0", "0000:63:00.0", "0000:64:10.0"),
            0,
        ),
        (
            "0000:a5:00.0",
            "pci0000:a0",
            ("0000:a0:01.1", "0000:a1:00.0", "0000:a2:00.0", "0000:a3:00.0", "0000:a4:10.0"),
            1,
        ),
    ]
    for i, (bdf, root, bridges, numa) in enumerate(nvme):
        b.pci(
            bdf,
            root=root,
            bridges=bridges,
            vendor=0x144D,
            device=0xA80A,
            klass=0x010802,
            numa=numa,
            cpulist=cpus[numa],
            speed="16.0 GT/s PCIe",
            width=4,
        )
        b.nvme(f"nvme{i}", bdf)
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.51.03  Release Build\n",
    )
    b.file("/proc/sys/kernel/osrelease", "6.8.0-60-generic\n")
    b.file("/usr/local/cuda/gds/cufile.json", CUFILE)
    inv = NvmlInventory(
        driver_version="575.51.03",
        cuda_driver_version=12090,
        gpus=tuple(
            NvmlGpu(
                index=i,
                uuid=f"GPU-ada6000{i:x}-0000-4000-8000-00000000000{i}",
                name="NVIDIA RTX 6000 Ada Generation",
                pci_bus_id=bdf.upper().replace("0000:", "00000000:", 1),
                memory_total_bytes=49140 * (1 << 20),
                compute_capability=(8, 9),
                mig_mode=None,
                # AD102 has no NVLink: every link query answers NotSupported -> no links.
                links=(),
            )
            for i, (bdf, *_rest) in enumerate(gpus)
        ),
    )
    return {"inventory": inv.to_dict()}, {}


def host_cpu_only(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # The real sysfs snapshot from hwloc's test suite (2-socket E5-2680, mlx4_0 FDR, SCIF, NVMe).
    with (
        tempfile.TemporaryDirectory() as tmp,
        tarfile.open(ref / "hwloc-tests/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2") as tar,
    ):
        tar.extractall(tmp, filter="data")
        src = next(Path(tmp).iterdir())
        shutil.copytree(src / "sys", b.root / "sys", symlinks=True, dirs_exist_ok=True)
    return {
        "error": {"reason": "DriverNotLoaded", "message": "nvmlInit failed: Driver Not Loaded"}
    }, {}


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

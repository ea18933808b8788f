"""Bare-metal fixture hosts for make_fixtures.py (HGX H100 and its variants, an ASUS ESC8000A
PCIe server, a CPU-only server), laid out in sysfs from published lspci, ibstat and nvidia-smi
dumps and hwloc's sysfs snapshot. OCI's bare-metal shape comes from its NCCL topology file, in
fixture_vms.py.
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixture_dumps import (  # noqa: E402
    chain,
    gts,
    h100_inventory,
    hgx_cpus,
    ib_port,
    parse_ibstat,
    parse_lspci,
)

from agent.nvml import NvmlGpu, NvmlInventory  # noqa: E402
from tests.fakes.sysfs import HostBuilder, Port, ib_guid  # noqa: E402

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

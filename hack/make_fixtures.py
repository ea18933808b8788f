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
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent import gather  # noqa: E402
from agent.host import HostReader  # noqa: E402
from agent.nvml import NvmlFabric, NvmlGpu, NvmlInventory, NvmlLink, SnapshotNvml  # noqa: E402
from agent.probe import ProbeConfig, probe_node  # noqa: E402
from agent.probes.nccl_topo import mask_to_cpulist  # noqa: E402
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


# --------------------------------------------------------------------------- lspci -vvv parsing
@dataclass
class LspciDev:
    bdf: str
    desc: str
    numa: int | None = None
    secondary: int | None = None
    primary: int | None = None
    speed: str = ""
    width: int = 0
    cap_speed: str = ""
    cap_width: int = 0


def parse_lspci(text: str) -> dict[str, LspciDev]:
    devs: dict[str, LspciDev] = {}
    cur: LspciDev | None = None
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (.*)$", line)
        if m:
            cur = LspciDev("0000:" + m.group(1), m.group(2))
            devs[cur.bdf] = cur
            continue
        if cur is None:
            continue
        if m := re.search(r"NUMA node: (\d+)", line):
            cur.numa = int(m.group(1))
        elif m := re.search(r"Bus: primary=([0-9a-f]+), secondary=([0-9a-f]+)", line):
            cur.primary, cur.secondary = int(m.group(1), 16), int(m.group(2), 16)
        elif m := re.search(r"LnkCap:.*Speed ([\d.]+)GT/s, Width x(\d+)", line):
            cur.cap_speed, cur.cap_width = m.group(1), int(m.group(2))
        elif m := re.search(r"LnkSta:\s+Speed ([\d.]+)GT/s.*Width x(\d+)", line):
            cur.speed, cur.width = m.group(1), int(m.group(2))
    return devs


def chain(devs: dict[str, LspciDev], bdf: str) -> tuple[str, tuple[str, ...]]:
    """(root complex, bridges from the root port down) for an endpoint."""
    by_secondary = {d.secondary: d for d in devs.values() if d.secondary is not None}
    bridges: list[str] = []
    bus = int(bdf.split(":")[1], 16)
    while bus in by_secondary:
        bridge = by_secondary[bus]
        bridges.insert(0, bridge.bdf)
        bus = int(bridge.bdf.split(":")[1], 16)
    return f"pci0000:{bus:02x}", tuple(bridges)


def gts(speed: str) -> str:
    return f"{float(speed):.1f} GT/s PCIe" if speed else ""


# --------------------------------------------------------------------------- ibstat parsing
def parse_ibstat(text: str) -> dict[str, dict[str, str]]:
    cas: dict[str, dict[str, str]] = {}
    cur: dict[str, str] = {}
    for line in text.splitlines():
        if m := re.match(r"^CA '(.+)'", line):
            cur = cas.setdefault(m.group(1), {})
        elif ":" in line and cur is not None:
            key, _, value = line.strip().partition(":")
            cur.setdefault(key.strip(), value.strip())
    return cas


STATE = {"Active": "4: ACTIVE", "Down": "1: DOWN", "Initializing": "2: INIT"}
PHYS = {"LinkUp": "5: LinkUp", "Disabled": "3: Disabled", "Polling": "2: Polling"}
IB_NAMES = {"InfiniBand": "NDR", "Ethernet": "NDR"}


def ib_port(ca: dict[str, str]) -> Port:
    rate = int(ca["Rate"])
    layer = ca["Link layer"]
    speed = {400: "4X NDR", 200: "4X HDR", 100: "4X EDR", 40: "4X QDR", 25: "1X EDR"}.get(
        rate, "4X"
    )
    return Port(
        1, STATE[ca["State"]], PHYS[ca["Physical state"]], f"{rate} Gb/sec ({speed})", layer
    )


def hgx_cpus(numa: int) -> str:
    # CPU lists of an 8x H100 SXM node (ml-engineering topo -m: NUMA 0 = 0-51,104-155).
    return "0-51,104-155" if numa == 0 else "52-103,156-207"


# --------------------------------------------------------------------------- NVML inventories
def nvswitch_links(n_links: int, version: int, switches: list[str]) -> tuple[NvmlLink, ...]:
    # HGX H100: 18 links over 4 NVSwitches (5+4+4+5); HGX A100: 12 over 6 (2 each).
    if len(switches) == 4 and n_links == 18:
        spread = [5, 4, 4, 5]
    else:
        spread = [n_links // len(switches)] * len(switches)
    links: list[NvmlLink] = []
    for sw, count in zip(switches, spread, strict=True):
        for _ in range(count):
            links.append(NvmlLink(len(links), True, version, "NVSwitch", sw))
    return tuple(links)


def h100_inventory(smi: str, switches: list[str]) -> NvmlInventory:
    uuids = re.findall(r"GPU UUID\s+: (GPU-[0-9a-f-]+)", smi)
    buses = re.findall(r"^GPU (0000[0-9A-F:.]+)", smi, re.M)
    gpus = tuple(
        NvmlGpu(
            index=i,
            uuid=u,
            name="NVIDIA H100 80GB HBM3",
            pci_bus_id=b,
            memory_total_bytes=81559 * (1 << 20),
            compute_capability=(9, 0),
            mig_mode=0,
            links=nvswitch_links(18, 6, switches),
            # nvidia-smi -q: Fabric State Completed, Status Success; single-node HGX has no cluster.
            fabric=NvmlFabric(3, 0, "00000000-0000-0000-0000-000000000000", 0),
        )
        for i, (u, b) in enumerate(zip(uuids, buses, strict=True))
    )
    return NvmlInventory(driver_version="535.161.08", gpus=gpus, cuda_driver_version=12020)


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


def host_azure_ndv5(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # Hyper-V vPCI: every device on its own virtual root under VMBus, NUMA hidden (-1).
    topo = (ref / "azure-nd-topo/ndv5-topo.xml").read_text()
    gpus = re.findall(r'busid="([0-9a-f:.]+)" class="0x0302', topo)
    nics = re.findall(r'busid="([0-9a-f:.]+)" class="0x0207', topo)
    vmbus = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00"
    for i, bdf in enumerate(gpus):
        b.pci(
            bdf,
            root=f"pci{bdf[:4]}:00",
            vendor=0x10DE,
            device=0x2330,
            klass=0x030200,
            numa=-1,
            speed="32.0 GT/s PCIe",
            prefix=f"{vmbus}/0000{bdf[:4]}-0000-3130-3444-{i:012x}",
        )
    for i, bdf in enumerate(nics):
        b.pci(
            bdf,
            root=f"pci{bdf[:4]}:00",
            vendor=0x15B3,
            device=0x101E,
            klass=0x020700,
            numa=-1,
            speed="32.0 GT/s PCIe",
            prefix=f"{vmbus}/0000{bdf[:4]}-0001-3130-3444-{i:012x}",
        )
        b.hca(
            f"mlx5_ib{i}",
            bdf,
            hca_type="MT4126",
            fw="28.39.1002",
            ports=(Port(1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"),),
            netdevs=(f"ib{i}",),
        )
    b.file("/opt/microsoft/ndv5-topo.xml", topo)
    b.module("nvidia_peermem", "550.90.07")
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 2024\n",
    )
    b.file("/proc/sys/kernel/osrelease", "5.15.0-1064-azure\n")
    switches = [f"00000000:{0xA0 + i:02X}:00.0" for i in range(4)]  # NVML's vPCI view of NVSwitch
    inv = NvmlInventory(
        driver_version="550.90.07",
        cuda_driver_version=12040,
        gpus=tuple(
            NvmlGpu(
                index=i,
                uuid=f"GPU-a2be5f00-0000-4000-8000-{i:012x}",
                name="NVIDIA H100 80GB HBM3",
                pci_bus_id=f"0000{bdf.upper()}",
                memory_total_bytes=81559 * (1 << 20),
                compute_capability=(9, 0),
                mig_mode=0,
                links=nvswitch_links(18, 6, switches),
            )
            for i, bdf in enumerate(gpus)
        ),
    )
    return {"inventory": inv.to_dict()}, {"ncclTopo": "/opt/microsoft/ndv5-topo.xml"}


def host_azure_ndv4(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # Hyper-V vPCI like ndv5; lspci.nn.a100 (same bus ids as ndv4-topo.xml) adds the NVSwitch
    # bridges and the accelerated-networking Ethernet VF (ConnectX-4 Lx VF at c941:00:02.0) that
    # the topology file leaves out: the front-end NIC beside eight HDR InfiniBand VFs.
    topo = (ref / "azure-nd-topo/ndv4-topo.xml").read_text()
    lspci = (ref / "gpud-fixtures/lspci.nn.a100").read_text()
    gpus = sorted(re.findall(r'busid="([0-9a-f:.]+)" class="0x0302', topo))
    nics = sorted(re.findall(r'busid="([0-9a-f:.]+)" class="0x0207', topo))
    assert all(bdf in lspci for bdf in gpus + nics), "lspci.nn.a100 and ndv4-topo.xml disagree"
    vmbus = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00"

    def vpci(i: int, bdf: str, vendor: int, device: int, klass: int) -> None:
        b.pci(
            bdf,
            root=f"pci{bdf[:4]}:00",
            vendor=vendor,
            device=device,
            klass=klass,
            numa=-1,
            speed="16.0 GT/s PCIe",
            prefix=f"{vmbus}/0000{bdf[:4]}-00{i:02x}-3130-3444-{i:012x}",
        )

    for i, bdf in enumerate(gpus):
        vpci(i, bdf, 0x10DE, 0x20B2, 0x030200)
    for i, bdf in enumerate(nics):
        vpci(0x10 + i, bdf, 0x15B3, 0x101C, 0x020700)
        b.hca(
            f"mlx5_ib{i}",
            bdf,
            hca_type="MT4124",
            fw="20.31.1014",
            ports=(Port(1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand"),),
            netdevs=(f"ib{i}",),
        )
    eth = re.search(r"^([0-9a-f:.]+) Ethernet controller .*\[15b3:1016\]", lspci, re.M)
    assert eth is not None
    vpci(0x20, eth.group(1), 0x15B3, 0x1016, 0x020000)
    b.hca(
        "mlx5_an0",
        eth.group(1),
        hca_type="MT4118",
        fw="14.30.1224",
        ports=(Port(1, "4: ACTIVE", "5: LinkUp", "40 Gb/sec (4X QDR)", "Ethernet"),),
        netdevs=("enP51521s1",),
    )
    b.file("/opt/microsoft/ndv4-topo.xml", topo)
    b.module("nvidia_peermem", "535.129.03")
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n",
    )
    b.file("/proc/sys/kernel/osrelease", "5.15.0-1053-azure\n")
    switches = sorted(
        f"{d.upper().zfill(8)}:00:00.0"
        for d in re.findall(r"^([0-9a-f]{4}):00:00\.0 Bridge .*\[10de:1af1\]", lspci, re.M)
    )
    for i, bdf in enumerate(re.findall(r"^([0-9a-f:.]+) Bridge .*\[10de:1af1\]", lspci, re.M)):
        vpci(0x30 + i, bdf, 0x10DE, 0x1AF1, 0x068000)
    inv = NvmlInventory(
        driver_version="535.129.03",
        cuda_driver_version=12020,
        gpus=tuple(
            NvmlGpu(
                index=i,
                uuid=f"GPU-a100a4a4-0000-4000-8000-{i:012x}",
                name="NVIDIA A100-SXM4-80GB",
                pci_bus_id=f"0000{bdf.upper()}",
                memory_total_bytes=81920 * (1 << 20),
                compute_capability=(8, 0),
                mig_mode=0,
                links=nvswitch_links(12, 4, switches),
            )
            for i, bdf in enumerate(gpus)
        ),
    )
    return {"inventory": inv.to_dict()}, {"ncclTopo": "/opt/microsoft/ndv4-topo.xml"}


def host_oci_bm_gpu4(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # Bare metal: the sysfs tree is rebuilt from the NCCL dump itself. In NCCL's XML each <pci>
    # bridge is a switch's upstream port (NCCL skips the downstream ports), so each becomes an
    # upstream port plus one downstream port per child, below an invented root port.
    path = "/opt/oci-hpc/topology/BM.GPU4.8.xml"
    text = (ref / "oci-topo/oke-BM.GPU4.8.xml").read_text()
    root = ET.fromstring(text)  # noqa: S314 - a file from ../shared/reference
    gpus: list[str] = []

    def walk(node: ET.Element, numa: int, cpus: str, top: str, base: tuple[str, ...]) -> None:
        """base: sysfs bridges down to `node`, a switch's upstream port."""
        parent = node.get("busid", "")
        for k, child in enumerate(node.findall("pci")):
            busid = child.get("busid", "")
            dsp = f"{parent[:5]}{int(parent[5:7], 16) + 1:02x}:{k:02x}.0"
            klass = int(child.get("class", "0"), 16)
            if (klass >> 8) == 0x0604:
                walk(child, numa, cpus, top, (*base, dsp, busid))
                continue
            vendor, device = int(child.get("vendor", "0"), 16), int(child.get("device", "0"), 16)
            nets = child.findall("nic/net")
            for fn in range(max(1, len(nets))):
                b.pci(
                    f"{busid[:-1]}{fn}",
                    root=top,
                    bridges=(*base, dsp),
                    vendor=vendor,
                    device=device,
                    klass=klass,
                    numa=numa,
                    cpulist=cpus,
                    speed=child.get("link_speed", ""),
                    width=int(child.get("link_width", "16")),
                )
            if klass >> 16 == 0x03:
                gpus.append(busid)
            for net in nets:
                b.hca(
                    net.get("name", ""),
                    f"{busid[:-1]}{int(net.get('port', '1')) - 1}",
                    hca_type="MT4121",  # 15b3:1019, ConnectX-5 Ex
                    fw="16.35.2000",
                    node_guid=ib_guid(net.get("guid", "0")),
                    ports=(Port(1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet"),),
                )

    for cpu in root.iter("cpu"):
        numa = int(cpu.get("numaid", "0"))
        cpus = mask_to_cpulist(cpu.get("affinity", ""))
        for top in cpu.findall("pci"):
            busid = top.get("busid", "")
            bus = int(busid[5:7], 16) - 1
            walk(top, numa, cpus, f"pci0000:{bus:02x}", (f"0000:{bus:02x}:01.1", busid))
    b.file(path, text)
    b.module("nvidia_peermem", "535.104.12")
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.12  Wed Aug 30 2023\n",
    )
    b.file("/proc/sys/kernel/osrelease", "5.15.0-1040-oracle\n")
    assert len(gpus) == 8
    return {
        "error": {
            "reason": "LibraryNotFound",
            "message": "nvmlInit failed: NVML Shared Library Not Found",
        }
    }, {"ncclTopo": path}


def host_aws_p4d(b: HostBuilder, ref: Path) -> tuple[dict[str, object], dict[str, object]]:
    # Nitro VM: devices sit flat on one virtual root per bus; the switch layout is only in the file.
    topo = (ref / "aws-ofi-nccl-topo/p4d-24xl-topo.xml").read_text()
    gpus = re.findall(r'busid="([0-9a-f:.]+)" class="0x030200"', topo)
    nics = re.findall(r'busid="([0-9a-f:.]+)" class="0x020000"', topo)
    for bdf in gpus:
        b.pci(
            bdf,
            root=f"pci0000:{bdf[5:7]}",
            vendor=0x10DE,
            device=0x20B0,
            klass=0x030200,
            numa=0 if bdf[5] in "12" else 1,
            speed="8.0 GT/s PCIe",
        )
    for bdf in nics:
        b.pci(
            bdf,
            root=f"pci0000:{bdf[5:7]}",
            vendor=0x1D0F,
            device=0xEFA0,
            klass=0x020000,
            numa=0 if bdf[5] in "12" else 1,
            speed="8.0 GT/s PCIe",
        )
        bus, slot = int(bdf[5:7], 16), int(bdf[8:10], 16)
        # efa names devices rdmap<bus>s<slot>; it has no hca_type and reports link layer Unknown.
        b.hca(
            f"rdmap{bus}s{slot}",
            bdf,
            fw="0.0.0.0",
            ports=(Port(1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Unknown"),),
            netdevs=(f"eth{nics.index(bdf)}",),
        )
    path = "/opt/amazon/efa/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml"
    b.file(path, topo)
    b.module("nvidia_peermem", "470.57.02")
    b.file(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.57.02  Tue Jul 13 2021\n",
    )
    b.file("/proc/sys/kernel/osrelease", "5.10.50-44.132.amzn2.x86_64\n")
    switches = [f"00000000:{0xC0 + i:02X}:00.0" for i in range(6)]
    inv = NvmlInventory(
        driver_version="470.57.02",
        cuda_driver_version=11040,
        gpus=tuple(
            NvmlGpu(
                index=i,
                uuid=f"GPU-a100e1fa-0000-4000-8000-{i:012x}",
                name="NVIDIA A100-SXM4-40GB",
                pci_bus_id=f"0000{bdf.upper()}",
                memory_total_bytes=40536 * (1 << 20),
                compute_capability=(8, 0),
                mig_mode=0,
                links=nvswitch_links(12, 4, switches),
            )
            for i, bdf in enumerate(gpus)
        ),
    )
    return {"inventory": inv.to_dict()}, {"ncclTopo": path}


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

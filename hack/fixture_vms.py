"""Cloud VM and OCI bare-metal fixture hosts for make_fixtures.py, from vendor NCCL topology files."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixture_dumps import (  # noqa: E402
    nvswitch_links,
)

from agent.nvml import NvmlGpu, NvmlInventory  # noqa: E402
from agent.probes.nccl_topo import mask_to_cpulist  # noqa: E402
from tests.fakes.sysfs import HostBuilder, Port, ib_guid  # noqa: E402


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

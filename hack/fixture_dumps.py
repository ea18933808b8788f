"""Parsers of the published dumps (lspci -vvv, ibstat, nvidia-smi -q) for make_fixtures.py."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.nvml import NvmlFabric, NvmlGpu, NvmlInventory, NvmlLink  # noqa: E402
from tests.fakes.sysfs import Port  # noqa: E402


# --------------------------------------------------------------------------- lspci -vvv parsing
@dataclass
class LspciDev:
    bdf: str
    desc: str
    numa: int | None = None
    secondary: int | None = None
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
            cur.secondary = int(m.group(2), 16)
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

"""Build host trees in the kernel's real sysfs layout (directories, attributes, relative symlinks).

Used by hack/make_fixtures.py to make the gather fixtures and by tests for edge cases.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Port:
    port: int = 1
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = "400 Gb/sec (4X NDR)"
    link_layer: str = "InfiniBand"
    guid: str = ""  # port GUID (sysfs form); IB ports default to the node GUID, as on mlx5


class HostBuilder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, str] = {}  # bdf -> canonical host path

    def file(self, host_path: str, content: str) -> None:
        path = self.root / host_path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)

    def link(self, host_path: str, target_host_path: str) -> None:
        """Relative symlink, as sysfs makes them."""
        path = self.root / host_path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        rel = os.path.relpath(target_host_path, os.path.dirname(host_path))
        if path.is_symlink():
            path.unlink()
        path.symlink_to(rel)

    def pci(
        self,
        bdf: str,
        *,
        root: str,
        bridges: tuple[str, ...] = (),
        vendor: int,
        device: int,
        klass: int,
        numa: int | None = -1,
        cpulist: str = "",
        speed: str = "32.0 GT/s PCIe",
        width: int = 16,
        max_speed: str | None = None,
        max_width: int | None = None,
        prefix: str = "/sys/devices",
    ) -> str:
        base = f"{prefix}/{root}"
        for bridge in bridges:
            base = f"{base}/{bridge}"
            if bridge not in self.paths:
                self.paths[bridge] = base
                self._attrs(base, 0x1000, 0xC030, 0x060400, numa, cpulist, speed, width)
                self.link(f"/sys/bus/pci/devices/{bridge}", base)
        path = f"{base}/{bdf}"
        self.paths[bdf] = path
        self._attrs(path, vendor, device, klass, numa, cpulist, speed, width, max_speed, max_width)
        self.link(f"/sys/bus/pci/devices/{bdf}", path)
        return path

    def _attrs(
        self,
        path: str,
        vendor: int,
        device: int,
        klass: int,
        numa: int | None,
        cpulist: str,
        speed: str,
        width: int,
        max_speed: str | None = None,
        max_width: int | None = None,
    ) -> None:
        self.file(f"{path}/vendor", f"0x{vendor:04x}\n")
        self.file(f"{path}/device", f"0x{device:04x}\n")
        self.file(f"{path}/class", f"0x{klass:06x}\n")
        if numa is not None:
            self.file(f"{path}/numa_node", f"{numa}\n")
        if cpulist:
            self.file(f"{path}/local_cpulist", f"{cpulist}\n")
        if speed:
            self.file(f"{path}/current_link_speed", f"{speed}\n")
            self.file(f"{path}/max_link_speed", f"{max_speed or speed}\n")
            self.file(f"{path}/current_link_width", f"{width}\n")
            self.file(f"{path}/max_link_width", f"{max_width or width}\n")

    def hca(
        self,
        name: str,
        bdf: str,
        *,
        hca_type: str = "",
        board_id: str = "",
        fw: str = "",
        node_guid: str = "",
        ports: tuple[Port, ...] = (Port(),),
        netdevs: tuple[str, ...] = (),
    ) -> None:
        dev = self.paths[bdf]
        base = f"{dev}/infiniband/{name}"
        self.link(f"/sys/class/infiniband/{name}", base)
        self.link(f"{base}/device", dev)
        self.file(f"{base}/node_type", "1: CA\n")
        for attr, value in (
            ("hca_type", hca_type),
            ("board_id", board_id),
            ("fw_ver", fw),
            ("node_guid", node_guid),
        ):
            if value:
                self.file(f"{base}/{attr}", f"{value}\n")
        for p in ports:
            pb = f"{base}/ports/{p.port}"
            self.file(f"{pb}/state", f"{p.state}\n")
            self.file(f"{pb}/phys_state", f"{p.phys_state}\n")
            self.file(f"{pb}/rate", f"{p.rate}\n")
            self.file(f"{pb}/link_layer", f"{p.link_layer}\n")
            guid = p.guid or node_guid
            if p.link_layer == "InfiniBand" and guid:
                self.file(f"{pb}/gids/0", f"fe80:0000:0000:0000:{guid}\n")
        for ifname in netdevs:
            self.file(f"{dev}/net/{ifname}/address", "00:00:00:00:00:00\n")
            self.link(f"/sys/class/net/{ifname}", f"{dev}/net/{ifname}")

    def nvme(self, name: str, bdf: str) -> None:
        dev = self.paths[bdf]
        base = f"{dev}/nvme/{name}"
        self.file(f"{base}/model", "NVMe SSD\n")
        self.link(f"{base}/device", dev)
        self.link(f"/sys/class/nvme/{name}", base)

    def module(self, name: str, version: str | None = None) -> None:
        if version:
            self.file(f"/sys/module/{name}/version", f"{version}\n")
        else:
            (self.root / "sys/module" / name).mkdir(parents=True, exist_ok=True)


def ib_guid(hex_guid: str) -> str:
    """ibstat '0x946dae0300cde72c' -> sysfs node_guid '946d:ae03:00cd:e72c'."""
    digits = hex_guid.lower().removeprefix("0x").rjust(16, "0")
    return ":".join(digits[i : i + 4] for i in range(0, 16, 4))

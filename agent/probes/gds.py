"""GPUDirect Storage: the cufile.json in effect, nvidia-fs, GDS version, NVMe controllers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.host import HostReader
from common.jsonc import JsoncError, loads

# Search order of libcufile (DESIGN.md); CUFILE_ENV_PATH_JSON is prepended when set.
CUFILE_PATHS = ("/etc/cufile.json", "/usr/local/cuda/gds/cufile.json")
NVME_CLASS = "/sys/class/nvme"
_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


@dataclass(frozen=True, slots=True)
class NvmeController:
    name: str
    pci_bus_id: str


@dataclass(frozen=True, slots=True)
class GdsProbe:
    config_path: str  # "" when none was found
    config_error: str  # "" when the config parsed
    allow_compat: bool
    force_compat: bool
    use_p2pdma: bool
    nvidia_fs_version: str
    gds_version: str
    nvme: tuple[NvmeController, ...]


def _prop(config: Any, key: str, default: bool) -> bool:
    props = config.get("properties") if isinstance(config, dict) else None
    value = props.get(key, default) if isinstance(props, dict) else default
    return value if isinstance(value, bool) else default


def _nvidia_fs_version(reader: HostReader) -> str:
    path = "/sys/module/nvidia_fs/version"
    text = reader.read(path)
    if not text:
        path = "/proc/driver/nvidia-fs/version"  # "version: 2.28"
        text = reader.read(path)
    if not text:
        return "loaded" if reader.exists("/sys/module/nvidia_fs") else ""
    match = _VERSION.search(text)
    if match is None:
        reader.note(path, f"no version number: {text[:40]!r}")
        return "loaded"
    return match.group(1)


def _gds_version(reader: HostReader) -> str:
    stats = reader.read("/proc/driver/nvidia-fs/stats") or ""
    for line in stats.splitlines():
        if line.strip().startswith("GDS Version"):
            match = _VERSION.search(line)
            if match:
                return match.group(1)
    return ""


def probe(reader: HostReader, env_config_path: str | None = None) -> GdsProbe:
    candidates = ((env_config_path,) if env_config_path else ()) + CUFILE_PATHS
    config_path, config_error, config = "", "", None
    for path in candidates:
        text = reader.read(path)
        if text is None:
            continue
        config_path = path
        try:
            config = loads(text)
            if not isinstance(config, dict):
                config_error = "top level is not an object"
                config = None
        except JsoncError as err:
            config_error = str(err)
        break
    nvme = []
    for name in reader.listdir(NVME_CLASS):
        bus_id = reader.basename_of_link(f"{NVME_CLASS}/{name}/device") or ""
        if ":" in bus_id:
            nvme.append(NvmeController(name=name, pci_bus_id=bus_id))
        elif reader.exists(f"{NVME_CLASS}/{name}/device"):
            reader.note(f"{NVME_CLASS}/{name}/device", "not a link to a PCI device")
    return GdsProbe(
        config_path=config_path,
        config_error=config_error,
        allow_compat=_prop(config, "allow_compat_mode", True) if config is not None else False,
        force_compat=_prop(config, "force_compat_mode", False) if config is not None else False,
        use_p2pdma=_prop(config, "use_pci_p2pdma", False) if config is not None else False,
        nvidia_fs_version=_nvidia_fs_version(reader),
        gds_version=_gds_version(reader),
        nvme=tuple(nvme),
    )

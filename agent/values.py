"""Host values checked against the format the kernel writes them in.

A file that is missing gives None quietly (optional attributes). A file that is there but does not
read as the kernel writes it also gives None (the value stays unknown) and is noted on the reader,
naming the file, so the probe's condition says the data was odd instead of silently using
something else.
"""

from __future__ import annotations

import re

from agent.host import HostReader

_HEX = re.compile(r"^0x[0-9a-fA-F]{1,8}$")  # pci-sysfs class/vendor/device: "0x%06x"
_INT = re.compile(r"^-?[0-9]{1,9}$")
_CPULIST = re.compile(r"^(?:[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)?$")
# PCI_SPEED strings: "8 GT/s" (kernels <= 5.6), "8.0 GT/s PCIe"; "Unknown" when the link is down.
_SPEED = re.compile(r"^([0-9]+(?:\.[0-9]+)?) GT/s(?: PCIe)?$")
# drivers/infiniband/core/sysfs.c
_PORT_STATE = re.compile(r"^([0-9]+): ([A-Za-z_<>][A-Za-z_ <>]*)$")
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) Gb/sec(?: \([0-9]+X[A-Z ]*\))?$")
_GUID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}$")
_TEXT = re.compile(r"^[\x21-\x7e][\x20-\x7e]{0,127}$")
LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")


def _checked(reader: HostReader, path: str, pattern: re.Pattern[str], what: str) -> str | None:
    text = reader.read(path)
    if text is None:
        return None
    if pattern.match(text):
        return text
    reader.note(path, f"not {what}: {text[:40]!r}")
    return None


def hex_value(reader: HostReader, path: str) -> int | None:
    text = _checked(reader, path, _HEX, "a hex number")
    return None if text is None else int(text, 16)


def int_value(reader: HostReader, path: str, minimum: int = 0) -> int | None:
    text = _checked(reader, path, _INT, "an integer")
    if text is None:
        return None
    value = int(text)
    if value < minimum:
        reader.note(path, f"out of range: {value}")
        return None
    return value


def cpulist(reader: HostReader, path: str) -> str:
    return _checked(reader, path, _CPULIST, "a CPU list") or ""


def only_node(reader: HostReader, path: str) -> int | None:
    """The one id in a kernel node list ("0"), or None for several ("0-1"), none or unreadable."""
    nodes = _checked(reader, path, _CPULIST, "a node list")
    return int(nodes) if nodes and nodes.isdigit() else None


def link_speed(reader: HostReader, path: str) -> str:
    """'32.0 GT/s' (GT/s figure only); "" when unknown."""
    text = reader.read(path)
    if text is None or text.startswith("Unknown"):
        return ""
    match = _SPEED.match(text)
    if match is None:
        reader.note(path, f"not a PCIe link speed: {text[:40]!r}")
        return ""
    return f"{float(match.group(1)):.1f} GT/s"


def port_state(reader: HostReader, path: str) -> str:
    """'4: ACTIVE' -> 'ACTIVE'; missing or malformed -> 'UNKNOWN'."""
    text = _checked(reader, path, _PORT_STATE, "'N: STATE'")
    if text is None:
        return "UNKNOWN"
    return text.partition(":")[2].strip()


def rate_gbps(reader: HostReader, path: str) -> float | None:
    text = _checked(reader, path, _RATE, "'N Gb/sec (..)'")
    return None if text is None else float(text.split()[0])


def guid(reader: HostReader, path: str) -> str:
    return _checked(reader, path, _GUID, "a GUID") or ""


def word(reader: HostReader, path: str, allowed: tuple[str, ...]) -> str | None:
    text = reader.read(path)
    if text is None:
        return None
    if text in allowed:
        return text
    reader.note(path, f"not one of {'|'.join(allowed)}: {text[:40]!r}")
    return None


def text(reader: HostReader, path: str) -> str:
    """A printable identifier (hca_type, board_id, fw_ver); "" when missing or garbled."""
    return _checked(reader, path, _TEXT, "printable text") or ""

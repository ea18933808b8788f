"""Which node owns which HCA GUIDs: from GpuNodeStatus objects, or from a `GUID hostname` map.

Only compute-fabric HCAs take part, so storage and front-end ports do not create false leaves.
A status written before the agent published `computeFabric` counts every HCA with an ACTIVE
InfiniBand port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.wire import from_wire
from webhook.fabric.model import SourceError

NodeGuids = Mapping[str, frozenset[int]]

_MAP_LINE = re.compile(r'^(?:[SHR]-|0x)?([0-9a-fA-F]{1,16})\s+"?([^"\s]+)"?\s*(?:#.*)?$')


def parse_guid(text: object) -> int | None:
    """GUID in any printed form (`0x0008f104...`, `8f104...`, sysfs `0008:f104:0396:0559`)."""
    if not isinstance(text, str):
        return None
    s = text.strip().lower().removeprefix("0x").replace(":", "")
    if not s or len(s) > 16 or not re.fullmatch(r"[0-9a-f]+", s):
        return None
    value = int(s, 16)
    return value or None


def _active_ib(hca: Mapping[str, Any]) -> bool:
    return any(
        str(p.get("state", "")).upper() == "ACTIVE"
        and str(p.get("linkLayer", "InfiniBand")) == "InfiniBand"
        for p in hca.get("ports") or []
        if isinstance(p, Mapping)
    )


@dataclass(frozen=True, slots=True)
class _PortShape:
    guid: str = ""
    state: str = ""
    link_layer: str = ""


@dataclass(frozen=True, slots=True)
class _HcaShape:
    node_guid: str = ""
    compute_fabric: bool = False
    ports: tuple[_PortShape, ...] = ()


@dataclass(frozen=True, slots=True)
class _StatusShape:
    hcas: tuple[_HcaShape, ...] = ()


def check_hcas(status: Mapping[str, Any]) -> None:
    """Raises common.wire.WireError naming the field when the HCAs the join reads have the wrong
    shape (``status_guids`` itself skips what it cannot read, as the labeler must)."""
    from_wire(_StatusShape, status, "status")


def status_guids(status: Mapping[str, Any] | None) -> frozenset[int]:
    """Node and port GUIDs of the node's compute-fabric HCAs."""
    hcas = [h for h in (status or {}).get("hcas") or [] if isinstance(h, Mapping)]
    if any("computeFabric" in h for h in hcas):
        chosen = [h for h in hcas if h.get("computeFabric") is True]
    else:
        chosen = [h for h in hcas if _active_ib(h)]
    guids = set()
    for hca in chosen:
        guids.add(parse_guid(hca.get("nodeGuid")))
        guids.update(parse_guid(p.get("guid")) for p in hca.get("ports") or [])
    guids.discard(None)
    return frozenset(g for g in guids if g is not None)


def from_statuses(
    statuses: Iterable[tuple[str, Mapping[str, Any] | None]],
) -> dict[str, frozenset[int]]:
    return {name: status_guids(status) for name, status in statuses}


def looks_like_map(text: str) -> bool:
    lines = [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    return bool(lines) and all(_MAP_LINE.match(ln) for ln in lines[:20])


def parse_map(text: str) -> dict[str, frozenset[int]]:
    """`H-<guid> host` (PSMN style) or node-name-map `<guid> "host"` lines -> host -> GUIDs."""
    out: dict[str, set[int]] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _MAP_LINE.match(line)
        if not m:
            raise SourceError("expected `GUID hostname`", no, raw)
        out.setdefault(m.group(2), set()).add(int(m.group(1), 16))
    return {k: frozenset(v) for k, v in out.items()}

"""GpuNodeStatus -> the node's Layout, decoding only the fields the webhook decides on.

The summary (the labels) and each GPU's nearest HCAs (the GDR level) are decoded and checked with
the same wire decoder and error messages as the full status; the rest of the status (NVLink peers,
HCA ports, storage, conditions: most of its bytes) is never converted, which keeps ingest of a
20,000-node relist well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.labels import labels_for
from common.model import DISTANCE_ORDER, NearHca, Summary
from common.wire import from_wire
from webhook.fleet.layouts import Layout


@dataclass(frozen=True, slots=True)
class _GpuView:
    nearest_hcas: tuple[NearHca, ...] = ()


@dataclass(frozen=True, slots=True)
class StatusView:
    """The parts of a GpuNodeStatus the webhook reads."""

    gpus: tuple[_GpuView, ...] = ()
    summary: Summary = field(default_factory=Summary)


_STRINGS: dict[str, str] = {}  # label values and HCA names repeat across nodes: keep one copy
STRINGS_KEPT = 65_536  # every value ever seen would stay: past this, start the table again


def _one(text: str) -> str:
    if len(_STRINGS) >= STRINGS_KEPT:
        _STRINGS.clear()  # only sharing is lost: values already handed out stay valid
    return _STRINGS.setdefault(text, text)


_NAMES = {rank: name for name, rank in DISTANCE_ORDER.items()}


def _fast_gdr_level(gpus: Any, usable: set[str]) -> str | None:
    """The worst GPU -> nearest usable HCA distance, read straight from the wire dicts; None when
    anything is not the plain expected shape (the decoder then says what is wrong)."""
    if type(gpus) is not list:
        return None
    worst = -1
    for gpu in gpus:
        if type(gpu) is not dict:
            return None
        near = gpu.get("nearestHcas", [])
        if type(near) is not list:
            return None
        best = len(DISTANCE_ORDER)
        for hca in near:
            if type(hca) is not dict:
                return None
            name, distance = hca.get("name"), hca.get("distance")
            if type(name) is not str or type(distance) is not str or distance not in DISTANCE_ORDER:
                return None
            if name in usable and DISTANCE_ORDER[distance] < best:
                best = DISTANCE_ORDER[distance]
        if best < len(DISTANCE_ORDER) and best > worst:
            worst = best
    return _NAMES.get(worst, "")


def _gdr_level(view: StatusView, usable: set[str]) -> str:
    worst = ""
    for gpu in view.gpus:
        near = [h.distance for h in gpu.nearest_hcas if h.name in usable]
        if near:
            d = min(near, key=DISTANCE_ORDER.__getitem__)
            if not worst or DISTANCE_ORDER[d] > DISTANCE_ORDER[worst]:
                worst = d
    return worst


def layout_of(status: Mapping[str, Any]) -> Layout:
    """Raises common.wire.WireError naming the bad field."""
    level: str | None = None
    if isinstance(status, dict) and isinstance(status.get("summary", {}), dict):
        summary = from_wire(Summary, status.get("summary", {}), "status.summary")
        level = _fast_gdr_level(status.get("gpus", []), set(summary.usable_hcas))
    if level is None:  # the general decoder: the same checks and messages as the full status
        view = from_wire(StatusView, status, "status")
        summary = view.summary
        level = _gdr_level(view, set(summary.usable_hcas))
    labels = {k: _one(v) for k, v in labels_for(summary).items()}
    return Layout.of(labels, map(_one, summary.usable_hcas), level)

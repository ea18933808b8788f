"""A scanned dump's blocks and port lines -> Dump, after the checks ibnet.py makes line by line.

One block per node, each port within its block's declared count and listed once, every cable
listed from both of its ends, at least one port on every switch. Here each check is a sort or a
lookup over all port lines at once; a failed check declines (None), and the line parser then
reads the dump and names the line. Nodes are numbered in block order (the line parser numbers
them by first mention): nothing downstream depends on the numbering.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from webhook.fabric.ibnet import Dump

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]
U8 = NDArray[np.uint8]
_SWITCH = ord("S")


class Blocks:
    """The nodes that have a block, in block order (columns, appended a window at a time)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.descs: list[str] = []
        self.kinds: list[U8] = []
        self.guids: list[U64] = []
        self.declared: list[I64] = []
        self.own_port_guids: list[tuple[I64, U64]] = []  # (node, port GUID) != the node GUID
        self._window: tuple[int, U64] = (0, np.zeros(0, np.uint64))

    @property
    def count(self) -> int:
        return len(self.ids)

    def add(self, ids: list[str], descs: list[str], kinds: U8, guids: U64, nports: I64) -> None:
        """A window's blocks (a second block for a node shows as two with one GUID)."""
        base = len(self.ids)
        self.ids += ids
        self.descs += descs
        self.kinds.append(kinds)
        self.guids.append(guids)
        self.declared.append(nports)
        self._window = (base, guids)

    def port_guids(self, owner: I64, guids: U64) -> None:
        """Port GUIDs printed on a node's own port lines (owners are in the latest window)."""
        base, window = self._window
        differ = guids != window[owner - base]
        self.own_port_guids.append((owner[differ], guids[differ]))


class Cables:
    """Every port line: its block's node, its port, the far end's kind, GUID and port."""

    def __init__(self) -> None:
        self.owner: list[I64] = []
        self.port: list[I64] = []
        self.far_kind: list[U8] = []
        self.far_guid: list[U64] = []
        self.far_port: list[I64] = []
        self.far_port_guids: list[tuple[U64, U64]] = []  # (node GUID, port GUID) that differ

    def add(self, owner: I64, port: I64, kind: U8, guid: U64, far_port: I64) -> None:
        self.owner.append(owner)
        self.port.append(port)
        self.far_kind.append(kind)
        self.far_guid.append(guid)
        self.far_port.append(far_port)

    def far_port_guid(self, guid: U64, port_guid: U64) -> None:
        """Port GUIDs printed for a far end that is not a switch."""
        differ = port_guid != guid
        self.far_port_guids.append((guid[differ], port_guid[differ]))


def _i64(parts: list[I64]) -> I64:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _u64(parts: list[U64]) -> U64:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _u8(parts: list[U8]) -> U8:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def assemble(blocks: Blocks, cables: Cables, generated: str) -> Dump | None:
    """The Dump, or None when a check fails."""
    kind, guid, declared = _u8(blocks.kinds), _u64(blocks.guids), _i64(blocks.declared)
    owner, port, far_port = _i64(cables.owner), _i64(cables.port), _i64(cables.far_port)
    far_kind = _u8(cables.far_kind)
    nodes = len(kind)
    dump = Dump("topology", blocks.ids, blocks.descs, generated=generated, guids=guid.tolist())
    if not nodes:
        return dump
    # A far end is found by its GUID (two blocks with one GUID: the line parser sorts it out).
    order = np.argsort(guid, kind="stable")
    by_guid = guid[order]
    if (by_guid[1:] == by_guid[:-1]).any():
        return None
    far = _lookup(by_guid, order, _u64(cables.far_guid))
    if far is None or (kind[far] != far_kind).any() or (port > declared[owner]).any():
        return None
    if not _paired(owner << 32 | port, far << 32 | far_port):
        return None
    on_switch = kind[owner] == _SWITCH
    to_switch = far_kind == _SWITCH
    switch_lines = np.bincount(owner[on_switch], minlength=nodes)
    switches = np.flatnonzero(kind == _SWITCH)
    if (switch_lines[switches] == 0).any():  # a switch block with no port line: cut short
        return None
    dump.switch_numbers = switches.tolist()
    _switch_links(dump, switches, owner, far, on_switch & to_switch & (far != owner), nodes)
    _hosts(dump, owner, far, on_switch, to_switch)
    if not _port_guids(dump, blocks, cables, by_guid, order):
        return None
    return dump


def _lookup(by_guid: U64, order: I64, guids: U64) -> I64 | None:
    """Node number of each GUID (None: one has no block)."""
    at = np.minimum(np.searchsorted(by_guid, guids), len(by_guid) - 1)
    if not (by_guid[at] == guids).all():
        return None
    found: I64 = order[at]
    return found


def _paired(end: I64, far: I64) -> bool:
    """Every end (node << 32 | port) listed once, and its far end lists it back."""
    if not len(end):
        return True
    order = np.argsort(end, kind="stable")
    ends = end[order]
    if (ends[1:] == ends[:-1]).any():
        return False
    at = np.minimum(np.searchsorted(ends, far), len(ends) - 1)
    return bool(((ends[at] == far) & (far[order[at]] == end)).all())


def _switch_links(
    dump: Dump, switches: I64, owner: I64, far: I64, cable: NDArray[np.bool_], nodes: int
) -> None:
    """Each switch's cabled switches (both ends list a cable: one end's lines suffice)."""
    links: dict[int, set[int]] = {number: set() for number in switches.tolist()}
    ends, fars = owner[cable], far[cable]
    order = np.argsort(ends, kind="stable")
    ends, fars = ends[order], fars[order]
    if len(ends):
        cut = np.flatnonzero(ends[1:] != ends[:-1]) + 1
        firsts = np.concatenate(([0], cut))
        for number, group in zip(ends[firsts].tolist(), np.split(fars, cut), strict=True):
            links[number] = set(group.tolist())
    dump.switch_links = links
    counts = np.bincount(owner[cable], minlength=nodes)
    cabled = np.flatnonzero(counts)
    dump.switch_cables = dict(zip(cabled.tolist(), counts[cabled].tolist(), strict=True))


def _hosts(
    dump: Dump, owner: I64, far: I64, on_switch: NDArray[np.bool_], to: NDArray[np.bool_]
) -> None:
    """CA/router -> the first switch a line in dump order cables it to, and any further ones."""
    mixed = on_switch != to
    host = np.where(on_switch, far, owner)[mixed]
    switch = np.where(on_switch, owner, far)[mixed]
    if not len(host):
        return
    hosts, first = np.unique(host, return_index=True)
    in_order = np.argsort(first, kind="stable")
    dump.host_switch = dict(
        zip(hosts[in_order].tolist(), switch[first[in_order]].tolist(), strict=True)
    )
    first_switch = np.full(int(host.max()) + 1, -1, np.int64)
    first_switch[hosts] = switch[first]
    other = switch != first_switch[host]
    for h, s in zip(host[other].tolist(), switch[other].tolist(), strict=True):
        dump.host_more.setdefault(h, set()).add(s)


def _port_guids(dump: Dump, blocks: Blocks, cables: Cables, by_guid: U64, order: I64) -> bool:
    """Port GUIDs that differ from their node's GUID (the labeler joins on both)."""
    pairs = [(n.tolist(), g.tolist()) for n, g in blocks.own_port_guids]
    for guid, port_guid in cables.far_port_guids:
        far = _lookup(by_guid, order, guid)
        if far is None:
            return False
        pairs.append((far.tolist(), port_guid.tolist()))
    for numbers, guids in pairs:
        for number, port_guid in zip(numbers, guids, strict=True):
            dump.port_guids.setdefault(number, set()).add(port_guid)
    return True

"""A scanned dump's blocks and port lines -> Dump, after the checks reader.py makes line by line.

One block per node, each port within its block's declared count and listed once, every cable
listed from both of its ends, at least one port on every switch. Here each check is a sort or a
lookup over all port lines at once; a failed check declines (None), and the line parser then
reads the dump and names the line. Nodes are numbered in block order (the line parser numbers
them by first mention): nothing downstream depends on the numbering.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.ib.packedtexts import PackedTexts, Words

I64 = NDArray[np.int64]
I32 = NDArray[np.int32]
U64 = NDArray[np.uint64]
U8 = NDArray[np.uint8]
Decode = Callable[[Words], U64]
_SWITCH, _HOST = ord("S"), ord("H")
TABLE_SLACK = 1 << 20  # slots for declared ports beyond 8 a port line before ends are sorted


class Blocks:
    """The nodes that have a block, in block order (columns, appended a window at a time)."""

    def __init__(self, decode: Decode) -> None:
        self.decode = decode
        self.count = 0
        self.descs: list[bytes] = []  # each window's descriptions, each ended by a newline
        self.desc_sizes: list[I64] = []
        self.kinds: list[U8] = []
        self.guids: list[U64] = []
        self.texts: list[Words] = []
        self.declared: list[I64] = []
        self.own_port_guids: list[tuple[I64, U64]] = []  # (node, port GUID) != the node GUID
        self._window: tuple[int, Words] = (0, (np.zeros(0, np.uint64), np.zeros(0, np.uint64)))

    def add(self, kinds: U8, text: Words, nports: I64, descs: bytes, desc_sizes: I64) -> None:
        """A window's blocks (a second block for a node shows as two with one GUID)."""
        base = self.count
        self.count += len(kinds)
        self.descs.append(descs)
        self.desc_sizes.append(desc_sizes)
        self.kinds.append(kinds)
        self.guids.append(self.decode(text))
        self.texts.append(text)
        self.declared.append(nports)
        self._window = (base, text)

    def add_port_guids(self, owner: I64, text: Words) -> None:
        """Port GUIDs printed on a node's own port lines, padded to 16 characters (owners are
        in the latest window): those that differ from the node GUID are kept."""
        base, (hi, lo) = self._window
        at = owner - base
        differ = (text[0] != hi[at]) | (text[1] != lo[at])
        got = (text[0][differ], text[1][differ])
        self.own_port_guids.append((owner[differ], self.decode(got)))


class Cables:
    """Every port line: its block's node, its port, the far end's kind, GUID and port."""

    def __init__(self, decode: Decode) -> None:
        self.decode = decode
        self.owner: list[I32] = []
        self.port: list[I32] = []
        self.far_kind: list[U8] = []
        self.far_text: list[Words] = []
        self.far_port: list[I32] = []
        self.far_port_guids: list[tuple[I64, U64]] = []  # port line, its far end's port GUID
        self.count = 0

    def add(self, owner: I64, port: I64, kind: U8, text: Words, far_port: I64) -> None:
        # 32 bits hold any node number and port: a 65,536-node dump has 2 million port lines.
        self.owner.append(owner.astype(np.int32))
        self.port.append(port.astype(np.int32))
        self.far_kind.append(kind)
        self.far_text.append(text)
        self.far_port.append(far_port.astype(np.int32))
        self.count += len(owner)

    def add_far_port_guids(self, rows: I64, far: Words, text: Words) -> None:
        """Port GUIDs printed for far ends that are not switches (padded to 16 characters), on
        the given rows of the lines added last."""
        differ = (far[0] != text[0]) | (far[1] != text[1])
        got = (text[0][differ], text[1][differ])
        base = self.count - len(self.owner[-1])
        self.far_port_guids.append((base + rows[differ], self.decode(got)))


def _i64(parts: list[I64]) -> I64:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _i32(parts: list[I32]) -> I32:
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _u64(parts: list[U64]) -> U64:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _u8(parts: list[U8]) -> U8:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def assemble(blocks: Blocks, cables: Cables, generated: str) -> Dump | None:
    """The Dump, or None when a check fails. Each window's columns are let go once joined, and
    each step's arrays once used: 2 million port lines are 16 MB per 64-bit column."""
    kind, guid, declared = _u8(blocks.kinds), _u64(blocks.guids), _i64(blocks.declared)
    text = (_u64([t[0] for t in blocks.texts]), _u64([t[1] for t in blocks.texts]))
    texts = PackedTexts(kind, text, b"".join(blocks.descs), _i64(blocks.desc_sizes), guid)
    dump = Dump("topology", generated=generated, texts=texts)
    nodes = len(kind)
    if not nodes:
        return dump
    hosts = np.sort(_mixed(text)[kind == _HOST])
    if (hosts[1:] == hosts[:-1]).any():  # two blocks for one CA: the line parser names them
        return None
    far_kind = _u8(_taken(cables.far_kind))
    far_text = (_u64([t[0] for t in cables.far_text]), _u64([t[1] for t in cables.far_text]))
    cables.far_text.clear()
    owner = _i32(_taken(cables.owner))
    port = _i32(_taken(cables.port))
    if (port > declared[owner]).any():
        return None
    far_port = _i32(_taken(cables.far_port))
    far = _far_ends(kind, text, declared, owner, port, far_kind, far_text, far_port)
    del far_text, port
    if far is None:
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
    _port_guids(dump, blocks, cables, far)
    return dump


def _taken(parts: list[Any]) -> list[Any]:
    """The list's items; the list itself emptied (its arrays go once joined)."""
    got = list(parts)
    parts.clear()
    return got


def _mixed(text: Words) -> U64:
    """One 64-bit key per GUID text (splitmix64's finalizer over the words; a lookup checks
    both words, so a clash only declines)."""
    return _finalized((text[0] * np.uint64(0x9E3779B97F4A7C15)) ^ text[1])


def _finalized(x: U64) -> U64:
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Finder:
    """Node numbers of switches and routers by kind and GUID text: one sorted key array per
    kind (the few thousand switches' keys stay in cache for the millions of lines that name
    one)."""

    def __init__(self, kind: U8, text: Words) -> None:
        self.text = text
        self.by_kind: dict[int, tuple[U64, I64]] = {}
        self.unique = True
        for letter in b"SR":
            numbers = np.flatnonzero(kind == letter)
            key = _mixed((text[0][numbers], text[1][numbers]))
            order = np.argsort(key, kind="stable")
            keys = key[order]
            self.unique &= not (keys[1:] == keys[:-1]).any()
            self.by_kind[letter] = (keys, numbers[order])

    def numbers(self, kind: U8, far: Words) -> I64 | None:
        """Node number of each far end (None: one has no block)."""
        key = _mixed(far)
        found = np.full(len(key), -1, np.int64)
        for letter, (keys, numbers) in self.by_kind.items():
            rows = np.flatnonzero(kind == letter)
            if len(keys):  # else a far end of a kind with no block: stays -1
                at = np.minimum(np.searchsorted(keys, key[rows]), len(keys) - 1)
                found[rows] = numbers[at]
        if (found < 0).any():
            return None
        return found if _spelled(self.text, found, far) else None


def _spelled(text: Words, numbers: I64, printed: Words) -> bool:
    """Whether the nodes' GUIDs are the ones printed."""
    return bool(((text[0][numbers] == printed[0]) & (text[1][numbers] == printed[1])).all())


def _far_ends(
    kind: U8,
    text: Words,
    declared: I64,
    owner: I32,
    port: I32,
    far_kind: U8,
    far_text: Words,
    far_port: I32,
) -> I64 | None:
    """Each port line's far node, every cable checked from both of its ends (ends listed once,
    each listed back). A far switch or router is looked up by its GUID text; a far CA is the
    node of the line that lists the cable from the CA's end: so the half million CAs need no
    lookup of their own (their printed GUIDs are checked)."""
    finder = _Finder(kind, text)
    find = _line_finder(declared, owner, port)
    if not finder.unique or find is None:
        return None
    # A cable between two switches is looked up from one end (the lower GUID's); the other
    # line's far switch is then the owner of the line it lists back, as for a CA.
    lower = (text[0][owner], text[1][owner])
    higher = (far_kind == _SWITCH) & (kind[owner] == _SWITCH)
    higher &= (lower[0] > far_text[0]) | ((lower[0] == far_text[0]) & (lower[1] > far_text[1]))
    del lower
    known = np.flatnonzero((far_kind != _HOST) & ~higher)
    looked = finder.numbers(far_kind[known], (far_text[0][known], far_text[1][known]))
    if looked is None or (far_port[known] > declared[looked]).any():
        return None
    reverse = find(looked, far_port[known])
    del find
    if reverse is None:  # a cable its far end does not list back
        return None
    derived = (far_kind == _HOST) | higher
    return _checked(
        kind, text, owner, port, far_kind, far_text, far_port, known, looked, reverse, derived
    )


def _line_finder(declared: I64, owner: I32, port: I32) -> Callable[[I64, I32], I64 | None] | None:
    """End (node, port) -> the line that lists it (None from it: an end no line lists). None
    when a port is listed twice. Each end has a slot in a table of every declared port (a node's
    ports 0 to its declared count, one node after another); when the counts dwarf the lines,
    the ends are sorted instead."""
    base = np.concatenate(([0], np.cumsum(declared + 1)))
    lines = np.arange(len(owner), dtype=np.int32)
    if base[-1] <= 8 * len(owner) + TABLE_SLACK:
        slot = base[owner] + port
        line_at = np.full(int(base[-1]), -1, np.int32)
        line_at[slot] = lines
        if (line_at[slot] != lines).any():  # two lines took one slot
            return None

        def by_slot(node: I64, at: I32) -> I64 | None:
            found = line_at[base[node] + at].astype(np.int64)
            return None if (found < 0).any() else found

        return by_slot
    end = owner.astype(np.int64) << 32 | port
    order = np.argsort(end, kind="stable")
    if (np.diff(end[order]) == 0).any():
        return None

    def by_sort(node: I64, at: I32) -> I64 | None:
        back = node << 32 | at
        found: I64 = order[np.minimum(np.searchsorted(end, back, sorter=order), len(end) - 1)]
        return found if (end[found] == back).all() else None

    return by_sort


def _checked(
    kind: U8,
    text: Words,
    owner: I32,
    port: I32,
    far_kind: U8,
    far_text: Words,
    far_port: I32,
    known: I64,
    looked: I64,
    reverse: I64,
    derived: NDArray[np.bool_],
) -> I64 | None:
    """Every line's far node, given each known line's far node and the line that lists its
    cable from the far end (`reverse`): a `derived` line's far node is the node of the known
    line it lists back (its printed GUID checked). None when a cable is not listed back as it
    was listed out."""
    far = np.full(len(owner), -1, np.int64)
    far[known] = looked
    back_of = derived[reverse]
    far[reverse[back_of]] = owner[known[back_of]]
    rest = np.flatnonzero(derived)
    if (far < 0).any() or (kind[far[rest]] != far_kind[rest]).any():  # nobody lists it back
        return None
    if not _spelled(text, far[rest], (far_text[0][rest], far_text[1][rest])):
        return None
    # Every cable both ways: each known line's far end lists it back, and that covers each
    # derived line too (it is the far end of exactly one known line).
    back = far[reverse] << 32 | far_port[reverse]
    if not (back == (owner[known].astype(np.int64) << 32 | port[known])).all():
        return None
    return far


def _switch_links(
    dump: Dump, switches: I64, owner: I32, far: I64, cable: NDArray[np.bool_], nodes: int
) -> None:
    """Each switch's cabled switches (both ends list a cable: one end's lines suffice)."""
    links: dict[int, set[int]] = {number: set() for number in switches.tolist()}
    ends, fars = owner[cable], far[cable]
    order = np.argsort(ends, kind="stable")
    ends, fars = ends[order], fars[order]
    if len(ends):
        cut = [0, *(np.flatnonzero(ends[1:] != ends[:-1]) + 1).tolist(), len(ends)]
        owners, peers = ends.tolist(), fars.tolist()
        for a, b in pairwise(cut):
            links[owners[a]] = set(peers[a:b])
    dump.switch_links = links
    counts = np.bincount(owner[cable], minlength=nodes)
    cabled = np.flatnonzero(counts)
    dump.switch_cables = dict(zip(cabled.tolist(), counts[cabled].tolist(), strict=True))


def _hosts(
    dump: Dump, owner: I32, far: I64, on_switch: NDArray[np.bool_], to: NDArray[np.bool_]
) -> None:
    """CA/router -> the first switch a line in dump order cables it to, and any further ones."""
    mixed = on_switch != to
    host = np.where(on_switch, far, owner)[mixed]
    switch = np.where(on_switch, owner, far)[mixed]
    if not len(host):
        return
    hosts, first = np.unique(host, return_index=True)
    in_order = np.argsort(first, kind="stable")
    dump.host_columns = (hosts[in_order], switch[first[in_order]])
    first_switch = np.full(int(host.max()) + 1, -1, np.int64)
    first_switch[hosts] = switch[first]
    other = switch != first_switch[host]
    for h, s in zip(host[other].tolist(), switch[other].tolist(), strict=True):
        dump.host_more.setdefault(h, set()).add(s)


def _port_guids(dump: Dump, blocks: Blocks, cables: Cables, far: I64) -> None:
    """Port GUIDs that differ from their node's GUID (the labeler joins on both)."""
    pairs = [(n.tolist(), g.tolist()) for n, g in blocks.own_port_guids]
    pairs += [(far[rows].tolist(), g.tolist()) for rows, g in cables.far_port_guids]
    for numbers, guids in pairs:
        for number, port_guid in zip(numbers, guids, strict=True):
            dump.port_guids.setdefault(number, set()).add(port_guid)

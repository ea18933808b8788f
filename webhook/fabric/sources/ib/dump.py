"""An ibnetdiscover dump as compact tables indexed by node number (what the fabric derive reads).

Both readers fill it: the line parser (reader.py) and the column-wise scan (columns.py), whose
node ids and descriptions stay packed until something asks for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:  # a scanned dump's columns are NumPy arrays; the line parser's are lists
    import numpy as np
    from numpy.typing import NDArray

Column: TypeAlias = "Sequence[int] | NDArray[np.integer[Any]]"


class NodeTexts(Protocol):
    """A scanned dump's node ids and descriptions, packed."""

    def ids(self) -> list[str]: ...

    def descs(self) -> list[str]: ...

    def id_of(self, number: int) -> str: ...

    def desc_of(self, number: int) -> str: ...

    def ids_of(self, numbers: list[int]) -> list[str]: ...

    def descs_of(self, numbers: list[int]) -> list[str]: ...

    def guids_of(self, numbers: Column) -> Column: ...


@dataclass(frozen=True, slots=True)
class IbNode:
    """One node of the dump, as read back (tests and messages; the derive reads the arrays)."""

    id: str  # S-/H-/R- plus the 16-hex-digit node GUID
    guid: int
    desc: str
    port_guids: frozenset[int] = frozenset()

    @property
    def is_switch(self) -> bool:
        return self.id.startswith("S-")


@dataclass(slots=True)
class Dump:
    """The dump as compact tables indexed by node number (first mention order): a 65,536-node
    8-rail dump has over half a million HCAs, so there is no object or set per HCA."""

    format: str  # "topology" | "ports"
    id_list: list[str] = field(default_factory=list)  # number -> node id (see `ids`)
    desc_list: list[str] = field(default_factory=list)  # number -> NodeDescription ("" if unknown)
    port_guids: dict[int, set[int]] = field(default_factory=dict)  # only GUIDs != the node GUID
    switch_links: dict[int, set[int]] = field(default_factory=dict)  # switch -> cabled switches
    host_first: dict[int, int] = field(default_factory=dict)  # CA/router -> a switch (see below)
    host_more: dict[int, set[int]] = field(default_factory=dict)  # ... and any further ones
    switch_cables: dict[int, int] = field(default_factory=dict)  # switch -> cables to switches
    generated: str = ""
    skipped: list[int] = field(default_factory=list)  # 1-based lines before the header (tool noise)
    numbers: dict[str, int] | None = None  # node id -> its number (see `index`)
    switch_numbers: list[int] | None = None  # the switches, when the reader had them
    texts: NodeTexts | None = None  # a scanned dump's ids and descriptions, made on demand
    # A scanned dump's hosts and the first switch each is cabled to, as two columns (NumPy):
    # `host_switch` is made from them on first use.
    host_columns: tuple[Column, Column] | None = None

    @property
    def host_switch(self) -> dict[int, int]:
        """CA/router -> the first switch it is cabled to (in dump order)."""
        if self.host_columns is not None and not self.host_first:
            hosts, switches = self.host_columns
            self.host_first = dict(zip(list(hosts), list(switches), strict=True))
        return self.host_first

    def hosts(self) -> tuple[Column, Column]:
        """The hosts cabled to a switch and the first switch of each, as columns."""
        if self.host_columns is not None:
            return self.host_columns
        return list(self.host_first), list(self.host_first.values())

    @property
    def ids(self) -> list[str]:
        """Number -> node id (the line parser appends; a scanned dump makes them on first use)."""
        if self.texts is not None and not self.id_list:
            self.id_list = self.texts.ids()
        return self.id_list

    @property
    def descs(self) -> list[str]:
        """Number -> NodeDescription ("" if unknown)."""
        if self.texts is not None and not self.desc_list:
            self.desc_list = self.texts.descs()
        return self.desc_list

    def id_of(self, number: int) -> str:
        """One node's id, without making every id (half a million HCAs)."""
        return self.texts.id_of(number) if self.texts is not None else self.id_list[number]

    def desc_of(self, number: int) -> str:
        return self.texts.desc_of(number) if self.texts is not None else self.desc_list[number]

    def ids_of(self, numbers: list[int]) -> list[str]:
        """Some nodes' ids (the switches: a few thousand of half a million nodes)."""
        if self.texts is not None:
            return self.texts.ids_of(numbers)
        return [self.id_list[n] for n in numbers]

    def descs_of(self, numbers: list[int]) -> list[str]:
        if self.texts is not None:
            return self.texts.descs_of(numbers)
        return [self.desc_list[n] for n in numbers]

    @property
    def index(self) -> dict[str, int]:
        """Node id -> its number: kept up by the line parser, built on first use for a scanned
        dump (whose reader needs no such lookup: half a million strings hashed for nothing)."""
        if self.numbers is None:
            self.numbers = {nid: number for number, nid in enumerate(self.ids)}
        return self.numbers

    def add(self, nid: str, desc: str) -> int:
        number = self.index.get(nid)
        if number is None:
            number = self.index[nid] = len(self.ids)
            self.ids.append(nid)
            self.descs.append(desc)
        elif desc and not self.descs[number]:
            self.descs[number] = desc
        return number

    def link(self, a: int, b: int) -> None:
        """A cable between nodes a and b (switch-switch or host-switch; a loop-back says nothing
        about position, and host-host cables place nobody)."""
        if a == b:
            return
        a_sw, b_sw = self.ids[a][0] == "S", self.ids[b][0] == "S"
        if a_sw and b_sw:
            self.switch_links.setdefault(a, set()).add(b)
            self.switch_links.setdefault(b, set()).add(a)
        elif a_sw:
            self.on_switch(b, a)
        elif b_sw:
            self.on_switch(a, b)

    def on_switch(self, host: int, switch: int) -> None:
        first = self.host_switch.setdefault(host, switch)
        if first != switch:
            self.host_more.setdefault(host, set()).add(switch)

    def guid(self, number: int) -> int:
        if self.texts is not None:
            return int(self.texts.guids_of([number])[0])
        return int(self.id_list[number][2:], 16)

    def guids_of(self, numbers: Column) -> Column:
        """The node GUIDs of `numbers` (one call for half a million HCAs)."""
        if self.texts is not None:
            return self.texts.guids_of(numbers)
        ids = self.ids
        return [int(ids[n][2:], 16) for n in numbers]

    def switches(self) -> list[int]:
        if self.switch_numbers is not None:
            return self.switch_numbers
        return [i for i, nid in enumerate(self.ids) if nid[0] == "S"]

    def switches_of(self, host: int) -> list[int]:
        """The switches a CA or router is cabled to (none: not on any switch)."""
        first = self.host_switch.get(host)
        if first is None:
            return []
        return [first, *sorted(self.host_more.get(host, ()))]

    @property
    def nodes(self) -> dict[str, IbNode]:
        """Every node as an IbNode (built on demand: for tests and small dumps)."""
        return {
            nid: IbNode(nid, self.guid(i), self.descs[i], frozenset(self.port_guids.get(i, ())))
            for i, nid in enumerate(self.ids)
        }

    @property
    def links(self) -> set[tuple[str, str]]:
        """Every cable to a switch once, as an ordered pair of node ids (parallel cables once)."""
        ids = self.ids
        pairs = {(a, b) for a, peers in self.switch_links.items() for b in peers}
        pairs |= {(h, s) for h in self.host_switch for s in self.switches_of(h)}
        return {(min(ids[a], ids[b]), max(ids[a], ids[b])) for a, b in pairs}

    def port_guid(self, number: int, guid_hex: str) -> None:
        guid = int(guid_hex, 16)
        if guid != self.guid(number):
            self.port_guids.setdefault(number, set()).add(guid)

"""Parse `ibnetdiscover` output (topology-file and `-p` ports formats) into a plain graph.

Formats: rdma-core infiniband-diags/ibnetdiscover.c (see shared/notes/fabric_topology.md §1).
Node ids are `S-`/`H-`/`R-` plus the 16-hex-digit GUID, as the dump prints them. Port GUIDs in
parentheses are printed without zero padding, so every GUID is kept as an int.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from webhook.fabric.model import SourceError

_NODE = re.compile(
    r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]{1,16})"\s*(?:#\s*"(.*)"(.*))?$'
)
_PORT = re.compile(
    r"^\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9a-fA-F]{1,16})\))?\s*"
    r'"([SHR])-([0-9a-fA-F]{1,16})"\[(\d+)\](?:\[ext \d+\])?'
    r"(?:\(([0-9a-fA-F]{1,16})\))?\s*(?:#.*)?$"
)
_KEY = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=", re.IGNORECASE)
_GROUPING = re.compile(r"^(Chassis\s|Non-Chassis Nodes|Switch Nodes|Ca Nodes)", re.IGNORECASE)
_PLINE = re.compile(
    r"^(CA|SW|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s+(\S+)\s+(\S+)"
    r"(?:\s+-\s+(CA|SW|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s*\(\s*(.*)\s*\))?\s*(.*)$"
)
_PDESC = re.compile(r"^'(.*?)'\s+-\s+'(.*)'$")
_MANAGED_SWITCH = re.compile(r"^[^;:]+;([^;:]+):[^;:]+$")  # MF0;<hostname>:<model>/U1
_PREFIX = {"SW": "S", "CA": "H", "RT": "R", "Switch": "S", "Ca": "H", "Rt": "R"}


def node_id(prefix: str, guid_hex: str) -> str:
    """`S-`/`H-`/`R-` plus the GUID as 16 lowercase hex digits (the dump's own spelling)."""
    return f"{prefix}-{guid_hex.lower().zfill(16)}"


@dataclass(slots=True)
class IbNode:
    id: str  # S-/H-/R- plus the 16-hex-digit node GUID
    guid: int
    desc: str
    line: int
    port_guids: set[int] = field(default_factory=set)

    @property
    def is_switch(self) -> bool:
        return self.id.startswith("S-")


@dataclass(slots=True)
class Dump:
    format: str  # "topology" | "ports"
    nodes: dict[str, IbNode] = field(default_factory=dict)
    adjacent: dict[str, set[str]] = field(default_factory=dict)  # node id -> cabled node ids
    generated: str = ""
    skipped: list[int] = field(default_factory=list)  # 1-based lines before the header (tool noise)

    def link(self, a: str, b: str) -> None:
        if a != b:  # loop-back cables on one switch say nothing about position
            self.adjacent.setdefault(a, set()).add(b)
            self.adjacent.setdefault(b, set()).add(a)

    @property
    def links(self) -> set[tuple[str, str]]:
        """Every cable once, as an ordered pair of node ids (parallel cables count once)."""
        return {(a, b) for a, peers in self.adjacent.items() for b in peers if a < b}

    def add(self, prefix: str, guid_hex: str, desc: str, line: int) -> IbNode:
        # Inlined node_id for the common 16-digit case: this runs once per port line.
        nid = prefix + "-" + guid_hex.lower() if len(guid_hex) == 16 else node_id(prefix, guid_hex)
        node = self.nodes.get(nid)
        if node is None:
            node = self.nodes[nid] = IbNode(nid, int(guid_hex, 16), desc, line)
        elif desc and not node.desc:
            node.desc = desc
        return node


def switch_name(node: IbNode, unique_descs: set[str]) -> str:
    """Readable name: the managed switch's hostname, a unique one-word description, or the id."""
    desc = node.desc.strip()
    m = _MANAGED_SWITCH.match(desc)
    if m:
        return m.group(1).strip()
    if desc in unique_descs and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", desc):
        return desc
    return node.id


def looks_like(text: str) -> str | None:
    """ "topology" or "ports" when the text reads as ibnetdiscover output, else None."""
    for line in text.splitlines()[:400]:
        s = line.strip()
        if _NODE.match(s) or s.lower().startswith(("switchguid=", "caguid=")):
            return "topology"
        if _PLINE.match(s):
            return "ports"
    return None


def parse(text: str) -> Dump:
    """The graph of the dump; SourceError naming the line for anything it cannot read."""
    kind = looks_like(text)
    if kind is None:
        raise SourceError("not ibnetdiscover output: no Switch/Ca node line and no -p port line")
    dump = _parse_ports(text) if kind == "ports" else _parse_topology(text)
    if not any(n.is_switch for n in dump.nodes.values()):
        raise SourceError(
            "the dump holds no switch (was ibnetdiscover run on a node cabled to the fabric?)"
        )
    return dump


def _parse_topology(text: str) -> Dump:
    dump = Dump("topology")
    current: IbNode | None = None
    started = False
    # For _check_whole: each cable as seen from one end, "<id>[<port>" -> "<peer id>[<its port>"
    # (strings, not tuples: no garbage collector work for the ~200,000 ports of a large fabric).
    cabled: dict[str, str] = {}
    blocks: dict[str, int] = {}  # node id -> its Switch/Ca line
    portless: dict[str, int] = {}  # switches whose block has shown no port line
    declared, fresh = 0, False  # the current block's port count; no port line seen in it yet
    no = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            current = None
            continue
        if line[0] == "[" and current is not None:  # the common case: a port line
            p = _PORT.match(line)
            if p is None:
                raise SourceError("cannot read this port line (truncated?)", no, raw)
            port, own_guid, peer_prefix, peer_guid, peer_port, peer_port_guid = p.groups()
            peer = dump.add(peer_prefix, peer_guid, "", no)
            if own_guid:
                current.port_guids.add(int(own_guid, 16))
            if peer_port_guid:
                peer.port_guids.add(int(peer_port_guid, 16))
            dump.link(current.id, peer.id)
            if fresh:
                portless.pop(current.id, None)
                fresh = False
            seen = len(cabled)
            cabled[current.id + "[" + port] = peer.id + "[" + peer_port
            if len(cabled) == seen or int(port) > declared:
                raise SourceError(
                    _bad_port(current.id, port, declared, len(cabled) == seen), no, raw
                )
            continue
        if line.startswith("#"):
            started = True
            m = re.search(r"generated (?:\S+ )*?on (.+)$", line)
            if m and not dump.generated:
                dump.generated = m.group(1).strip()
            continue
        if _KEY.match(line) or _GROUPING.match(line):
            started = True
            continue
        m = _NODE.match(line)
        if m:
            started = True
            kind, nports, prefix, guid, desc, _rest = m.groups()
            if _PREFIX[kind] != prefix:
                raise SourceError(f"{kind} line with a {prefix}- id", no, raw)
            current = dump.add(prefix, guid, desc or "", no)
            if current.id in blocks:
                first = blocks[current.id]
                raise SourceError(f"second block for {current.id} (first at line {first})", no, raw)
            blocks[current.id] = no
            declared, fresh = int(nports), True
            if prefix == "S":
                portless[current.id] = no
            continue
        if not started:
            dump.skipped.append(no)  # tool messages before the header (timeouts, warnings)
            continue
        if _PORT.match(line):
            raise SourceError("port line outside a Switch/Ca block", no, raw)
        raise SourceError("cannot read this line as ibnetdiscover output (truncated?)", no, raw)
    _check_whole(text, cabled, blocks, portless, no)
    return dump


def _bad_port(node: str, port: str, declared: int, twice: bool) -> str:
    if twice:
        return f"{node} lists port [{port}] twice"
    return f"{node} port [{port}] is past the {declared} ports its Switch/Ca line declares"


def _check_whole(
    text: str, cabled: dict[str, str], blocks: dict[str, int], portless: dict[str, int], last: int
) -> None:
    """ibnetdiscover prints a block for every node it found, and every cable from both of its
    ends (its links are recorded both ways). A port line whose far end has no block, or whose far
    end's block does not list the cable back, or a switch block with no port at all, means the
    dump was cut short (or edited): its leaves would lose nodes and the pairs and quads after them
    would shift, so it is refused, naming the line."""
    ends = f"it ends at line {last}"
    for end, far in cabled.items():
        if cabled.get(far) == end:
            continue
        node, port = end.split("[")
        peer, peer_port = far.split("[")
        if peer not in blocks:
            problem = f"{peer} has no block in the dump"
        else:
            problem = f"{peer}'s block (line {blocks[peer]}) does not list port [{peer_port}] back"
        raise SourceError(
            f"{node} port [{port}] is cabled to {far}], but {problem}: the dump is cut short "
            f"({ends}) or was edited",
            _line_of(text, node, port),
        )
    if portless:
        node, no = next(iter(portless.items()))
        raise SourceError(
            f"{node}'s Switch block lists no port: the dump is cut short ({ends}) or was edited", no
        )


def _line_of(text: str, node: str, port: str) -> int | None:
    """The line of `node`'s block that lists `port` (only when reporting a problem)."""
    inside = False
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _NODE.match(line)
        if m:
            inside = node_id(_PREFIX[m.group(1)], m.group(4)) == node
        elif inside and line.startswith(f"[{port}]"):
            return no
    return None


def _parse_ports(text: str) -> Dump:
    dump = Dump("ports")
    started = False
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _PLINE.match(line)
        if not m:
            if not started:
                dump.skipped.append(no)
                continue
            raise SourceError("cannot read this line as an `ibnetdiscover -p` port line", no, raw)
        started = True
        kind, _lid, _port, guid, _w, _s, pkind, _plid, _pport, pguid, descs, tail = m.groups()
        if not pkind and tail.startswith("-"):  # "... 4x EDR - SW 1719" and no more
            raise SourceError("port line cut short: its far end is incomplete", no, raw)
        own_desc, peer_desc = _descs(descs, tail)
        # -p prints port GUIDs; a switch's port 0 GUID is its node GUID.
        own = dump.add(_PREFIX[kind], guid, own_desc, no)
        own.port_guids.add(int(guid, 16))
        if pkind and pguid:
            peer = dump.add(_PREFIX[pkind], pguid, peer_desc, no)
            peer.port_guids.add(int(pguid, 16))
            dump.link(own.id, peer.id)
    return dump


def _descs(descs: str | None, tail: str) -> tuple[str, str]:
    if descs:
        m = _PDESC.match(descs.strip())
        if m:
            return m.group(1).strip(), m.group(2).strip()
        return descs.strip().strip("'"), ""
    return tail.strip().strip("'").strip(), ""

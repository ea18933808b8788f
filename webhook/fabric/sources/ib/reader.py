"""Parse `ibnetdiscover` output (topology-file and `-p` ports formats) into a plain graph.

Formats: rdma-core infiniband-diags/ibnetdiscover.c (see shared/notes/fabric_topology.md §1).
Node ids are `S-`/`H-`/`R-` plus the 16-hex-digit GUID, as the dump prints them. Port GUIDs in
parentheses are printed without zero padding, so every GUID is kept as an int.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from webhook.fabric.model import SourceError
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.textchunks import Chunks, chunked, head, lines, split

_log = logging.getLogger(__name__)
_NODE = re.compile(
    r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]{1,16})"\s*(?:#\s*"(.*)"(.*))?$'
)
_PORT = re.compile(  # port numbers of up to 9 digits: a cable end is node << 32 | port
    r"^\[(\d{1,9})\](?:\[ext \d+\])?(?:\(([0-9a-fA-F]{1,16})\))?\s*"
    r'"([SHR])-([0-9a-fA-F]{1,16})"\[(\d{1,9})\](?:\[ext \d+\])?'
    r"(?:\s*\(([0-9a-fA-F]{1,16})\))?\s*(?:#|$)"  # a comment may follow: not scanned
)
_KEY = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=", re.IGNORECASE)
_GROUPING = re.compile(r"^(Chassis\s|Non-Chassis Nodes|Switch Nodes|Ca Nodes)", re.IGNORECASE)
_PLINE = re.compile(
    r"^(CA|SW|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s+(\S+)\s+(\S+)"
    r"(?:\s+-\s+(CA|SW|RT)\s+(\d+)\s+(\d+)\s+0x([0-9a-fA-F]{1,16})\s*\(\s*(.*)\s*\))?\s*(.*)$"
)
_PDESC = re.compile(r"^'(.*?)'\s+-\s+'(.*)'$")
_MANAGED_SWITCH = re.compile(r"^[^;:]+;([^;:]+):[^;:]+$")  # MF0;<hostname>:<model>/U1
_KEYS = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid=")
_PREFIX = {"SW": "S", "CA": "H", "RT": "R", "Switch": "S", "Ca": "H", "Rt": "R"}


def node_id(prefix: str, guid_hex: str) -> str:
    """`S-`/`H-`/`R-` plus the GUID as 16 lowercase hex digits (the dump's own spelling)."""
    return f"{prefix}-{guid_hex.lower().zfill(16)}"


def switch_name(nid: str, desc: str, unique_descs: set[str]) -> str:
    """Readable name: the managed switch's hostname, a unique one-word description, or the id."""
    desc = desc.strip()
    m = _MANAGED_SWITCH.match(desc)
    if m:
        return m.group(1).strip()
    if desc in unique_descs and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", desc):
        return desc
    return nid


def looks_like(text: str) -> str | None:
    """ "topology" or "ports" when the text reads as ibnetdiscover output, else None."""
    for line in split(text[:200_000])[:400]:
        s = line.strip()
        if _NODE.match(s) or s.lower().startswith(("switchguid=", "caguid=")):
            return "topology"
        if _PLINE.match(s):
            return "ports"
    return None


def parse(text: str | Chunks, on_fallback: Callable[[str], None] | None = None) -> Dump:
    """The graph of the dump; SourceError naming the line for anything it cannot read.
    `on_fallback(why)` is told when the dump is read line by line instead of column-wise (~5x the
    CPU): "declined" (not ibnetdiscover's own layout: `-g`, spaces for tabs, tool messages) or
    "failed" (a fault in the column-wise reader, logged with its traceback)."""
    src = chunked(text, 4 << 20)  # a text in pieces the size of the scan's windows
    kind = looks_like(head(src))
    if kind is None:
        raise SourceError("not ibnetdiscover output: no Switch/Ca node line and no -p port line")
    if kind == "ports":
        dump = _parse_ports(src)
    else:
        from webhook.fabric.sources.ib import columns  # NumPy: only where a dump is read

        # ibnetdiscover's own layout, read column-wise; anything else (or a problem to name)
        # goes through the line parser.
        why = "declined"
        try:
            scanned = columns.scan(src)
        except Exception:  # noqa: BLE001 - a fault in the fast path must not cost the labels
            _log.exception("the column-wise dump reader failed; reading the dump line by line")
            scanned, why = None, "failed"
        if scanned is None and on_fallback is not None:
            on_fallback(why)
        dump = scanned or _parse_topology(src)
    if not dump.switches():
        raise SourceError(
            "the dump holds no switch (was ibnetdiscover run on a node cabled to the fabric?)"
        )
    return dump


def _node_id(prefix: str, guid_hex: str) -> str:
    # Inlined for the common 16-digit case: this runs once per port line.
    return prefix + "-" + guid_hex.lower() if len(guid_hex) == 16 else node_id(prefix, guid_hex)


def _parse_topology(text: Chunks) -> Dump:
    dump = Dump("topology")
    index, ids, add, cables = dump.index, dump.ids, dump.add, dump.switch_cables
    switch_links, host_switch = dump.switch_links, dump.host_switch
    current = -1  # the node whose block this is (-1: none)
    current_id, current_hex, current_switch = "", "", False
    started = False
    # For _check_whole: each cable end, node number << 32 | port, seen from one end only -> the
    # far end it names; the other end's line removes it (ints: no string per port).
    pending: dict[int, int] = {}
    # Node number -> 1 once its Switch/Ca line was read (a byte each: the line is looked up again
    # only for a message).
    blocks = bytearray()
    portless: dict[int, int] = {}  # switches whose block has shown no port line
    declared = 0  # the current block's port count
    listed: set[int] = set()  # the current block's ports so far
    port_match = _PORT.match
    no = 0
    for chunk in text():
        for raw in split(chunk):
            no += 1
            line = raw.strip()
            if not line:
                current = -1
                continue
            if line[0] == "[" and current >= 0:  # the common case: a port line
                p = port_match(line)
                if p is None:
                    raise SourceError("cannot read this port line (truncated?)", no, raw)
                port_s, own_guid, peer_prefix, peer_guid, peer_port, peer_port_guid = p.groups()
                if len(peer_guid) == 16:
                    peer_id = peer_prefix + "-" + peer_guid.lower()
                else:
                    peer_id = node_id(peer_prefix, peer_guid)
                peer = index.get(peer_id)
                if peer is None:
                    peer = add(peer_id, "")
                # Port GUIDs are mostly the node GUID as printed: compare the text first.
                if own_guid and own_guid != current_hex:
                    dump.port_guid(current, own_guid)
                if peer_port_guid and peer_port_guid != peer_guid:
                    dump.port_guid(peer, peer_port_guid)
                port = int(port_s)
                if port in listed or port > declared:
                    twice = port in listed
                    raise SourceError(_bad_port(current_id, port_s, declared, twice), no, raw)
                if not listed and current_switch:
                    portless.pop(current, None)
                listed.add(port)
                if peer != current:
                    if peer_prefix != "S":
                        if current_switch and host_switch.setdefault(peer, current) != current:
                            dump.on_switch(peer, current)
                    elif current_switch:
                        cables[current] = cables.get(current, 0) + 1
                        switch_links[current].add(peer)
                        if peer in switch_links:
                            switch_links[peer].add(current)
                        else:
                            switch_links[peer] = {current}
                    elif host_switch.setdefault(current, peer) != peer:
                        dump.on_switch(current, peer)
                end, far = current << 32 | port, peer << 32 | int(peer_port)
                if pending.get(far) == end:
                    del pending[far]
                elif far != end:
                    pending[end] = far
                continue
            if line[0] == "#":
                started = True
                m = re.search(r"generated (?:\S+ )*?on (.+)$", line)
                if m and not dump.generated:
                    dump.generated = m.group(1).strip()
                continue
            if line.startswith(_KEYS):
                started = True
                continue
            m = _NODE.match(line)  # before the rarer key spellings: no line is both
            if m is None and (_KEY.match(line) or _GROUPING.match(line)):
                started = True
                continue
            if m:
                started = True
                kind, nports, prefix, guid, desc, _rest = m.groups()
                if _PREFIX[kind] != prefix:
                    raise SourceError(f"{kind} line with a {prefix}- id", no, raw)
                current_id = _node_id(prefix, guid)
                current = add(current_id, desc or "")
                current_id = ids[current]
                current_hex = guid
                if current < len(blocks) and blocks[current]:
                    first = _block_line(text, current_id)
                    msg = f"second block for {current_id} (first at line {first})"
                    raise SourceError(msg, no, raw)
                if current >= len(blocks):
                    blocks.extend(bytes(len(ids) - len(blocks)))
                blocks[current] = 1
                declared = int(nports)
                listed.clear()  # one set for every block: no allocation per HCA
                current_switch = prefix == "S"
                if current_switch:
                    portless[current] = no
                    switch_links.setdefault(current, set())
                continue
            if not started:
                dump.skipped.append(no)  # tool messages before the header (timeouts, warnings)
                continue
            if _PORT.match(line):
                raise SourceError("port line outside a Switch/Ca block", no, raw)
            raise SourceError("cannot read this line as ibnetdiscover output (truncated?)", no, raw)
    _check_whole(text, dump, pending, blocks, portless, no)
    return dump


def _bad_port(node: str, port: str, declared: int, twice: bool) -> str:
    if twice:
        return f"{node} lists port [{port}] twice"
    return f"{node} port [{port}] is past the {declared} ports its Switch/Ca line declares"


def _check_whole(
    text: Chunks,
    dump: Dump,
    pending: dict[int, int],
    blocks: bytearray,
    portless: dict[int, int],
    last: int,
) -> None:
    """ibnetdiscover prints a block for every node it found, and every cable from both of its
    ends (its links are recorded both ways). A port line whose far end has no block, or whose far
    end's block does not list the cable back, or a switch block with no port at all, means the
    dump was cut short (or edited): its leaves would lose nodes and the pairs and quads after them
    would shift, so it is refused, naming the line."""
    ends = f"it ends at line {last}"
    for end, far in pending.items():
        node, port = dump.ids[end >> 32], str(end & 0xFFFFFFFF)
        peer, peer_port = dump.ids[far >> 32], str(far & 0xFFFFFFFF)
        if far >> 32 >= len(blocks) or not blocks[far >> 32]:
            problem = f"{peer} has no block in the dump"
        else:
            problem = (
                f"{peer}'s block (line {_block_line(text, peer)}) does not list port "
                f"[{peer_port}] back"
            )
        raise SourceError(
            f"{node} port [{port}] is cabled to {peer}[{peer_port}], but {problem}: the dump is "
            f"cut short ({ends}) or was edited",
            _line_of(text, node, port),
        )
    if portless:
        number, no = next(iter(portless.items()))
        raise SourceError(
            f"{dump.ids[number]}'s Switch block lists no port: the dump is cut short ({ends}) or "
            "was edited",
            no,
        )


def _block_line(text: Chunks, node: str) -> int | None:
    """The line of `node`'s first Switch/Ca line (only when reporting a problem)."""
    for no, raw in enumerate(lines(text), 1):
        m = _NODE.match(raw.strip())
        if m and node_id(_PREFIX[m.group(1)], m.group(4)) == node:
            return no
    return None


def _line_of(text: Chunks, node: str, port: str) -> int | None:
    """The line of `node`'s block that lists `port` (only when reporting a problem)."""
    inside = False
    for no, raw in enumerate(lines(text), 1):
        line = raw.strip()
        m = _NODE.match(line)
        if m:
            inside = node_id(_PREFIX[m.group(1)], m.group(4)) == node
        elif inside and line.startswith(f"[{port}]"):
            return no
    return None


def _parse_ports(text: Chunks) -> Dump:
    dump = Dump("ports")
    started = False
    for no, raw in enumerate(lines(text), 1):
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
        own = dump.add(_node_id(_PREFIX[kind], guid), own_desc)
        if pkind and pguid:
            peer = dump.add(_node_id(_PREFIX[pkind], pguid), peer_desc)
            if kind == "SW" and pkind == "SW" and peer != own:
                dump.switch_cables[own] = dump.switch_cables.get(own, 0) + 1
            dump.link(own, peer)
    return dump


def _descs(descs: str | None, tail: str) -> tuple[str, str]:
    if descs:
        m = _PDESC.match(descs.strip())
        if m:
            return m.group(1).strip(), m.group(2).strip()
        return descs.strip().strip("'"), ""
    return tail.strip().strip("'").strip(), ""

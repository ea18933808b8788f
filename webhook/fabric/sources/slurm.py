"""Slurm topology.conf (tree and block plugins) and topology.yaml -> Fabric.

Sources: slurm doc/man/man5/topology.conf.5, topology.yaml.5, src/plugins/topology/block (see
shared/notes/fabric_topology.md §4). Keys are case-insensitive, `#` starts a comment, node and
switch lists are hostlist expressions. Block adjacency is file order, exactly as Slurm aligns it:
base blocks i and j share a level-L block when i>>L == j>>L; empty blocks are placeholder slots.
The levels come from `BlockSizes` (24.05 and later) or, in a 23.11 file, `BlockLevels`: level
numbers, level L aggregating 2^L blocks of the one block size (23.11
src/plugins/topology/block/topology_block.c `_read_topo_file`, read by `bit_unfmt`: "0-2,4").
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.fabric.model import Fabric, Leaf, SourceError, Spine
from webhook.fabric.names import expand_hostlist
from webhook.fabric.sources.build import first_claim, load_yaml, spines_from_parents, yaml_hostlist

_RECORD_KEYS = {
    "switchname": {"switchname", "nodes", "switches", "linkspeed"},
    "blockname": {"blockname", "nodes"},
    "blocksizes": {"blocksizes"},
    "blocklevels": {"blocklevels"},
}
_DEFAULT_BLOCK_LEVELS = 4  # Slurm's default BlockSizes: base x 1, 2, 4, 8, 16
_MAX_BLOCK_LEVEL = 15  # 23.11 `bit_alloc(16)` for BlockLevels


@dataclass(frozen=True, slots=True)
class _Switch:
    name: str
    nodes: tuple[str, ...]
    children: tuple[str, ...]
    line: int


def looks_like_conf(text: str) -> bool:
    return bool(
        re.search(
            r"^\s*(switchname|blockname|blocksizes|blocklevels|ringname)\s*=",
            text,
            re.IGNORECASE | re.MULTILINE,
        )
    )


def _hostlist(expr: str, no: int, raw: str) -> tuple[str, ...]:
    try:
        return tuple(expand_hostlist(expr))
    except ValueError as err:
        raise SourceError(str(err), no, raw) from None


def _records(text: str) -> list[tuple[int, str, dict[str, str]]]:
    out = []
    lines = text.splitlines()
    no = 0
    while no < len(lines):
        start, line = no + 1, lines[no].split("#", 1)[0]
        while line.rstrip().endswith("\\") and no + 1 < len(lines):  # continued line
            no += 1
            line = line.rstrip()[:-1] + " " + lines[no].split("#", 1)[0]
        no += 1
        if not line.strip():
            continue
        fields: dict[str, str] = {}
        for word in line.split():
            key, sep, value = word.partition("=")
            if not sep or not key:
                raise SourceError(f"expected Key=Value, got {word!r}", start, lines[start - 1])
            fields[key.lower()] = value
        kind = line.split("=", 1)[0].strip().lower()
        if kind == "ringname":
            raise SourceError(
                "ring topologies have no leaves or spines; gpufabric reads the tree and block "
                "plugins",
                start,
                lines[start - 1],
            )
        allowed = _RECORD_KEYS.get(kind)
        if allowed is None:
            raise SourceError(f"unknown topology.conf record {kind!r}", start, lines[start - 1])
        unknown = sorted(set(fields) - allowed)
        if unknown:
            raise SourceError(f"unknown key {unknown[0]!r} for {kind}", start, lines[start - 1])
        out.append((start, kind, fields))
    return out


def parse_conf(text: str) -> Fabric:
    records = _records(text)
    kinds = {kind for _, kind, _ in records}
    if not records:
        raise SourceError("no SwitchName= or BlockName= line in topology.conf")
    if "switchname" in kinds and kinds & {"blockname", "blocksizes", "blocklevels"}:
        raise SourceError("topology.conf mixes tree (SwitchName) and block (BlockName) lines")
    lines = text.splitlines()
    if "switchname" in kinds:
        switches = []
        for no, _, f in records:
            raw = lines[no - 1]
            switches.append(
                _Switch(
                    f["switchname"],
                    _hostlist(f.get("nodes", ""), no, raw),
                    _hostlist(f.get("switches", ""), no, raw),
                    no,
                )
            )
        _once((s.name, f"line {s.line}") for s in switches)
        return tree_fabric("topology.conf", switches)
    if {"blocksizes", "blocklevels"} <= kinds:
        raise SourceError("topology.conf has both BlockSizes (24.05+) and BlockLevels (23.11)")
    blocks: list[tuple[str, tuple[str, ...], int]] = []
    sizes: list[int] = []
    top: int | None = None
    for no, kind, f in records:
        raw = lines[no - 1]
        if kind == "blocklevels":
            top = max(_block_levels(f["blocklevels"], no, raw))
        elif kind == "blocksizes":
            try:
                sizes = [int(x) for x in f["blocksizes"].split(",") if x.strip()]
            except ValueError:
                raise SourceError("BlockSizes must be a comma list of integers", no, raw) from None
            _check_sizes(sizes, no, raw)
        else:
            blocks.append((f["blockname"], _hostlist(f.get("nodes", ""), no, raw), no))
    return block_fabric("topology.conf", blocks, sizes, top)


def _once(switches: Iterable[tuple[str, str]]) -> None:
    """SourceError when a switch name repeats: taking either entry would drop the other's nodes
    without a word."""
    first: dict[str, str] = {}
    for name, where in switches:
        if (before := first.setdefault(name, where)) != where:
            raise SourceError(f"switch {name} is defined twice ({before} and {where})")


def _block_levels(value: str, no: int, raw: str) -> list[int]:
    """23.11's BlockLevels: level numbers and ranges ("0,1,2", "0-4"), each 0-15."""
    levels: list[int] = []
    for part in value.split(","):
        found = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not found or int(found[1]) > int(found[2] or found[1]):
            raise SourceError("BlockLevels must be a comma list of levels (0-15)", no, raw)
        levels.extend(range(int(found[1]), int(found[2] or found[1]) + 1))
    if max(levels) > _MAX_BLOCK_LEVEL:
        raise SourceError(f"block level {max(levels)} is over {_MAX_BLOCK_LEVEL}", no, raw)
    return levels


def _check_sizes(sizes: Sequence[int], no: int | None, raw: str) -> None:
    if not sizes or sizes[0] <= 0:
        raise SourceError("BlockSizes needs a positive base block size", no, raw)
    for s in sizes[1:]:
        ratio = s / sizes[0]
        if ratio < 1 or not ratio.is_integer() or (int(ratio) & (int(ratio) - 1)) or ratio > 2**15:
            raise SourceError(f"block size {s} is not the base size {sizes[0]} times 2^k", no, raw)


def tree_fabric(source: str, switches: Sequence[_Switch]) -> Fabric:
    names = {s.name for s in switches}
    parents: dict[str, set[str]] = defaultdict(set)
    problems = []
    for s in switches:
        for child in s.children:
            if child not in names:
                problems.append(f"switch {s.name} (line {s.line}) lists unknown switch {child}")
            parents[child].add(s.name)
    placed, unplaced, dup_problems = first_claim(
        (n, s.name, f"line {s.line}") for s in switches for n in s.nodes
    )
    leaves = [
        Leaf(s.name, (s.name,), tuple(n for n in s.nodes if placed.get(n) == s.name))
        for s in switches
        if s.nodes
    ]
    return Fabric(
        source,
        spines_from_parents(leaves, parents),
        tuple(unplaced),
        tuple(problems + dup_problems),
    )


def block_fabric(
    source: str,
    blocks: Sequence[tuple[str, tuple[str, ...], int]],
    sizes: Sequence[int],
    top: int | None = None,
) -> Fabric:
    """Blocks in file order, a spine per top-level aggregate: from BlockSizes, or `top`, the
    highest of 23.11's BlockLevels."""
    if not blocks:
        raise SourceError("no BlockName= entries")
    levels = int(math.log2(sizes[-1] // sizes[0])) if sizes else _DEFAULT_BLOCK_LEVELS
    if top is not None:
        levels = top
    placed, unplaced, problems = first_claim(
        (n, name, f"line {no}") for name, nodes, no in blocks for n in nodes
    )
    slots = [
        Leaf(name, (), tuple(n for n in nodes if placed.get(n) == name))
        for name, nodes, _ in blocks
    ]
    span = 1 << levels
    spines = tuple(
        Spine(slots[i].id, (), tuple(slots[i : i + span]))
        for i in range(0, len(slots), span)
        if any(leaf.nodes for leaf in slots[i : i + span])
    )
    return Fabric(source, spines, tuple(unplaced), tuple(problems))


def looks_like_yaml(data: object) -> bool:
    return isinstance(data, list) and any(isinstance(t, Mapping) and "topology" in t for t in data)


def parse_yaml(text: str) -> Fabric:
    data: Any = load_yaml(text)
    if not looks_like_yaml(data):
        raise SourceError("topology.yaml must be a list of `- topology: NAME` entries")
    topologies = [t for t in data if isinstance(t, Mapping)]
    chosen = next((t for t in topologies if t.get("cluster_default") is True), None)
    if chosen is None:
        chosen = next((t for t in topologies if "tree" in t or "block" in t), topologies[0])
    name = chosen.get("topology", "?")
    if "tree" in chosen:
        return _yaml_tree(name, chosen["tree"])
    if "block" in chosen:
        return _yaml_block(name, chosen["block"])
    kinds = sorted(set(chosen) - {"topology", "cluster_default"})
    raise SourceError(
        f"topology {name!r} is {'/'.join(kinds) or 'empty'}: "
        "gpufabric reads tree and block topologies"
    )


def _yaml_tree(name: str, tree: Any) -> Fabric:
    switches = []
    for i, s in enumerate((tree or {}).get("switches") or []):
        if not isinstance(s, Mapping) or "switch" not in s:
            raise SourceError(f"topology {name!r}: switches[{i}] needs a `switch:` name")
        where = f"topology {name!r} switch {s['switch']}"
        switches.append(
            _Switch(
                str(s["switch"]),
                yaml_hostlist(s.get("nodes"), where),
                yaml_hostlist(s.get("children"), where, "children"),
                i + 1,
            )
        )
    if not switches:
        raise SourceError(f"topology {name!r}: tree has no switches")
    _once((s.name, f"topology {name!r} switches[{s.line - 1}]") for s in switches)
    return tree_fabric("topology.yaml", switches)


def _yaml_block(name: str, block: Any) -> Fabric:
    block = block or {}
    sizes = [int(x) for x in block.get("block_sizes") or []]
    if sizes:
        _check_sizes(sizes, None, "")
    blocks = []
    for i, b in enumerate(block.get("blocks") or []):
        if not isinstance(b, Mapping) or "block" not in b:
            raise SourceError(f"topology {name!r}: blocks[{i}] needs a `block:` name")
        blocks.append(
            (str(b["block"]), yaml_hostlist(b.get("nodes"), f"block {b['block']}"), i + 1)
        )
    return block_fabric("topology.yaml", blocks, sizes)

"""Slurm's topology/block, as slurmctld reads a topology.conf and places a job on it: a checker for
the block export, written from Slurm's code (the SchedMD/slurm mirror, HEAD 284c3b95f08a, read at
tags slurm-24-11-7-1 and slurm-25-11-7-1; row numbers are those of
../shared/reference/schedulers/slurm-block-rules.md, which gives each rule's versions and the runs
that confirmed it).

- `read()`: the file's checks, each raising `Fatal` with slurmctld's own message:
  - `BlockName=` unique (row 2; blk/block_record.c `block_record_validate`, "has already been
    defined"); `Nodes=` a hostlist (row 3; `node_name2bitmap`);
  - a block without `Nodes=` (row 14): 24.x `_parse_block` "block %s hasn't got nodes" (24.11.7
    block_record.c:89); accepted from 25.05;
  - `BlockSizes` (row 5; `_read_topo_file`, 25.11.7 block_record.c:105-142): the first value is the
    base; each value a positive multiple of it, ratio a power of two up to 2^15 ("Invalid
    BlockSizes value"); absent: levels 0-4, base = the first block with nodes;
  - 23.11 (tag slurm-23-11-11-1, blk/topology_block.c): `BlockLevels` (row 4, `_read_topo_file`)
    in place of `BlockSizes`, and every block exactly the first's size (row 7, `_validate_blocks`,
    "children count no equal bblock_node_cnt");
  - 24.05-24.11: every block at least the base (row 8; 24.11.7 block_record.c:276-280,
    "children count lower than bblock_node_cnt"); 25.05+ no longer checks it (row 9).
- `level()`: `_get_block_level` (blk/eval_nodes_block.c:226-244): ceil(log2(ceil(k / base))),
  raised to the next level BlockSizes selects; none: -1, every block counts as one (row 10).
- `groups()`: base blocks i and j share a level-L block when i>>L == j>>L (row 12;
  `_bblocks_in_same_block`, eval_nodes_block.c:57-63).
- `fits()`: a k-node job on the idle cluster is placed when one group of its level holds k nodes
  (`eval_nodes_block`, "unable to find block" otherwise: row 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from webhook.fabric.names import expand_hostlist

MAX_LEVEL = 15  # `block_level > 15` is refused (MAX_BLOCK_LEVELS 16, blk/block_record.h)


class Fatal(Exception):
    """slurmctld stops at start with this message."""


@dataclass(frozen=True)
class Blocks:
    names: tuple[str, ...]
    nodes: tuple[tuple[str, ...], ...]  # per block, file order; () for a block without Nodes=
    base: int
    levels: frozenset[int]
    version: tuple[int, int] = (25, 5)  # the reading release: what `listed()` shows

    def level(self, k: int) -> int:
        """The level eval_nodes_block places a k-node job at; -1: all blocks as one."""
        wanted = math.ceil(math.log2(math.ceil(k / self.base)))
        return min((lv for lv in self.levels if lv >= wanted), default=-1)

    def groups(self, level: int) -> list[tuple[str, ...]]:
        """The nodes of each level-L block (i>>L), in order; level -1: one group of all."""
        out: dict[int, list[str]] = {}
        for i, nodes in enumerate(self.nodes):
            out.setdefault(0 if level < 0 else i >> level, []).extend(nodes)
        return [tuple(v) for v in out.values()]

    def fits(self, k: int) -> bool:
        return any(len(g) >= k for g in self.groups(self.level(k)))

    def listed(self) -> list[tuple[int, tuple[str, ...]]]:
        """(level, nodes) of each aggregate `scontrol show topology` lists (row 13;
        `block_record_validate`): the enforced levels up to the first that holds every block; at
        block i of a level-L aggregate start, none when 2^L passes the blocks left and the level
        below already holds them. Before 24.11 none: `topology_p_topology_get` returns only the
        file's blocks (`block_record_cnt`; 23.11.11 topology_block.c, 24.05.8 topology_block.c:263;
        the aggregate records, `ablock_record_cnt`, came with 24.11's block_record.c)."""
        if self.version < (24, 11):
            return []
        sizes = []
        for level in sorted(self.levels):
            sizes.append(1 << level)
            if sizes[-1] >= len(self.nodes):
                break
        out = []
        for j in range(1, len(sizes)):
            for i in range(0, len(self.nodes), sizes[j]):
                left = len(self.nodes) - i
                if sizes[j] > left and sizes[j - 1] >= left:
                    continue
                group = tuple(n for b in self.nodes[i : i + sizes[j]] for n in b)
                out.append((sizes[j].bit_length() - 1, group))
        return out


def read(text: str, version: tuple[int, int]) -> Blocks:
    """topology.conf as slurmctld `version` (major, minor) reads it, e.g. (24, 11)."""
    names: list[str] = []
    nodes: list[tuple[str, ...]] = []
    sizes: list[int] | None = None
    level_bits: frozenset[int] | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(word.split("=", 1) for word in line.split())
        if "BlockSizes" in fields:
            if version < (24, 5):
                raise Fatal("Parsing error at unrecognized key: BlockSizes")  # row 6
            sizes = [int(v) for v in fields["BlockSizes"].split(",")]
            continue
        if "BlockLevels" in fields:  # row 4: 23.11 `_read_topo_file`, `bit_unfmt` of 16 bits
            if version >= (24, 5):
                raise Fatal("Parsing error at unrecognized key: BlockLevels")  # row 6
            bits = [int(v) for v in fields["BlockLevels"].split(",")]
            if any(not 0 <= b <= MAX_LEVEL for b in bits):
                raise Fatal("Invalid BlockLevels")
            level_bits = frozenset(bits)
            continue
        name = fields["BlockName"]
        if name in names:
            raise Fatal(f"Block ({name}) has already been defined")
        if "Nodes" not in fields and version < (25, 5):
            raise Fatal(f"block {name} hasn't got nodes")
        names.append(name)
        nodes.append(tuple(expand_hostlist(fields["Nodes"])) if "Nodes" in fields else ())
    base, levels = _levels(sizes, nodes)
    if level_bits is not None:
        levels = level_bits
    if version < (24, 5):  # row 7: 23.11 `_validate_blocks`
        for name, members in zip(names, nodes, strict=True):
            if len(members) != base:
                raise Fatal(f"Block configuration ({name}) children count no equal bblock_node_cnt")
    elif version < (25, 5):
        for name, members in zip(names, nodes, strict=True):
            if len(members) < base:
                raise Fatal(
                    f"Block configuration ({name}) children count lower than bblock_node_cnt"
                )
    return Blocks(tuple(names), tuple(nodes), base, levels, version)


def _levels(sizes: list[int] | None, nodes: list[tuple[str, ...]]) -> tuple[int, frozenset[int]]:
    if sizes is None:
        base = next((len(n) for n in nodes if n), 0)
        if not base:
            raise Fatal("Blocks do not contain any nodes and the BlockSizes are not set")
        return base, frozenset(range(5))
    base, levels = sizes[0], set()
    for size in sizes:
        ratio = size // base if size > 0 and base > 0 and size % base == 0 else 0
        level = ratio.bit_length() - 1
        if ratio <= 0 or ratio != 1 << level or level > MAX_LEVEL:
            raise Fatal(f"Invalid BlockSizes value: {size}")
        levels.add(level)
    return base, frozenset(levels)

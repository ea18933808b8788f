"""Slurm's topology/block, release by release: the one place that says which file each slurmctld
release reads as the fabric's own domains. Every rule names the Slurm source it follows
(SchedMD/slurm at tags slurm-23-11-11-1, slurm-24-11-7-1, slurm-25-05-8-1, slurm-25-11-7-1 and
slurm-26-05-3-1; "blk/" is src/plugins/topology/block/; rows of the shared reference
slurm-block-rules.md).

How Slurm reads the file (all releases):
- Blocks are numbered in file order; base blocks i and j share a level-L aggregate when
  i>>L == j>>L (`_bblocks_in_same_block`: blk/eval_nodes_block.c from 24.05, 23.11
  src/plugins/select/cons_tres/job_test.c; row 12).
- A k-node job goes to level ceil(log2(ceil(k / base))), raised to the next enforced level, and
  only aggregates of that one level are tried; above every enforced level all blocks count as one
  (`eval_nodes_block`, `block_level < 0`; 23.11 `_eval_nodes_block`; row 10). So a job larger than
  the top level's nominal size base x 2^top may land anywhere, across spines too.
- Enforced levels: at most 2^15 base blocks (`_read_topo_file`, `block_level > 15`; 23.11
  `bit_alloc(16)`; row 5).

What we print: one block per lowest domain (NVLink domain, else leaf domain) at a power-of-two
position, so that Slurm's aggregates at the enforced levels are exactly the fabric's leaves (above
their NVLink domains), pairs, quads and spines: leaf slot j of spine s starts at block
s * spine_width + j * leaf_width. With more than one spine, the spine width also covers every node
(base x spine_width >= nodes): then no job reaches the level above, where all blocks count as one,
and a job no spine holds is refused instead of spread over spines. Blocks after the last node are
left out (Slurm forms a shorter tail aggregate, `block_record_validate`). The enforced levels stop
at the spine: the fabric has no larger domain.

Per release (`RELEASES`):
- 25.05 and later: positions without a domain are empty blocks, `BlockName=` without `Nodes=`
  (`block_record_validate` gives them an empty bitmap; row 14), and blocks below the base are
  accepted (the size check left `block_record_validate`; row 9): the base is the largest block, so
  a job one block holds is sent to one block, never to a pair.
- 24.05-24.11: `BlockSizes`, no empty block (`_parse_block`, "block %s hasn't got nodes"; row 14)
  and none under the base (`block_record_validate`, "children count lower than bblock_node_cnt";
  row 8); a larger block would be sized by the base (row 10), so the blocks must be equal and fall
  on the fabric's boundaries without padding: else `BlockError`.
- 23.11: `BlockLevels` instead of `BlockSizes` (`_read_topo_file` knows only that key; rows 4, 6)
  and every block exactly the first's size (`_validate_blocks`, "children count no equal
  bblock_node_cnt"; row 7), no empty block (`_parse_block`): else `BlockError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.export.model import Domain, Model
from webhook.fabric.names import compress_hostlist

MAX_LEVEL = 15  # `block_level > 15` is fatal in `_read_topo_file` (MAX_BLOCK_LEVELS 16)
# Ours, not Slurm's: slurmctld walks every block for every job (`eval_nodes_block`), and the
# spine width that keeps jobs inside one spine grows with the node count, so a fabric of many
# spine domains would print a file of millions of mostly empty blocks.
MAX_BLOCKS = 1 << 16


class BlockError(ValueError):
    """The release cannot read a block file as the fabric (one line; names the other ways)."""


@dataclass(frozen=True, slots=True)
class Release:
    name: str  # "25.05": what --slurm-version takes
    levels_key: bool  # BlockLevels (23.11), not BlockSizes
    empty_blocks: bool  # BlockName= without Nodes= accepted (25.05+)
    equal_blocks: bool  # every block the same size (before 25.05: none under the base, row 8)


RELEASES = {
    r.name: r
    for r in (
        Release("23.11", levels_key=True, empty_blocks=False, equal_blocks=True),
        Release("24.05", levels_key=False, empty_blocks=False, equal_blocks=True),
        Release("24.11", levels_key=False, empty_blocks=False, equal_blocks=True),
        Release("25.05", levels_key=False, empty_blocks=True, equal_blocks=False),
        Release("25.11", levels_key=False, empty_blocks=True, equal_blocks=False),
        Release("26.05", levels_key=False, empty_blocks=True, equal_blocks=False),
    )
}
NEWEST = "26.05"  # the default of --slurm-version
EMPTY = "empty"  # an empty block's name: `empty-<BlockIndex>` (domain names carry their level)


@dataclass(frozen=True, slots=True)
class Layout:
    blocks: tuple[Domain | None, ...]  # by BlockIndex; None: an empty block
    base: int  # the largest block's node count
    levels: tuple[int, ...]  # enforced levels: block, leaf, pair, quad, spine (ascending)
    spines: int


def _pow2(n: int) -> int:
    """The smallest power of two >= n (n >= 1)."""
    return 1 << (max(n, 1) - 1).bit_length()


def lowest(leaf: Domain) -> tuple[Domain, ...]:
    """A leaf domain's blocks: its NVLink groups when the model has them, else itself."""
    return leaf.children or (leaf,)


def layout(model: Model) -> Layout:
    """Every lowest domain at its power-of-two position (module docstring)."""
    leaves = model.leaves()
    leaf_width = _pow2(max(len(lowest(leaf)) for leaf in leaves))
    base = max(len(d.nodes) for leaf in leaves for d in lowest(leaf))
    spine_width = _pow2(max(len(row) for row in model.slots) * leaf_width)
    if len(model.slots) > 1:  # keep every job out of the all-blocks level (rule 10)
        placed = sum(len(leaf.nodes) for leaf in leaves)
        spine_width = max(spine_width, _pow2(-(-placed // base)))
    top = spine_width.bit_length() - 1
    if top > MAX_LEVEL or len(model.slots) * spine_width > MAX_BLOCKS:
        raise BlockError(
            f"slurm-block: {len(model.slots)} spine domains of {spine_width} blocks each "
            f"(at most 2^{MAX_LEVEL} a spine in BlockSizes, {MAX_BLOCKS} in all here) to keep "
            "every job inside one spine domain: use -o slurm-tree"
        )
    blocks: list[Domain | None] = [None] * (len(model.slots) * spine_width)
    for s, row in enumerate(model.slots):
        for j, leaf in enumerate(row):
            for k, domain in enumerate(lowest(leaf) if leaf else ()):
                blocks[s * spine_width + j * leaf_width + k] = domain
    while blocks[-1] is None:
        blocks.pop()
    a = leaf_width.bit_length() - 1
    levels = sorted({0, top} | {lv for lv in (a, a + 1, a + 2) if lv <= top})
    return Layout(tuple(blocks), base, tuple(levels), len(model.slots))


def block(model: Model, version: str = NEWEST) -> str:
    """The topology/block file Slurm `version` reads as the fabric; BlockError where none."""
    if not model.placed:
        return ""
    release = RELEASES[version]
    plan = layout(model)
    _check(plan, release)
    what = "NVLink domain" if model.nvlink else "leaf domain"
    empty = plan.blocks.count(None)
    lines = [
        f"# gpufabric topology export (topology/block, Slurm {release.name}): one block per {what}"
        + (
            f"; {empty} empty blocks keep Slurm's aggregates on the fabric's domains"
            if empty
            else ""
        )
    ]
    for i, d in enumerate(plan.blocks):
        lines.append(f"BlockName={EMPTY}-{i}" if d is None else _line(d))
    if release.levels_key:
        lines.append("BlockLevels=" + ",".join(str(lv) for lv in plan.levels))
    else:
        lines.append("BlockSizes=" + ",".join(str(plan.base << lv) for lv in plan.levels))
    return "\n".join(lines) + "\n"


def refused_sizes(plan: Layout) -> list[int]:
    """The job sizes one spine domain holds that Slurm refuses on an idle cluster, ascending
    (rows 10, 12): a k-node job is tried only in the aggregates of the lowest enforced level L
    with base x 2^L >= k, so where every aggregate of that level is short of k nodes (blocks
    under the base) it is refused, though a larger aggregate holds it."""
    counts = [len(d.nodes) if d is not None else 0 for d in plan.blocks]
    largest = _fullest(counts, plan.levels[-1])  # the top level: the spine domains
    refused: list[int] = []
    below = 0  # sizes up to here went to a lower level
    for level in plan.levels:
        nominal = min(plan.base << level, largest)
        refused += range(max(below, _fullest(counts, level)) + 1, nominal + 1)
        below = nominal
    return refused


def _fullest(counts: list[int], level: int) -> int:
    """The most nodes one level-`level` aggregate holds (blocks i, j share one when i>>L ==
    j>>L)."""
    width = 1 << level
    return max(sum(counts[i : i + width]) for i in range(0, len(counts), width))


def refusal_note(model: Model, version: str = NEWEST) -> str:
    """One line naming the job sizes Slurm `version` will refuse on `block`'s file although one
    domain holds them (`refused_sizes`); "" when there are none."""
    plan = layout(model) if model.placed else None
    sizes = refused_sizes(plan) if plan is not None else []
    if plan is None or not sizes:
        return ""
    runs: list[list[int]] = []
    for k in sizes:
        if runs and runs[-1][-1] == k - 1:
            runs[-1][-1] = k
        else:
            runs.append([k, k])
    listed = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return (
        f"slurm-block: Slurm {version} will refuse -N {listed} on this file although one domain "
        f"holds each: it tries a job only in aggregates of its nominal size ({plan.base} x 2^L "
        "nodes), and here those hold fewer; -o slurm-tree places them (docs/exports.md)"
    )


def _line(domain: Domain) -> str:
    return f"BlockName={domain.name} Nodes={compress_hostlist(domain.nodes)}"


def _check(plan: Layout, release: Release) -> None:
    """Refuse what `release` cannot read as the fabric (module docstring, per release)."""
    why = ""
    found = [d for d in plan.blocks if d is not None]
    small = min(found, key=lambda d: len(d.nodes))
    large = max(found, key=lambda d: len(d.nodes))
    if release.equal_blocks and len(small.nodes) != len(large.nodes):
        why = (
            f"blocks differ in size ({small.name}: {len(small.nodes)} nodes, {large.name}: "
            f"{len(large.nodes)}), and it sizes every block by one base"
        )
    elif not release.empty_blocks and None in plan.blocks:
        why = (
            "only empty blocks (BlockName= without Nodes=) keep jobs larger than one spine "
            "domain off the other spines"
            if plan.spines > 1
            else "its aggregates (blocks i, j share one when i>>L == j>>L) fall on the fabric's "
            "leaf pairs and quads only with empty blocks (BlockName= without Nodes=)"
        )
    if why:
        raise BlockError(
            f"slurm-block: Slurm {release.name} cannot read this fabric as blocks: {why}; "
            "use --slurm-version 25.05 (or later) or -o slurm-tree"
        )

"""Slurm topology.conf: the tree plugin's switches and the block plugin's blocks.

Tree: one switch per domain at every network level (spine > leaf-quad > leaf-pair > leaf),
`Switches=` naming the children, `Nodes=` on the leaves. Spine domains get no common parent: the
source says nothing about what joins them, and Slurm then keeps a job inside one spine domain.

Block: one block per lowest domain (the NVLink domain where nodes have one, as topograph prints
for NVL72; the leaf's nodes without one form a block of their own; else the leaf domain) in
fabric order, as Slurm's topology/block reads it (shared reference slurm-block-rules.md):
- every block holds at least the base size, the first `BlockSizes` value (24.05-24.11 stop at
  start otherwise): the base is the smallest block;
- Slurm picks a job's level from the nominal sizes base x 2^L, never from what the blocks hold,
  so a block of twice the base or more is read as one of the base size: a job it would hold is
  sent to a pair or further. Such fabrics are refused (`BlockError`), the tree form serves them;
- `BlockSizes` = base x 1, 2, 4, ... while the level has that many blocks (as topograph infers
  it), each a power-of-two multiple of the base: Slurm joins base blocks i and j at level L when
  i>>L == j>>L, so a level-L block is 2^L consecutive blocks in fabric order;
- no `BlockName` without `Nodes=` (refused before 25.05), so this file needs 24.05 or later
  (23.11 knows no `BlockSizes`).
Node names are the Kubernetes node names; hostlists are compressed with Slurm's own syntax
(`webhook.fabric.names.compress_hostlist`).
"""

from __future__ import annotations

from webhook.export.model import Domain, Model
from webhook.fabric.names import compress_hostlist

_MAX_LEVEL = 15  # BlockSizes ratios up to 2^15 (MAX_BLOCK_LEVELS 16 in blk/block_record.h)


class BlockError(ValueError):
    """The fabric has no block form Slurm would read as ours (one line, names the tree form)."""


def tree(model: Model) -> str:
    lines = [
        "# gpufabric topology export (topology/tree): spine > leaf-quad > leaf-pair > leaf",
    ]

    def visit(domain: Domain) -> None:
        if domain.level == "leaf":
            lines.append(f"SwitchName={domain.name} Nodes={compress_hostlist(domain.nodes)}")
            return
        children = compress_hostlist(c.name for c in domain.children)
        lines.append(f"SwitchName={domain.name} Switches={children}")
        for child in domain.children:
            visit(child)

    for spine in model.spines:
        visit(spine)
    return "\n".join(lines) + "\n" if model.placed else ""


def blocks(model: Model) -> tuple[Domain, ...]:
    """The lowest domains in fabric order: a leaf's NVLink groups when the model has them."""
    return tuple(d for leaf in model.leaves() for d in (leaf.children or (leaf,)))


def block(model: Model) -> str:
    """The topology/block file; BlockError when the blocks differ too much in size."""
    if not model.placed:
        return ""
    found = blocks(model)
    small = min(found, key=lambda d: len(d.nodes))
    large = max(found, key=lambda d: len(d.nodes))
    base = len(small.nodes)
    if len(large.nodes) >= 2 * base:
        raise BlockError(
            f"slurm-block: blocks differ in size ({small.name}: {base} nodes, {large.name}: "
            f"{len(large.nodes)}) and Slurm's topology/block sizes them all by one base, which "
            "serves neither (a larger base stops Slurm 24.x or refuses jobs that fit, the "
            "smaller spreads jobs one block holds): use -o slurm-tree"
        )
    what = "NVLink domain" if model.nvlink else "leaf domain"
    lines = [f"# gpufabric topology export (topology/block): one block per {what}"]
    lines += [f"BlockName={d.name} Nodes={compress_hostlist(d.nodes)}" for d in found]
    top = min(len(found).bit_length() - 1, _MAX_LEVEL)
    lines.append("BlockSizes=" + ",".join(str(base << level) for level in range(top + 1)))
    return "\n".join(lines) + "\n"

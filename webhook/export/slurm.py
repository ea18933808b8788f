"""Slurm topology.conf: the tree plugin's switches and the block plugin's blocks.

Tree: one switch per domain at every network level (spine > leaf-quad > leaf-pair > leaf),
`Switches=` naming the children, `Nodes=` on the leaves. Spine domains get no common parent: the
source says nothing about what joins them, and Slurm then keeps a job inside one spine domain.
Block: one block per leaf domain in fabric order, `BlockSizes=` the largest leaf domain's node
count and its x2 and x4, so Slurm's aggregated blocks (base blocks i and j share a level-L block
when i>>L == j>>L) are exactly our leaf pairs and quads. Empty slots stay as bare `BlockName=`
placeholders (as topograph writes them) and each spine domain is padded to a multiple of four,
so a quad never straddles two spine domains. Node names are the Kubernetes node names; hostlists
are compressed with Slurm's own syntax (`webhook.fabric.names.compress_hostlist`).
"""

from __future__ import annotations

from webhook.export.model import Domain, Model, name_for
from webhook.fabric.names import compress_hostlist

_QUAD = 4


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


def block(model: Model) -> str:
    if not model.placed:
        return ""
    lines = ["# gpufabric topology export (topology/block): one block per leaf domain"]
    size = max(len(leaf.nodes) for leaf in model.leaves())
    for i, (spine, row) in enumerate(zip(model.spines, model.slots, strict=True)):
        pad = (-len(row)) % _QUAD if i + 1 < len(model.slots) else 0
        for slot, leaf in enumerate(row + (None,) * pad):
            if leaf is None:
                lines.append(f"BlockName={name_for('empty', f'{spine.value}-{slot}')}")
            else:
                lines.append(f"BlockName={leaf.name} Nodes={compress_hostlist(leaf.nodes)}")
    lines.append(f"BlockSizes={size},{size * 2},{size * 4}")
    return "\n".join(lines) + "\n"

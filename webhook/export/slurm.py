"""Slurm topology.conf: the tree plugin's switches and the block plugin's blocks.

Tree: one switch per domain at every network level (spine > leaf-quad > leaf-pair > leaf),
`Switches=` naming the children, `Nodes=` on the leaves. Spine domains get no common parent: the
source says nothing about what joins them, and Slurm then keeps a job inside one spine domain.

Block: `webhook.export.slurm_block` (per Slurm release), re-exported here.
Node names are the Kubernetes node names; hostlists are compressed with Slurm's own syntax
(`webhook.fabric.names.compress_hostlist`).
"""

from __future__ import annotations

from webhook.export.model import Domain, Model
from webhook.export.slurm_block import BlockError, block
from webhook.fabric.names import compress_hostlist

__all__ = ["BlockError", "block", "tree"]


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

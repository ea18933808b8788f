"""For any fabric: every export names exactly the domains the labels name (Volcano's chain above a
node is its leaf, pair, quad and spine values; Slurm's block form, where it prints, is one block
per lowest domain, each aggregate Slurm forms a domain of the fabric, for every release that
prints it; releases before 25.05 refuse exactly the fabrics that need empty blocks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.export.slurm_fixtures import agrees, domains
from webhook.export import slurm, slurm_block, volcano
from webhook.export.model import build, name_for
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import Fabric, Leaf, Spine
from webhook.fabric.sources.slurm import parse_conf


@st.composite
def fabrics(draw: st.DrawFn) -> Fabric:
    counter = iter(range(10_000))
    spines = []
    for s in range(draw(st.integers(1, 3))):
        leaves = []
        for i in range(draw(st.integers(1, 9))):
            n = draw(st.integers(0, 5))  # 0: an empty slot
            leaves.append(Leaf(f"L{s}_{i}", (), tuple(f"node-{next(counter)}" for _ in range(n))))
        spines.append(Spine(f"Spine {s}", (), tuple(leaves)))
    return Fabric("test", tuple(spines))


@settings(max_examples=60, deadline=None)
@given(fabrics(), st.data())
def test_exports_agree_with_the_labels(fabric: Fabric, data: st.DataObject) -> None:
    pos = Positions(fabric)
    placed = sorted(pos.placed)
    with_domain = data.draw(st.sets(st.sampled_from(placed))) if placed else set()
    uuid = "6a1c9e4e-2f3b-4d5a-9c8e-0123456789ab"
    values = {n: f"{uuid}.{int(n.removeprefix('node-')) % 3}" for n in with_domain}
    model = build(pos, values)
    hns = volcano.hypernodes(model)
    parent = {
        m["selector"]["exactMatch"]["name"]: h["metadata"]["name"]
        for h in hns
        for m in h["spec"]["members"]
    }
    assert len(parent) == sum(len(h["spec"]["members"]) for h in hns)  # one parent each
    for node, labels in pos.placed.items():
        chain, up = [], parent[node]
        while up in parent:
            up = parent[up]
            chain.append(up)
        if not values:
            chain.insert(0, parent[node])
        assert chain == [
            name_for("leaf", labels[LEAF]),
            name_for("leaf-pair", labels[LEAF_PAIR]),
            name_for("leaf-quad", labels[LEAF_QUAD]),
            name_for("spine", labels[SPINE]),
        ]
    if not placed:
        assert hns == [] and slurm.block(model) == ""
        return
    fabric_domains = domains(pos, values)
    for release in slurm_block.RELEASES:
        try:
            text = slurm.block(model, release)
        except slurm.BlockError:
            assert release < "25.05" and not _without_empty_blocks(pos, values)
            continue
        assert release >= "25.05" or _without_empty_blocks(pos, values)
        blocks, _ = agrees(text, release, fabric_domains)  # Slurm reads it as the fabric
        # The sizes the command warns of: those a spine holds that Slurm's rules refuse.
        largest = max(len(d) for d in fabric_domains.by_level["spine"])
        refused = [k for k in range(1, largest + 1) if not blocks.fits(k)]
        assert slurm_block.refused_sizes(slurm_block.layout(model)) == refused
    if model.nvlink:
        return  # gpufabric's reader takes blocks for leaf domains: only leaf blocks read back
    back = Positions(parse_conf(slurm.block(model)))
    for level in ("leaf-pair", "leaf-quad"):
        mine = {frozenset(d.nodes) for d in pos.domains if d.level == level}
        assert {frozenset(d.nodes) for d in back.domains if d.level == level} == mine


def _without_empty_blocks(pos: Positions, values: dict[str, str]) -> bool:
    """Blocks of one size, one spine domain, every leaf slot before the last full of lowest
    domains (a power of two of them): what a file without empty blocks can say (issue 33)."""
    spines = [s for s in pos.fabric.spines if any(leaf.nodes for leaf in s.leaves)]
    groups = [
        [
            sum(1 for n in leaf.nodes if values.get(n) == v)
            for v in dict.fromkeys(values.get(n) for n in leaf.nodes)
        ]
        for leaf in spines[0].leaves
    ]
    sizes = {size for g in groups for size in g}
    counts = [len(g) for g in groups]
    while counts and counts[-1] == 0:
        counts.pop()
    width = 1 << (max(counts) - 1).bit_length()
    return len(spines) == 1 and len(sizes) == 1 and all(c == width for c in counts[:-1])

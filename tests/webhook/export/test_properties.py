"""For any fabric: every export names exactly the domains the labels name (Volcano's chain above a
node is its leaf, pair, quad and spine values; Slurm's block form, where it prints, is one block
per lowest domain that Slurm's rules accept and place any job size on)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.export.slurm_rules import read
from webhook.export import slurm, volcano
from webhook.export.model import build, name_for
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import Fabric, Leaf, Spine
from webhook.fabric.slurm import parse_conf


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
    domains = {n: f"{uuid}.{int(n.removeprefix('node-')) % 3}" for n in with_domain}
    model = build(pos, domains)
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
        if not domains:
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
    lowest = slurm.blocks(model)
    sizes = [len(d.nodes) for d in lowest]
    try:
        text = slurm.block(model)
    except slurm.BlockError:
        assert max(sizes) >= 2 * min(sizes)
        return
    assert max(sizes) < 2 * min(sizes)
    for version in ((24, 5), (24, 11), (25, 11)):
        blocks = read(text, version)  # slurmctld starts with it ...
        assert blocks.nodes == tuple(d.nodes for d in lowest)  # ... one block per lowest domain
        assert all(blocks.fits(k) for k in range(1, len(placed) + 1))  # ... and places any job
    back = Positions(parse_conf(text))
    mine = {frozenset(d.nodes) for d in lowest}
    assert {frozenset(d.nodes) for d in back.domains if d.level == "leaf"} == mine

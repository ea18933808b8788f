"""Slurm topology.conf exports read back by the project's own Slurm reader into the same domains;
hostlists compressed in Slurm's syntax expand back to exactly the names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.webhook.export.fabrics import nodes, positions
from webhook.export import slurm
from webhook.export.model import build
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, Leaf, Spine
from webhook.fabric.names import compress_hostlist, expand_hostlist
from webhook.fabric.sources.slurm import parse_conf


def _partition(pos: Positions, level: str) -> set[frozenset[str]]:
    return {frozenset(d.nodes) for d in pos.domains if d.level == level}


def _even() -> Positions:
    """Spine A: leaves a0-a3 of 4 nodes; spine B: b0, an empty slot, b2, b3 (3 to 4 nodes)."""
    a = tuple(Leaf(f"a{i}", (), nodes(f"gpu-a{i}", 4)) for i in range(4))
    b = (
        Leaf("b0", (), nodes("gpu-b0", 4)),
        Leaf("b1", (), ()),
        Leaf("b2", (), nodes("gpu-b2", 3)),
        Leaf("b3", (), nodes("gpu-b3", 4)),
    )
    return Positions(Fabric("test", (Spine("A", (), a), Spine("B", (), b))))


def test_block_reads_back_into_the_same_leaves_pairs_and_quads() -> None:
    ours = _even()
    text = slurm.block(build(ours))  # the newest release: empty blocks keep the slots
    back = Positions(parse_conf(text))
    for level in ("leaf", "leaf-pair", "leaf-quad", "spine"):  # spine: the top BlockSizes level
        assert _partition(back, level) == _partition(ours, level), level
    assert back.fabric.unplaced == () and back.fabric.problems == ()
    lines = text.splitlines()
    assert lines[-1] == "BlockSizes=4,8,16,32"  # the largest block is the base; spine: 8 blocks
    empty = [i for i, ln in enumerate(lines[1:-1]) if "Nodes=" not in ln]
    assert empty == [4, 5, 6, 7, 9]  # after spine A's quad, and spine B's empty slot


def test_23_11_block_levels_read_back_like_25_05_block_sizes() -> None:
    # One spine of 8 equal leaves: the one shape 23.11 (BlockLevels, equal blocks) reads as is.
    leaves = tuple(Leaf(f"l{i}", (), nodes(f"gpu-l{i}", 4)) for i in range(8))
    ours = Positions(Fabric("test", (Spine("S", (), leaves),)))
    old, new = slurm.block(build(ours), "23.11"), slurm.block(build(ours), "25.05")
    assert old.splitlines()[-1] == "BlockLevels=0,1,2,3"
    assert new.splitlines()[-1] == "BlockSizes=4,8,16,32"
    back_old, back_new = Positions(parse_conf(old)), Positions(parse_conf(new))
    for level in ("leaf", "leaf-pair", "leaf-quad", "spine"):
        assert _partition(back_old, level) == _partition(back_new, level), level
        assert _partition(back_old, level) == _partition(ours, level), level
    assert len(_partition(back_old, "leaf-quad")) == 2 and len(_partition(back_old, "spine")) == 1


def test_block_keeps_fabric_order() -> None:
    text = slurm.block(build(_even()))
    firsts = [
        expand_hostlist(line.split("Nodes=")[1])[0]
        for line in text.splitlines()
        if "Nodes=" in line
    ]
    assert firsts == [f"gpu-{leaf}-01" for leaf in ("a0", "a1", "a2", "a3", "b0", "b2", "b3")]


def test_tree_reads_back_with_one_switch_per_domain_at_every_level() -> None:
    ours = positions()
    text = slurm.tree(build(ours))
    back = Positions(parse_conf(text))
    assert _partition(back, "leaf") == _partition(ours, "leaf")
    # The reader makes a spine domain of leaves under one parent: here our leaf pairs.
    assert _partition(back, "spine") == _partition(ours, "leaf-pair")
    # Every switch's subtree, as Slurm's tree plugin sees it, is one of our domains.
    children: dict[str, list[str]] = {}
    leaves: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        fields = dict(word.split("=", 1) for word in line.split())
        if "Nodes" in fields:
            leaves[fields["SwitchName"]] = expand_hostlist(fields["Nodes"])
        else:
            children[fields["SwitchName"]] = expand_hostlist(fields["Switches"])

    def under(name: str) -> frozenset[str]:
        if name in leaves:
            return frozenset(leaves[name])
        return frozenset(n for c in children[name] for n in under(c))

    prefixes = {"spine": "spine", "leaf-quad": "leaf-quad", "leaf-pair": "leaf-pair"}
    for level, prefix in prefixes.items():
        switches = {under(s) for s in children if s.startswith(prefix + "-")}
        assert switches == _partition(ours, level), level


def test_nothing_placed_prints_nothing() -> None:
    model = build(Positions(Fabric("none")))
    assert slurm.tree(model) == slurm.block(model) == ""


names = st.lists(
    st.builds(
        lambda p, n, w: p + str(n).zfill(w),
        st.sampled_from(["gpu", "n", "rack1-n", "a.b", "x-"]),
        st.integers(0, 1200),
        st.integers(0, 4),
    )
    | st.sampled_from(["login", "gpu", "n01a"]),
    max_size=40,
)


@given(names)
def test_compressed_hostlist_expands_to_exactly_the_names(hosts: list[str]) -> None:
    expr = compress_hostlist(hosts)
    assert (expand_hostlist(expr) if expr else []) == hosts


def test_compressed_hostlist_spelling() -> None:
    assert compress_hostlist([f"gpu{i:03d}" for i in range(1, 9)]) == "gpu[001-008]"
    assert compress_hostlist(["n8", "n9", "n10", "n12"]) == "n[8-10,12]"
    assert compress_hostlist(["n1", "n01"]) == "n[1,01]"
    assert compress_hostlist(["a1", "b2"]) == "a1,b2"

"""Slurm topology files from shared/reference/fabric/slurm; expectations read off the files."""

from __future__ import annotations

import re

import pytest

from tests.webhook.fabric.helpers import ref
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import Fabric, SourceError
from webhook.fabric.names import expand_hostlist
from webhook.fabric.sources.formats import derive
from webhook.fabric.sources.slurm import parse_conf, parse_yaml


def _sections(text: str, separator: str) -> list[str]:
    return [
        s for s in re.split(separator, text) if re.search(r"(?im)^\s*(-\s*topology|\w+name)", s)
    ]


def _shape(fabric: Fabric) -> list[tuple[str, list[tuple[str, int]]]]:
    return [(s.id, [(leaf.id, len(leaf.nodes)) for leaf in s.leaves]) for s in fabric.spines]


def test_man_page_examples() -> None:
    tree, block, ring = _sections(
        ref("slurm/slurm-topology.conf.5-examples.conf"), r"\n(?=#{60,}\n# Slurm)"
    )
    # tree: s3 is the parent of s0..s2, 6 nodes each.
    assert _shape(parse_conf(tree)) == [("s3", [("s0", 6), ("s1", 6), ("s2", 6)])]
    # block: 4 blocks of 32 in file order; BlockSizes=30,120 -> base + 2 levels: one 4-block top.
    f = parse_conf(block)
    assert _shape(f) == [
        ("block1", [("block1", 32), ("block2", 32), ("block3", 32), ("block4", 32)])
    ]
    pos = Positions(f)
    assert (
        pos.labels_for_node("node1")[LEAF_PAIR]
        == pos.labels_for_node("node64")[LEAF_PAIR]
        == "block1"
    )
    assert pos.labels_for_node("node65")[LEAF_PAIR] == "block3"
    assert pos.labels_for_node("node128")[LEAF_QUAD] == "block1"
    with pytest.raises(SourceError, match="ring topologies"):
        parse_conf(ring)


GUIDE_SHAPES = [
    # block 1: binary 3-level tree; s4 over s0-1, s5 over s2-3, s6 over s4-5 (s6 is above spines).
    [("s4", [("s0", 2), ("s1", 2)]), ("s5", [("s2", 2), ("s3", 2)])],
    # block 2: 4 leaves under 4 parallel spines s4-s7 (LinkSpeed ignored).
    [("s4", [("s0", 4), ("s1", 4), ("s2", 4), ("s3", 4)])],
    # block 3: the same leaves under one top switch.
    [("s4", [("s0", 4), ("s1", 4), ("s2", 4), ("s3", 4)])],
]


def test_topology_guide_examples() -> None:
    blocks = re.split(
        r"# --- <pre> block \d+ of .*\n", ref("slurm/slurm-topology-guide-examples.txt")
    )[1:]
    assert [_shape(derive(b)) for b in blocks[:3]] == GUIDE_SHAPES
    with pytest.raises(SourceError, match="ring topologies"):
        derive(blocks[3])  # RingName lines
    for b in blocks[4:7]:  # ring and torus3d topology.yaml
        with pytest.raises(SourceError, match="reads tree and block"):
            derive(b)
    for b in blocks[7:]:  # scontrol / slurmd command lines are no topology file
        with pytest.raises(SourceError):
            derive(b)


def test_topograph_block_output_keeps_file_order() -> None:
    # 12 racks of 8; BlockSizes=8,16,32 -> pairs and quads by file order, spine = 4 blocks.
    f = derive(ref("slurm/topograph-expected-block.conf"))
    assert [s.id for s in f.spines] == ["rack11", "rack31", "rack51"]
    pos = Positions(f)
    assert pos.labels_for_node("srv1201")[LEAF_PAIR] == "rack11"
    assert pos.labels_for_node("srv2101")[LEAF_PAIR] == "rack21"
    assert pos.labels_for_node("srv2201")[LEAF_QUAD] == "rack11"
    assert pos.labels_for_node("srv3101")[SPINE] == "rack31"


def test_topograph_tree_output() -> None:
    # core switch.3.1 -> 6 spines switch.2.N -> 2 leaves each -> 8 nodes per leaf.
    f = derive(ref("slurm/topograph-expected-tree.conf"))
    assert len(f.spines) == 6
    assert _shape(f)[0] == ("switch.2.1", [("switch.1.1", 8), ("switch.1.2", 8)])
    assert sum(len(leaf.nodes) for leaf in f.leaves) == 96


def test_circe_leaves_only_and_a_node_under_two_leaves() -> None:
    # No parent switch: every leaf is its own spine domain. circe-n051 is under s2 (041-058) and
    # s4 (…,051,…): left unplaced and reported. s0 also holds n019-n020 without the prefix.
    f = derive(ref("slurm/circe-leaves-only-topology.conf"))
    assert [s.id for s in f.spines] == ["s0", "s1", "s2", "s3", "s4"]
    assert [u.node for u in f.unplaced] == ["circe-n051"]
    assert "s2 (line 3)" in f.unplaced[0].reason and "s4 (line 5)" in f.unplaced[0].reason
    assert any("circe-n051" in p for p in f.problems)
    s0 = f.spines[0].leaves[0]
    assert len(s0.nodes) == 18 and "n019" in s0.nodes
    assert Positions(f).labels_for_node("circe-n051") == {}


def test_topology_yaml_picks_the_cluster_default() -> None:
    # topo1 (cluster_default: true) is a tree: sw_root over s1, s2 with 2 nodes each.
    f = parse_yaml(ref("slurm/slurm-topology.yaml.5-example.yaml"))
    assert _shape(f) == [("sw_root", [("s1", 2), ("s2", 2)])]


def test_topology_yaml_block() -> None:
    text = ref("slurm/slurm-topology.yaml.5-example.yaml").replace(
        "cluster_default: true", "cluster_default: false"
    )
    text = text.replace(
        "topology: topo2\n  cluster_default: false", "topology: topo2\n  cluster_default: true"
    )
    f = parse_yaml(text)
    assert _shape(f) == [("b1", [("b1", 4), ("b2", 4), ("b3", 4), ("b4", 4)])]  # 4,16: one quad


def test_empty_placeholder_blocks_keep_alignment() -> None:
    # topograph pads with bare BlockName lines so Slurm's alignment follows the real tree.
    text = "BlockName=b1 Nodes=n[1-2]\nBlockName=b2\nBlockName=b3 Nodes=n[3-4]\nBlockSizes=2,4,8\n"
    pos = Positions(derive(text))
    assert pos.labels_for_node("n1")[LEAF_PAIR] == "b1"
    assert pos.labels_for_node("n3")[LEAF_PAIR] == "b3"
    assert pos.labels_for_node("n3")[LEAF_QUAD] == "b1"


def test_block_levels_of_slurm_23_11() -> None:
    # 23.11 topology_block.c `_read_topo_file`: BlockLevels is a bit_unfmt level list ("0-2,4");
    # the highest level's 2^L blocks make the spine, as BlockSizes' largest size does.
    blocks = "".join(f"BlockName=b{i} Nodes=n[{2 * i + 1}-{2 * i + 2}]\n" for i in range(6))
    assert _shape(derive(blocks + "blocklevels=0-1,2\n", "topology.conf")) == [
        ("b0", [(f"b{i}", 2) for i in range(4)]),
        ("b4", [("b4", 2), ("b5", 2)]),
    ]
    pos = Positions(derive(blocks + "BlockLevels=0,1\n"))  # also found without a file name
    assert pos.labels_for_node("n4")[SPINE] == "b0" and pos.labels_for_node("n5")[SPINE] == "b2"


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ("BlockLevels=0,16", "line 2: block level 16 is over 15"),
        ("BlockLevels=0,x", "line 2: BlockLevels must be a comma list"),
        ("BlockLevels=2-1", "line 2: BlockLevels must be a comma list"),
        ("BlockLevels=0,1\nBlockSizes=2,4", "topology.conf has both BlockSizes"),
    ],
)
def test_bad_block_levels(levels: str, message: str) -> None:
    with pytest.raises(SourceError, match=f"^{message}"):
        derive(f"BlockName=b1 Nodes=n[1-2]\n{levels}\n", "topology.conf")


def test_case_insensitive_keys_comments_continuations() -> None:
    text = "switchname=a nodes=x[1-2] # leaf\nSWITCHNAME=top \\\n  SWITCHES=a\n"
    assert _shape(derive(text)) == [("top", [("a", 2)])]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("SwitchName=s0 Nodes=tux[0-\n", "line 1"),
        ("SwitchName=s0 Nodes=a\nSwitchName=s1 Nodes=b[3-1]\n", "line 2"),
        ("SwitchName=s0 Colour=red\n", "line 1"),
        ("BlockName=b1 Nodes=a\nBlockSizes=4,12\n", "line 2"),
    ],
)
def test_bad_conf_names_the_line(text: str, where: str) -> None:
    with pytest.raises(SourceError, match=f"^{where}: "):
        derive(text, "topology.conf")


def test_hostlists() -> None:
    assert expand_hostlist("tux[0-3,12],gpu7") == ["tux0", "tux1", "tux2", "tux3", "tux12", "gpu7"]
    assert expand_hostlist("r[1-2]-n[08-09]") == ["r1-n08", "r1-n09", "r2-n08", "r2-n09"]
    assert expand_hostlist("H-78e7d1030024535c,sl390lin[22,28]") == [
        "H-78e7d1030024535c",
        "sl390lin22",
        "sl390lin28",
    ]


def test_labels_are_all_four_keys() -> None:
    pos = Positions(derive(ref("slurm/topograph-expected-tree.conf")))
    assert set(pos.labels_for_node("srv1101")) == {LEAF, LEAF_PAIR, LEAF_QUAD, SPINE}

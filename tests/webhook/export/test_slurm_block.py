"""`-o slurm-block` read back by Slurm's own rules (tests/webhook/export/slurm_rules.py): equal
fabrics print a file every block-capable Slurm (24.05 on) starts with and places every job size on;
NVL72 racks print one block per NVLink domain, as topograph does; uneven fabrics are refused with
one line naming the tree form (slurmctld 24.11 stopped at start and 25.11 refused jobs that fit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvl72 import TRAYS, domain, tray_name
from tests.reference import FIXTURES
from tests.webhook.export.fabrics import positions as uneven_positions
from tests.webhook.export.slurm_rules import Blocks, Fatal, read
from webhook.__main__ import main
from webhook.export import slurm
from webhook.export.model import build
from webhook.fabric.levels import LEAF_PAIR, LEAF_QUAD, Positions
from webhook.fabric.model import Fabric, Leaf, Spine

# 24.05 and 24.11 (minimum block size checked, no empty blocks), 25.05 and 25.11 (neither).
VERSIONS = [(24, 5), (24, 11), (25, 5), (25, 11)]
IB = FIXTURES / "fabric" / "ibnetdiscover"


def _fabric(*spines: tuple[int, ...]) -> Fabric:
    """Spine s holds one leaf per entry, of that many nodes (0: an empty slot)."""
    out = []
    for s, sizes in enumerate(spines):
        leaves = tuple(
            Leaf(f"s{s}l{i}", (), tuple(f"gpu-s{s}l{i}-{n:02d}" for n in range(size)))
            for i, size in enumerate(sizes)
        )
        out.append(Spine(f"spine{s}", (), leaves))
    return Fabric("test", tuple(out))


def _every_version(text: str) -> Blocks:
    found = [read(text, v) for v in VERSIONS]
    assert all(b == found[0] for b in found)
    return found[0]


def _old_block(sizes: tuple[int, ...], base: int, pad: int = 0) -> str:
    """The block form as gpufabric printed it before: base = the largest leaf, padding lines."""
    lines = [f"BlockName=b{i} Nodes=n{i}-[1-{size}]" for i, size in enumerate(sizes)]
    lines += [f"BlockName=empty{i}" for i in range(pad)]
    return "\n".join([*lines, f"BlockSizes={base},{base * 2},{base * 4}"]) + "\n"


# -- the checker against what slurmctld did (slurm-block-rules.md rows 8, 10, 14) ----------------


def test_rules_reproduce_what_slurm_did_with_the_old_uneven_file() -> None:
    psmn = _old_block((9, 24, 6, 19, 24, 4), 24)
    with pytest.raises(Fatal, match="children count lower than bblock_node_cnt"):
        read(psmn, (24, 11))
    blocks = read(psmn, (25, 11))
    placed = [k for k in range(1, 91) if blocks.fits(k)]
    # 25.11.7 and 26.05.3 `sbatch --test-only -N k`: 1-33 and 49-58 accepted, the rest refused.
    assert placed == [*range(1, 34), *range(49, 59)]


def test_rules_refuse_empty_blocks_before_25_05() -> None:
    padded = _old_block((4, 4, 4), 4, pad=1)
    with pytest.raises(Fatal, match="hasn't got nodes"):
        read(padded, (24, 11))
    assert read(padded, (25, 5)).groups(2) == [tuple(f"n{i}-{n}" for i in range(3) for n in "1234")]


def test_rules_accept_topographs_nvl_block_file() -> None:
    text = (FIXTURES / "fabric" / "slurm" / "topograph-expected-block.conf").read_text()
    blocks = _every_version(text)
    assert blocks.base == 8 and blocks.levels == {0, 1, 2}
    assert all(blocks.fits(k) for k in range(1, 97))


# -- our file --------------------------------------------------------------------------------------


def test_equal_leaves_give_blocks_pairs_and_quads_slurm_reads_as_ours() -> None:
    pos = Positions(_fabric((4,) * 8, (4,) * 4))
    text = slurm.block(build(pos))
    blocks = _every_version(text)
    assert text.splitlines()[-1] == "BlockSizes=4,8,16,32"  # 12 blocks: levels up to 8 blocks
    leaves = [tuple(leaf.nodes) for spine in pos.fabric.spines for leaf in spine.leaves]
    assert list(blocks.nodes) == leaves  # one block per leaf domain, fabric order
    # Every spine domain holds a multiple of four leaves: Slurm's pairs and quads are ours, and a
    # job of a leaf's, a pair's or a quad's node count is placed at that level.
    for level, label, k in ((1, LEAF_PAIR, 8), (2, LEAF_QUAD, 16)):
        ours = {
            frozenset(n for n, lb in pos.placed.items() if lb[label] == v)
            for v in _values(pos, label)
        }
        assert {frozenset(g) for g in blocks.groups(level)} == ours
        assert blocks.level(k) == level
    assert all(blocks.fits(k) for k in range(1, len(pos.placed) + 1))


def _values(pos: Positions, label: str) -> set[str]:
    return {labels[label] for labels in pos.placed.values()}


def test_near_equal_leaves_take_the_smallest_as_base() -> None:
    pos = Positions(_fabric((5, 4, 0, 7), (4, 6)))  # an empty slot, leaves of 4 to 7 nodes
    text = slurm.block(build(pos))
    blocks = _every_version(text)
    assert blocks.base == 4 and text.splitlines()[-1] == "BlockSizes=4,8,16"
    assert all("Nodes=" in line for line in text.splitlines() if line.startswith("BlockName="))
    assert len(blocks.names) == 5 and all(blocks.fits(k) for k in range(1, len(pos.placed) + 1))


def _nvl72(racks: int, per_leaf: int) -> tuple[Positions, dict[str, str]]:
    leaves = tuple(
        Leaf(
            f"leaf{lf}",
            (),
            tuple(
                tray_name(r, t)
                for r in range(lf * per_leaf, (lf + 1) * per_leaf)
                for t in range(TRAYS)
            ),
        )
        for lf in range(racks // per_leaf)
    )
    pos = Positions(Fabric("nvl72", (Spine("spine0", (), leaves),)))
    return pos, {tray_name(r, t): domain(r) for r in range(racks) for t in range(TRAYS)}


def test_nvl72_racks_are_one_block_per_nvlink_domain() -> None:
    pos, domains = _nvl72(8, 2)  # two racks under each of four leaf domains
    text = slurm.block(build(pos, domains))
    blocks = _every_version(text)
    assert text.splitlines()[0].endswith("one block per NVLink domain")
    assert text.splitlines()[-1] == "BlockSizes=18,36,72,144"
    assert list(blocks.nodes) == [tuple(tray_name(r, t) for t in range(TRAYS)) for r in range(8)]
    assert all(f"nvlink-domain-{domain(r)}" in text for r in range(8))
    assert all(blocks.fits(k) for k in range(1, 8 * TRAYS + 1))


def test_nvl72_rack_short_of_a_tray_takes_it_as_base() -> None:
    pos, domains = _nvl72(4, 1)
    gone = tray_name(2, 5)  # not in the source (drained, replaced)
    leaves = tuple(
        Leaf(lf.id, lf.switches, tuple(n for n in lf.nodes if n != gone))
        for lf in pos.fabric.spines[0].leaves
    )
    trimmed = Positions(Fabric("nvl72", (Spine("spine0", (), leaves),)))
    blocks = _every_version(slurm.block(build(trimmed, domains)))
    assert blocks.base == TRAYS - 1 and all(blocks.fits(k) for k in range(1, 4 * TRAYS))


def test_nvl72_tray_without_a_domain_is_a_block_too_small() -> None:
    pos, domains = _nvl72(4, 1)
    del domains[tray_name(2, 5)]  # its GPUs not in a fabric yet: a block of one tray
    with pytest.raises(slurm.BlockError, match=r"no-nvlink-leaf2: 1 nodes.*use -o slurm-tree"):
        slurm.block(build(pos, domains))


def test_uneven_fabrics_are_refused_with_one_line() -> None:
    with pytest.raises(slurm.BlockError) as err:
        slurm.block(build(uneven_positions()))
    assert "\n" not in str(err.value) and "use -o slurm-tree" in str(err.value)


def test_psmn_x5_is_refused_by_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["topology", "--source", str(IB / "psmn-x5.topofile")]
    argv += ["--status", str(IB / "psmn-x5.map"), "-o", "slurm-block"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "use -o slurm-tree" in err
    assert main([*argv[:-1], "slurm-tree"]) == 0  # the tree form serves it


def test_cli_block_file_is_read_by_slurm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("".join(f"SwitchName=l{i} Nodes=g{i}-[1-4]\n" for i in range(5)))
    assert main(["topology", "--source", str(conf), "-o", "slurm-block"]) == 0
    blocks = _every_version(capsys.readouterr().out)
    assert blocks.base == 4 and blocks.levels == {0, 1, 2} and blocks.fits(20)

"""`-o slurm-block --slurm-version X.Y` read back by Slurm's own rules (slurm_rules.py, from Slurm's
source), checked against the fabric's domains taken from the node labels (slurm_fixtures.agrees):
every fixture through every release. 25.05 and later print every fabric, empty blocks keeping the
aggregates on the fabric's pairs, quads and spines; 24.x and 23.11 print only fabrics that need no
empty block and no block of another size, and refuse the rest in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvl72 import TRAYS, domain, tray_name
from tests.reference import FIXTURES as DATA
from tests.webhook.export.slurm_fixtures import FIXTURES, agrees, domains, hand, model_of
from tests.webhook.export.slurm_rules import Fatal, read
from webhook.__main__ import main
from webhook.export import slurm_block
from webhook.export.model import build
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, Leaf, Spine

IB = DATA / "fabric" / "ibnetdiscover"
RELEASES = list(slurm_block.RELEASES)
OLD = {"23.11", "24.05", "24.11"}  # no empty blocks, none of another size
# Hand-reviewed: what each fixture gets before 25.05, and the sizes of pair, quad or spine
# domains Slurm refuses although the domain holds them (its level sized by the base, rule 10).
PRINTED_BEFORE_25_05 = {"equal-1-spine", "equal-6-1-spine"}
REFUSED_SIZES = {"psmn-x5": [86]}  # one spine of 86 nodes, quads of 58 and 28: -N 86 asks a quad


def _old_block(sizes: tuple[int, ...], base: int, pad: int = 0) -> str:
    """The block form as gpufabric printed it before: base = the largest leaf, padding lines."""
    lines = [f"BlockName=b{i} Nodes=n{i}-[1-{size}]" for i, size in enumerate(sizes)]
    lines += [f"BlockName=empty{i}" for i in range(pad)]
    return "\n".join([*lines, f"BlockSizes={base},{base * 2},{base * 4}"]) + "\n"


# -- the checker against what slurmctld did (slurm-block-rules.md rows 7, 8, 10, 14) -------------


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


def test_rules_of_23_11_want_block_levels_and_equal_blocks() -> None:
    with pytest.raises(Fatal, match="unrecognized key: BlockSizes"):
        read(_old_block((4, 4), 4), (23, 11))
    text = "BlockName=a Nodes=n[1-4]\nBlockName=b Nodes=m[1-3]\nBlockLevels=0,1\n"
    with pytest.raises(Fatal, match="children count no equal bblock_node_cnt"):
        read(text, (23, 11))
    with pytest.raises(Fatal, match="unrecognized key: BlockLevels"):
        read(text, (24, 11))


def test_rules_accept_topographs_nvl_block_file() -> None:
    text = (DATA / "fabric" / "slurm" / "topograph-expected-block.conf").read_text()
    for version in ((24, 5), (24, 11), (25, 5), (25, 11), (26, 5)):
        blocks = read(text, version)
        assert blocks.base == 8 and blocks.levels == {0, 1, 2}
        assert all(blocks.fits(k) for k in range(1, 97))


def test_rules_place_a_job_above_the_top_level_over_every_block() -> None:
    # What 24.x would read for two spines of four equal leaves without empty blocks: a 17-node
    # job is past the top level (16) and lands on all blocks as one, across the spines. This is
    # why 24.x and 23.11 get the refusal for any fabric of more than one spine.
    text = "".join(f"BlockName=b{i} Nodes=s{i // 4}l{i % 4}-[1-4]\n" for i in range(8))
    blocks = read(text + "BlockSizes=4,8,16\n", (24, 11))
    assert blocks.level(17) == -1 and blocks.fits(17)
    (every,) = blocks.groups(-1)
    assert {n.split("l")[0] for n in every} == {"s0", "s1"}


# -- our file, every fixture through every release -------------------------------------------------


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("fixture", list(FIXTURES))
def test_every_fixture_through_every_release(fixture: str, release: str) -> None:
    model, fabric = model_of(fixture)
    if release in OLD and fixture not in PRINTED_BEFORE_25_05:
        with pytest.raises(slurm_block.BlockError) as err:
            slurm_block.block(model, release)
        line = str(err.value)
        assert "\n" not in line and "--slurm-version 25.05" in line and "-o slurm-tree" in line
        return
    text = slurm_block.block(model, release)
    blocks, refused = agrees(text, release, fabric)
    assert refused == REFUSED_SIZES.get(fixture, [])
    # The sizes the command names on stderr are exactly those Slurm's rules refuse that a spine
    # domain holds.
    largest = max(len(d) for d in fabric.by_level["spine"])
    slurm_refuses = [k for k in range(1, largest + 1) if not blocks.fits(k)]
    assert slurm_block.refused_sizes(slurm_block.layout(model)) == slurm_refuses
    assert bool(slurm_block.refusal_note(model, release)) == bool(slurm_refuses)
    blocks = text.splitlines()
    assert ("BlockLevels=" if release == "23.11" else "BlockSizes=") in blocks[-1]
    assert (release in OLD) <= all("Nodes=" in ln for ln in blocks if ln.startswith("BlockName"))


def test_uneven_leaves_under_two_spines_keep_the_spines_apart() -> None:
    model, _ = model_of("443-44")
    text = slurm_block.block(model, "25.05")
    blocks = read(text, (25, 5))
    # Spine 0 in blocks 0-7 (its third leaf, then empty blocks), spine 1 from block 8.
    assert [len(b) for b in blocks.nodes] == [4, 4, 3, 0, 0, 0, 0, 0, 4, 4]
    assert text.splitlines()[-1] == "BlockSizes=4,8,16,32"
    assert [k for k in range(1, 21) if blocks.fits(k)] == list(range(1, 12))  # -N 12: no spine


def test_equal_leaves_under_two_spines_list_no_aggregate_across_them() -> None:
    model, fabric = model_of("equal-2-spines")
    blocks = read(slurm_block.block(model), (26, 5))
    assert all(fabric.inside(frozenset(nodes), "spine") for _, nodes in blocks.listed())
    assert max(k for k in range(1, 40) if blocks.fits(k)) == 16


def test_nvl72_racks_of_10_to_18_trays_take_the_largest_as_base() -> None:
    model, fabric = model_of("gb200-nvl72")
    text = slurm_block.block(model)
    assert text.splitlines()[0].endswith("one block per NVLink domain")
    blocks = read(text, (25, 5))
    assert sorted(len(b) for b in blocks.nodes) == [10, 11, 14, 15, 16, 17, 18, 18]
    assert blocks.base == 18
    quads = [len(d) for d in fabric.by_level["leaf-quad"]]
    assert blocks.level(max(quads)) == 2 and blocks.fits(max(quads))  # issue: a 63-tray job


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


@pytest.mark.parametrize("release", RELEASES)
def test_nvl72_two_racks_a_leaf_put_the_leaf_one_level_up(release: str) -> None:
    pos, values = _nvl72(8, 2)
    text = slurm_block.block(build(pos, values), release)
    agrees(text, release, domains(pos, values))
    assert text.splitlines()[-1] in ("BlockSizes=18,36,72,144", "BlockLevels=0,1,2,3")


def test_nvl72_tray_without_a_domain_is_a_block_of_its_own() -> None:
    pos, values = _nvl72(4, 1)
    del values[tray_name(2, 5)]  # its GPUs not in a fabric yet: a block of one tray
    model = build(pos, values)
    text = slurm_block.block(model)
    agrees(text, "26.05", domains(pos, values))
    assert f"Nodes={tray_name(2, 5)}\n" in text
    with pytest.raises(slurm_block.BlockError, match=r"no-nvlink-leaf2: 1 nodes"):
        slurm_block.block(model, "24.11")


def test_a_fabric_needing_more_than_2_15_blocks_a_spine_is_refused() -> None:
    pos = Positions(hand((1,), (1,) * 2**15))  # 32,769 one-node leaves under two spines
    with pytest.raises(slurm_block.BlockError, match="2 spine domains of 65536 blocks each"):
        slurm_block.block(build(pos))


def test_many_spine_domains_stop_at_65536_blocks() -> None:
    # 64 spines of 16 one-node leaves: keeping a 1,024-node job inside one spine takes 1,024
    # blocks a spine, 65,536 in all (the limit); one spine more is refused.
    assert len(slurm_block.layout(build(Positions(hand(*[(1,) * 16] * 64)))).blocks) > 64_000
    with pytest.raises(slurm_block.BlockError, match="65 spine domains of 2048 blocks"):
        slurm_block.block(build(Positions(hand(*[(1,) * 16] * 65))))


# -- the command -----------------------------------------------------------------------------------


def test_psmn_x5_by_release(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["topology", "--source", str(IB / "psmn-x5.topofile")]
    argv += ["--status", str(IB / "psmn-x5.map"), "-o", "slurm-block"]
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[-1] == "BlockSizes=24,48,96,192"  # default: the newest, 26.05
    assert main([*argv, "--slurm-version", "24.11"]) == 2  # input that does not fit, as elsewhere
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--slurm-version 25.05" in err
    assert main([*argv[:-1], "slurm-tree"]) == 0  # the tree form serves every release


def test_the_sizes_slurm_refuses_are_named_on_stderr_beside_the_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # docs/exports.md: on 25.11.7 and 26.05.3 psmn-x5 placed 1-33 and 49-58 of 86 nodes.
    argv = ["topology", "--source", str(IB / "psmn-x5.topofile")]
    assert main([*argv, "--status", str(IB / "psmn-x5.map"), "-o", "slurm-block"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "BlockSizes=24,48,96,192"  # the file is printed all the same
    assert err.count("\n") == 1 and "will refuse -N 34-48, 59-86 " in err
    assert "-o slurm-tree" in err
    # ... and GB200 racks of 10 to 18 trays (the example): -N 36 and 64-72.
    assert "will refuse -N 36, 64-72 " in slurm_block.refusal_note(model_of("gb200-nvl72")[0])
    assert slurm_block.refusal_note(model_of("equal-6-1-spine")[0]) == ""  # a short tail quad


def test_cli_block_file_is_read_by_slurm_23_11(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "topology.conf"
    leaves = "".join(f"SwitchName=l{i} Nodes=g{i}-[1-4]\n" for i in range(5))
    conf.write_text(leaves + "SwitchName=top Switches=l[0-4]\n")  # one spine domain
    argv = ["topology", "--source", str(conf), "-o", "slurm-block", "--slurm-version", "23.11"]
    assert main(argv) == 0
    blocks = read(capsys.readouterr().out, (23, 11))
    assert blocks.base == 4 and blocks.levels == {0, 1, 2, 3} and blocks.fits(20)


def test_unknown_release_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["topology", "--source", "x", "-o", "slurm-block", "--slurm-version", "22.05"])
    assert "invalid choice" in capsys.readouterr().err

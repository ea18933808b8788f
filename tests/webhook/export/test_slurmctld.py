"""`-o slurm-block` on a real slurmctld (issue 33): every fixture, through each release built under
../slurm-build (hack/slurm-build.sh; skipped, naming the command, without a build). slurmctld
starts without an error, `scontrol show topology` lists the blocks and aggregates slurm_rules.py
predicts, each a domain of the fabric, and `sbatch --test-only -N k` for every k up to one past the
node count is placed exactly when the rules place it, inside one domain of the level it asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.webhook.export.slurm_fixtures import FIXTURES, agrees, model_of
from tests.webhook.export.slurmctld import BUILD, builds, slurmctld
from webhook.export import slurm_block

BUILDS = builds()


@pytest.mark.parametrize("fixture", list(FIXTURES))
@pytest.mark.parametrize("release", list(BUILDS) or ["none"])
def test_slurmctld_reads_the_block_file_as_the_fabric(
    fixture: str, release: str, tmp_path: Path
) -> None:
    if release not in BUILDS:
        pytest.skip(f"no Slurm build beside the clone: run `{BUILD}` (see the script's header)")
    model, fabric = model_of(fixture)
    try:
        text = slurm_block.block(model, release)
    except slurm_block.BlockError:
        pytest.skip(f"Slurm {release} gets the refusal for {fixture} (test_slurm_block.py)")
    blocks, _ = agrees(text, release, fabric)
    with slurmctld(BUILDS[release], text, blocks.nodes, tmp_path) as ctld:
        assert ctld.problems() == []
        shown, aggregates = ctld.topology()
        assert shown == list(blocks.nodes)
        listed = [nodes for _, nodes in blocks.listed()]
        assert sorted(map(sorted, aggregates)) == sorted(map(sorted, listed))
        assert all(fabric.level_of(frozenset(a)) for a in aggregates if a)
        for k in range(1, len(fabric.nodes) + 2):
            placed = ctld.test_only(k)
            assert (placed is not None) == blocks.fits(k), f"-N {k}: {placed}"
            if placed:
                level = blocks.level(k)
                assert any(set(placed) <= set(g) for g in blocks.groups(level)), f"-N {k}"

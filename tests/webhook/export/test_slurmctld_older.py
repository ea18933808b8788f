"""Why `-o slurm-block` refuses most fabrics before 25.05, on a real slurmctld of each such release
built under ../slurm-build (skipped without one): the files the refusal avoids stop slurmctld with
the message slurm_rules.py predicts (the other release's levels key, a block of another size, a
block without nodes), and two spines of equal leaves without empty blocks let a job past the top
level spread over both spines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.webhook.export.slurm_fixtures import version
from tests.webhook.export.slurm_rules import Fatal, read
from tests.webhook.export.slurmctld import builds, slurmctld
from webhook.fabric.names import expand_hostlist

BUILDS = builds()
OLD: list[str] = [r for r in ("23.11", "24.05", "24.11") if r in BUILDS] or ["none"]


def _blocks(sizes: tuple[int, ...], levels: tuple[int, ...], release: str) -> str:
    """Blocks b<i> of n<i>-[1-size] (size 0: no Nodes=), then the release's levels key, or the
    other release's when `levels` is empty (base 4)."""
    lines = [
        f"BlockName=b{i}" + (f" Nodes=n{i}-[1-{size}]" if size else "")
        for i, size in enumerate(sizes)
    ]
    levels_key = release == "23.11"
    if not levels:
        levels_key, levels = not levels_key, (0, 1)
    if levels_key:
        lines.append("BlockLevels=" + ",".join(map(str, levels)))
    else:
        lines.append("BlockSizes=" + ",".join(str(4 << lv) for lv in levels))
    return "\n".join(lines) + "\n"


def _nodes(text: str) -> list[tuple[str, ...]]:
    return [tuple(expand_hostlist(m)) for m in re.findall(r"Nodes=(\S+)", text)]


CASES = {
    "other-levels-key": ((4, 4), ()),
    "block-of-another-size": ((4, 3), (0, 1)),
    "block-without-nodes": ((4, 0, 4), (0, 1)),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("release", OLD)
def test_slurmctld_stops_on_what_the_refusal_avoids(
    case: str, release: str, tmp_path: Path
) -> None:
    if release not in BUILDS:
        pytest.skip(
            "no Slurm build before 25.05 beside the clone: run `bash hack/slurm-build.sh 24.11`"
        )
    text = _blocks(*CASES[case], release)
    with pytest.raises(Fatal) as predicted:
        read(text, version(release))
    with (
        pytest.raises(AssertionError, match="did not start") as real,
        slurmctld(BUILDS[release], text, _nodes(text), tmp_path),
    ):
        pass
    assert str(predicted.value) in str(real.value)


@pytest.mark.parametrize("release", OLD)
def test_slurmctld_spreads_a_job_past_the_top_level_over_both_spines(
    release: str, tmp_path: Path
) -> None:
    if release not in BUILDS:
        pytest.skip(
            "no Slurm build before 25.05 beside the clone: run `bash hack/slurm-build.sh 24.11`"
        )
    # Spines n0-n3 and n4-n7 of four leaves of 4: the top level (2: 16 nodes) is one spine.
    text = _blocks((4,) * 8, (0, 1, 2), release)
    blocks = read(text, version(release))
    assert blocks.level(17) == -1 and blocks.fits(17)
    with slurmctld(BUILDS[release], text, _nodes(text), tmp_path) as ctld:
        assert ctld.problems() == []
        placed = ctld.test_only(17)
        assert placed is not None
        assert {int(n[1]) // 4 for n in placed} == {0, 1}  # both spines
        assert ctld.test_only(16) is not None and ctld.test_only(33) is None

"""The fabrics every Slurm block test runs (issue 33), and what the fabric says about them read from
the node labels alone (`domains`), the oracle the tests hold Slurm's aggregates against."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from common import nvlink
from tests.nvl72 import tray_status
from tests.webhook.export.slurm_rules import Blocks, read
from tests.webhook.fabric.helpers import ref, statuses_from_descriptions
from webhook.export.model import Model, build
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import Fabric, Leaf, Spine
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive

LEVELS = (("leaf", LEAF), ("leaf-pair", LEAF_PAIR), ("leaf-quad", LEAF_QUAD), ("spine", SPINE))


def hand(*spines: tuple[int, ...]) -> Fabric:
    """Spine s holds one leaf per entry, of that many nodes (0: an empty slot)."""
    out = []
    for s, sizes in enumerate(spines):
        leaves = tuple(
            Leaf(f"s{s}l{i}", (), tuple(f"gpu-s{s}l{i}-{n:02d}" for n in range(size)))
            for i, size in enumerate(sizes)
        )
        out.append(Spine(f"spine{s}", (), leaves))
    return Fabric("test", tuple(out))


def _gb200() -> tuple[Positions, dict[str, str]]:
    """The real GB200 NVL72 SuperPOD dump: one leaf domain per rack, 10 to 18 trays each (119),
    every tray's GPUs in its rack's NVLink domain (tests/nvl72.py)."""
    dump = ref("ibnetdiscover/topograph-gb200-railopt-example.out")
    statuses = {}
    for host, st in statuses_from_descriptions(dump).items():
        if "-dgx-" in host:
            rack = int(re.search(r"-dgx-(\d\d)-", host).group(1))  # type: ignore[union-attr]
            tray = int(host.rsplit("-c", 1)[1]) - 1
            statuses[host] = {**st, "gpus": tray_status(rack, tray)["status"]["gpus"]}
    fabric = derive(dump, "ibnetdiscover", join.from_statuses(statuses.items()))
    values = {n: nvlink.status_domain(s).value for n, s in statuses.items()}
    return Positions(fabric), {n: v for n, v in values.items() if v}


def _psmn() -> tuple[Positions, dict[str, str]]:
    """psmn-x5 (ENS Lyon): six leaf domains of 4 to 24 nodes under two spine domains."""
    text = ref("ibnetdiscover/psmn-x5.topofile")
    fabric = derive(text, "ibnetdiscover", join.parse_map(ref("ibnetdiscover/psmn-x5.map")))
    return Positions(fabric), {}


FIXTURES: dict[str, Callable[[], tuple[Positions, dict[str, str]]]] = {
    "equal-2-spines": lambda: (Positions(hand((4,) * 4, (4,) * 4)), {}),
    "443-44": lambda: (Positions(hand((4, 4, 3), (4, 4))), {}),
    "gb200-nvl72": _gb200,
    "psmn-x5": _psmn,
    # Beside the four: one spine of equal leaves (what 23.11 and 24.x can read), and
    # NVL72 racks two to a leaf domain (blocks below the leaf level).
    "equal-1-spine": lambda: (Positions(hand((4, 4, 4))), {}),
    # Six equal leaves: pairs, quads and a short tail quad that 23.11 and 24.x read too.
    "equal-6-1-spine": lambda: (Positions(hand((4,) * 6)), {}),
}


@dataclass(frozen=True)
class Domains:
    """The fabric's domains as node sets, from the labels (and NVLink values) only."""

    by_level: dict[str, list[frozenset[str]]]  # nvlink (lowest), leaf, leaf-pair, leaf-quad, spine
    nodes: frozenset[str]

    def level_of(self, group: frozenset[str]) -> str | None:
        """The lowest level that has exactly this node set as a domain."""
        return next((lv for lv, ds in self.by_level.items() if group in ds), None)

    def inside(self, group: frozenset[str], level: str) -> bool:
        return any(group <= d for d in self.by_level[level])


def domains(pos: Positions, values: dict[str, str]) -> Domains:
    by: dict[str, dict[tuple[str, ...], set[str]]] = {"lowest": {}}
    for node, labels in pos.placed.items():
        leaf = labels[LEAF]
        by["lowest"].setdefault((leaf, values.get(node, "")), set()).add(node)
        for name, label in LEVELS:
            by.setdefault(name, {}).setdefault((labels[label],), set()).add(node)
    out = {lv: [frozenset(s) for s in groups.values()] for lv, groups in by.items()}
    return Domains(out, frozenset(pos.placed))


def model_of(name: str) -> tuple[Model, Domains]:
    pos, values = FIXTURES[name]()
    return build(pos, values), domains(pos, values)


def version(name: str) -> tuple[int, int]:
    major, minor = name.split(".")
    return int(major), int(minor)


def agrees(text: str, release: str, fabric: Domains) -> tuple[Blocks, list[int]]:
    """Slurm `release` reads `text` (slurm_rules) as exactly the fabric's domains; AssertionError
    naming what differs. The blocks are the lowest domains, each once; every aggregate Slurm forms
    at an enforced level, and every one `scontrol show topology` lists, is a domain of the fabric
    and inside one spine; every domain is a block or a listed aggregate (before 24.11, which lists
    none, an aggregate of an enforced level); a job no spine holds is
    refused; a job of a pair's, quad's or spine's size is placed inside one domain of that level.
    Returned: the blocks, and the sizes of domains Slurm refuses although the domain holds them
    (its level sized by the base: slurm-block-rules.md row 10), for the caller to check."""
    blocks = read(text, version(release))
    found = [frozenset(b) for b in blocks.nodes if b]
    assert sorted(found, key=sorted) == sorted(fabric.by_level["lowest"], key=sorted)
    shown = set(found)
    for level in sorted(blocks.levels):
        for group in map(frozenset, blocks.groups(level)):
            if group:
                assert fabric.level_of(group), f"level {level}: {sorted(group)} is no domain"
                assert fabric.inside(group, "spine")
                if blocks.version < (24, 11):  # listed nowhere (`listed`): placement's only
                    shown.add(group)
    for _, nodes in blocks.listed():
        if nodes:
            assert fabric.level_of(frozenset(nodes)), f"listed {nodes} is no domain"
            shown.add(frozenset(nodes))
    for name in ("leaf", "leaf-pair", "leaf-quad", "spine"):
        assert set(fabric.by_level[name]) <= shown, f"a {name} is not listed"
    largest = max(len(d) for d in fabric.by_level["spine"])
    for k in range(largest + 1, len(fabric.nodes) + 2):
        assert not blocks.fits(k), f"-N {k} is placed, no spine holds it"
    refused = set()
    for name in ("leaf-pair", "leaf-quad", "spine"):
        for k in sorted({len(d) for d in fabric.by_level[name]}):
            lands = [g for g in blocks.groups(blocks.level(k)) if len(g) >= k]
            if not lands:
                refused.add(k)
            assert all(fabric.inside(frozenset(g), name) for g in lands)
    return blocks, sorted(refused)

"""Which HCAs form the node's compute fabric (the GPUDirect RDMA rails NCCL should use). Pure.

GPU nodes carry two kinds of NIC: the rails that carry GPU-to-GPU traffic between nodes, and
front-end / storage / management NICs. Both are RDMA devices, and on HGX boards both can sit on a
GPU's PCIe switch, so no single attribute separates them. The rule, in order:

1. Operator override: `--hca-exclude` globs never count; when `--hca-include` is given, exactly
   the HCAs it matches count (minus the excluded ones) and the rule below is skipped.
2. Only PCI devices with ports (software RDMA such as rxe/siw is not a rail).
3. Locality: if any HCA shares a PCIe switch with a GPU (PIX or PXB), only those are candidates.
   If none does (PCIe servers with every NIC behind the CPU, VMs without a topology file, nodes
   without GPUs), locality says nothing and every HCA is a candidate.
4. Link layer: the candidates' majority link layer (a tie goes to the faster, then InfiniBand).
5. Card and rate: among those, HCAs are grouped by card (hca_type + board_id). The fabric card is
   the group with the fastest ACTIVE port; a group with no ACTIVE port (rate unknown: a down port
   reports a meaningless rate) wins instead when it outnumbers that group, because rails outnumber
   front-end NICs. Members of the fabric card count unless they run ACTIVE below its top rate.
   A rail whose ports are down still counts: it is compute fabric, just not usable now.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from common.model import HcaPort

NEAR = ("PIX", "PXB")


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    ports: tuple[HcaPort, ...]
    card: str  # hca_type/board_id: the same string means the same kind of card
    on_pci: bool = True
    gpu_distance: str | None = None  # to the nearest GPU; None: no GPU or locality unknown


@dataclass(frozen=True, slots=True)
class Choice:
    compute_fabric: bool
    selection: str


def split_patterns(values: Sequence[str]) -> tuple[str, ...]:
    """Repeatable and comma-separated flag values -> glob patterns ("mlx5_0,mlx5_1" "eth*")."""
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def unmatched(
    names: Sequence[str], include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> tuple[tuple[str, str], ...]:
    """(flag, pattern) of the operator's patterns that name no HCA of this node: a typo there
    silently turns every rail off (include) or leaves a front-end NIC in (exclude)."""
    return tuple(
        (flag, pattern)
        for flag, patterns in (("--hca-include", include), ("--hca-exclude", exclude))
        for pattern in patterns
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names)
    )


def _match(name: str, patterns: Sequence[str]) -> str | None:
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)


def _layer(c: Candidate) -> str:
    active = [p for p in c.ports if p.state == "ACTIVE"]
    return (active or list(c.ports))[0].link_layer


def _rate(c: Candidate) -> float | None:
    """Fastest ACTIVE port; None when no port is ACTIVE (a down port's rate means nothing)."""
    rates = [p.rate_gbps for p in c.ports if p.state == "ACTIVE"]
    return max(rates) if rates else None


def _gbps(rate: float) -> str:
    return f"{rate:g} Gb/s"


def select(
    candidates: Sequence[Candidate],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> dict[str, Choice]:
    out: dict[str, Choice] = {}
    for c in candidates:
        if (pat := _match(c.name, exclude)) is not None:
            out[c.name] = Choice(False, f"excluded by --hca-exclude {pat}")
        elif include:
            pat = _match(c.name, include)
            out[c.name] = (
                Choice(True, f"included by --hca-include {pat}")
                if pat is not None
                else Choice(False, "not named by --hca-include")
            )
    if include:
        return out
    rest = [c for c in candidates if c.name not in out]
    for c in rest:
        if not c.on_pci:
            out[c.name] = Choice(False, "not a PCI device (software RDMA)")
        elif not c.ports:
            out[c.name] = Choice(False, "no ports")
    pool = [c for c in rest if c.name not in out]
    near = [c for c in pool if c.gpu_distance in NEAR]
    if near:
        for c in pool:
            if c.gpu_distance not in NEAR:
                where = (
                    f"{c.gpu_distance} to the nearest GPU"
                    if c.gpu_distance
                    else "no known PCIe path to a GPU"
                )
                out[c.name] = Choice(False, f"{where}, while other HCAs share a switch with one")
        pool = near
    where = "shares a PCIe switch with a GPU" if near else "no HCA shares a switch with a GPU"
    out.update(_by_link(pool, where))
    return out


def _by_link(pool: list[Candidate], where: str) -> dict[str, Choice]:
    out: dict[str, Choice] = {}
    if not pool:
        return out
    layer_of = {c.name: _layer(c) for c in pool}
    rate_of = {c.name: _rate(c) for c in pool}
    layers = Counter(layer_of.values())

    def layer_rank(layer: str) -> tuple[int, float, bool]:
        rates = [
            r for c in pool if layer_of[c.name] == layer and (r := rate_of[c.name]) is not None
        ]
        return (layers[layer], max(rates, default=0.0), layer == "InfiniBand")

    layer = max(sorted(layers), key=layer_rank)
    same = [c for c in pool if layer_of[c.name] == layer]
    for c in pool:
        if layer_of[c.name] != layer:
            out[c.name] = Choice(
                False,
                f"front-end: {layer_of[c.name]}, the rails are {layer} "
                f"({len(same)} of {len(pool)} HCAs)",
            )
    cards: dict[str, list[Candidate]] = {}
    for c in same:
        cards.setdefault(c.card, []).append(c)

    def top(group: list[Candidate]) -> float | None:
        rates = [r for c in group if (r := rate_of[c.name]) is not None]
        return max(rates) if rates else None

    live = [g for g in cards.values() if top(g) is not None]
    fabric = max(live, key=lambda g: (top(g) or 0.0, len(g)), default=None)
    dead = [g for g in cards.values() if top(g) is None]
    biggest_dead = max(dead, key=len, default=None)
    if biggest_dead is not None and (fabric is None or len(biggest_dead) > len(fabric)):
        fabric = biggest_dead
    assert fabric is not None  # noqa: S101 - `same` is non-empty, so some group exists
    rate = top(fabric)
    card = fabric[0].card or "unnamed card"
    for c in same:
        mine = rate_of[c.name]
        if c.card != fabric[0].card:
            speed = _gbps(mine) if mine is not None else "down"
            out[c.name] = Choice(
                False, f"front-end: card {c.card or '?'} at {speed}; the rails are {card}"
            )
        elif rate is None:
            out[c.name] = Choice(True, f"rail: {layer} {card}, no port ACTIVE; {where}")
        elif mine is None:
            out[c.name] = Choice(
                True, f"rail: {layer} {card}, no port ACTIVE (the rails run {_gbps(rate)})"
            )
        elif mine < rate:
            out[c.name] = Choice(
                False, f"runs {layer} {_gbps(mine)}, below the rails' {_gbps(rate)}"
            )
        else:
            out[c.name] = Choice(True, f"rail: {layer} {_gbps(mine)}, {where}")
    return out

"""Ring boundary crossings for bench/group_sim.py: how often a ring over a job's ranks (NCCL's
order) steps from one domain to another, and how many of those steps its placement forces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ring:
    crossings: int  # consecutive ranks (wrap-around included) on different domains
    forced: int  # the fewest any rank order could have: the domains used, when more than one
    domains: int  # distinct domains the job's nodes are in


def ring(nodes_by_rank: Sequence[str], domain_of: Mapping[str, str]) -> Ring:
    doms = [domain_of[n] for n in nodes_by_rank]
    n = len(doms)
    crossings = sum(doms[i] != doms[(i + 1) % n] for i in range(n)) if n > 1 else 0
    k = len(set(doms))
    return Ring(crossings, k if k > 1 else 0, k)

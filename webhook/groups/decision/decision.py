"""What a group placement decision takes and gives: the members and the request, and where the
members go (Placed, one Assignment each) or why they wait. Plain values: choose.py decides, the
placer, explain, seating and the benchmarks read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from webhook.groups.model.names import Level, Locality
from webhook.groups.model.selector import Selector

Policy = Literal["tightest", "first"]


@dataclass(frozen=True, slots=True)
class Member:
    key: str  # the pod's namespace/name
    gpus: int
    selector: Selector
    whole: bool = False  # no other member of its group on its node (one IMEX channel per node)
    avoid: frozenset[str] = frozenset()  # nodes it may not take (its group's members are there)


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    members: tuple[Member, ...]
    locality: Locality = "required"
    level: Level | Literal["auto"] = "auto"
    within: tuple[Level, str] | None = None  # the group's recorded domain (recovery)


@dataclass(frozen=True, slots=True)
class Assignment:
    member: str
    level: Level | None  # None: no network labels anywhere, preferred placed without a domain
    domain: str
    node: str  # where the GPUs are promised; the scheduler picks the node itself


@dataclass(frozen=True, slots=True)
class Placed:
    level: Level | None
    assignments: tuple[Assignment, ...]

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.domain for a in self.assignments))


@dataclass(frozen=True, slots=True)
class Waiting:
    level: Level | None
    message: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """One domain of a level as explain shows it."""

    domain: str
    free: int  # free GPUs on the domain's usable nodes
    usable_free: int  # of those, on nodes the members' own constraints admit
    fits: bool
    why: str


Decision = Placed | Waiting

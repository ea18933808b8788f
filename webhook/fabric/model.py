"""The one model every source turns into: spine domains holding leaf domains in adjacency order."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain


class SourceError(ValueError):
    """Input that cannot be turned into a fabric; ``line`` is 1-based (None: the whole input)."""

    def __init__(self, message: str, line: int | None = None, text: str = "") -> None:
        self.line = line
        self.text = text
        where = f"line {line}: " if line is not None else ""
        shown = f" ({text.strip()[:80]!r})" if text.strip() else ""
        super().__init__(f"{where}{message}{shown}")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf domain: one leaf switch, or the rail leaves one scalable unit shares.

    ``nodes`` is empty for a placeholder slot (an empty Slurm block), which still counts for
    alignment so that pairs and quads follow the source's own order.
    """

    id: str
    switches: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Spine:
    """Leaf domains that reach each other through one spine layer, in adjacency order."""

    id: str
    switches: tuple[str, ...] = ()
    leaves: tuple[Leaf, ...] = ()


@dataclass(frozen=True, slots=True)
class Unplaced:
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Fabric:
    source: str  # ibnetdiscover | topology.conf | topology.yaml | nodes.yaml | labels:<preset>
    spines: tuple[Spine, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    problems: tuple[str, ...] = ()
    tiers: tuple[
        int, ...
    ] = ()  # switches per tier, bottom (leaves) first, when the source has them

    @property
    def leaves(self) -> tuple[Leaf, ...]:
        return tuple(leaf for spine in self.spines for leaf in spine.leaves)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(chain.from_iterable(leaf.nodes for leaf in self.leaves))

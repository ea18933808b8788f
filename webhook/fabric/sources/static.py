"""A static map for fabrics without discovery (RoCE, hand-kept inventories): `nodes.yaml`.

Format (documented in docs/topology.md)::

    spines:                       # optional; without it every leaf is in one spine domain
      - name: spine-a
        leaves:                   # in order: adjacent leaves are next to each other
          - name: leaf1
            nodes: [gpu-[001-032]]   # node names or Slurm hostlist expressions
    leaves: [...]                 # instead of spines: leaves of a single spine domain

Leaf names are the operator's, and two spines may each have a `t1`. Under `spines:` a leaf domain
is therefore always `<spine>.<leaf>` (`spine-a.t1`): unique because spine names are, and stable
because it depends on nothing but its own two names, so an edit elsewhere in the map never moves
it. Under `leaves:` alone the map has one spine and the leaf name is already unique.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.fabric.model import Fabric, Leaf, SourceError, Spine
from webhook.fabric.sources.build import first_claim, load_yaml, yaml_hostlist


def looks_like(data: object) -> bool:
    return isinstance(data, Mapping) and ("spines" in data or "leaves" in data)


def _leaves(items: Any, where: str, spine: str | None) -> list[tuple[str, list[str]]]:
    """(leaf id, nodes) in map order; the id is `<spine>.<name>` when `spine` is given."""
    if not isinstance(items, list):
        raise SourceError(f"{where}: `leaves` must be a list")
    out = []
    for i, leaf in enumerate(items):
        if not isinstance(leaf, Mapping) or not leaf.get("name"):
            raise SourceError(f"{where}: leaves[{i}] needs a `name`")
        name = str(leaf["name"])
        leaf_id = f"{spine}.{name}" if spine is not None else name
        out.append((leaf_id, list(yaml_hostlist(leaf.get("nodes"), f"leaf {leaf_id}"))))
    return out


def _unique(names: list[str], what: str) -> None:
    """Two domains with one name would share a label value: refuse the map instead."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SourceError(f"{what} {name!r} appears twice; names must be unique")
        seen.add(name)


def parse(text: str) -> Fabric:
    data: Any = load_yaml(text)
    if not looks_like(data):
        raise SourceError("nodes.yaml needs a `spines:` or `leaves:` list")
    if "spines" in data:
        spines_in = data["spines"]
        if not isinstance(spines_in, list):
            raise SourceError("`spines` must be a list")
        raw = []
        for i, s in enumerate(spines_in):
            if not isinstance(s, Mapping) or not s.get("name"):
                raise SourceError(f"spines[{i}] needs a `name`")
            name = str(s["name"])
            raw.append((name, _leaves(s.get("leaves") or [], f"spine {name}", name)))
    else:
        raw = [(str(data.get("spine") or "spine"), _leaves(data["leaves"], "leaves", None))]
    _unique([spine for spine, _ in raw], "spine")
    _unique([leaf for _, leaves in raw for leaf, _ in leaves], "leaf")
    placed, unplaced, problems = first_claim(
        (n, leaf, f"spine {spine}")
        for spine, leaves in raw
        for leaf, nodes in leaves
        for n in nodes
    )
    spines = tuple(
        Spine(
            name,
            (),
            tuple(
                Leaf(leaf, (), tuple(n for n in nodes if placed.get(n) == leaf))
                for leaf, nodes in leaves
            ),
        )
        for name, leaves in raw
    )
    return Fabric("nodes.yaml", spines, tuple(unplaced), tuple(problems))

"""A static map for fabrics without discovery (RoCE, hand-kept inventories): `nodes.yaml`.

Format (documented in docs/topology.md)::

    spines:                       # optional; without it every leaf is in one spine domain
      - name: spine-a
        leaves:                   # in order: adjacent leaves are next to each other
          - name: leaf1
            nodes: [gpu-[001-032]]   # node names or Slurm hostlist expressions
    leaves: [...]                 # instead of spines: leaves of a single spine domain
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.fabric.build import first_claim, load_yaml
from webhook.fabric.model import Fabric, Leaf, SourceError, Spine
from webhook.fabric.names import expand_hostlist


def looks_like(data: object) -> bool:
    return isinstance(data, Mapping) and ("spines" in data or "leaves" in data)


def _nodes(value: Any, where: str) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    try:
        return [n for item in items for n in expand_hostlist(str(item))]
    except ValueError as err:
        raise SourceError(f"{where}: {err}") from None


def _leaves(items: Any, where: str) -> list[tuple[str, list[str]]]:
    if not isinstance(items, list):
        raise SourceError(f"{where}: `leaves` must be a list")
    out = []
    for i, leaf in enumerate(items):
        if not isinstance(leaf, Mapping) or not leaf.get("name"):
            raise SourceError(f"{where}: leaves[{i}] needs a `name`")
        out.append((str(leaf["name"]), _nodes(leaf.get("nodes"), f"leaf {leaf['name']}")))
    return out


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
            raw.append((str(s["name"]), _leaves(s.get("leaves") or [], f"spine {s['name']}")))
    else:
        raw = [(str(data.get("spine") or "spine"), _leaves(data["leaves"], "leaves"))]
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

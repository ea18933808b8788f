"""Shared steps of the tree sources: union-find, spine domains from shared parents, order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import yaml

from common import yamlload
from common.natural import natural_key, natural_sorted
from webhook.fabric.model import Leaf, SourceError, Spine, Unplaced
from webhook.fabric.names import expand_hostlist


class UnionFind:
    def __init__(self, items: Iterable[str] = ()) -> None:
        self.parent: dict[str, str] = {i: i for i in items}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for item in self.parent:
            out.setdefault(self.find(item), []).append(item)
        return list(out.values())


def spines_from_parents(
    leaves: Iterable[Leaf],
    parents: Mapping[str, Iterable[str]],
    peers: Iterable[tuple[str, str]] = (),
) -> tuple[Spine, ...]:
    """Leaf domains that share a parent switch (or are cabled to each other) form one spine domain.

    Within a spine domain the leaves are in natural order of their ids; the spine domain is named
    after its first parent switch (or, with no parent, its first leaf). Spine domains are ordered
    by id.
    """
    by_id = {leaf.id: leaf for leaf in leaves}
    uf = UnionFind(by_id)
    owner: dict[str, str] = {}
    for leaf_id in by_id:
        for parent in parents.get(leaf_id, ()):
            if parent in owner:
                uf.union(owner[parent], leaf_id)
            else:
                owner[parent] = leaf_id
    for a, b in peers:
        if a in by_id and b in by_id:
            uf.union(a, b)
    spines = []
    for group in uf.groups():
        ids = natural_sorted(group)
        ups = natural_sorted({p for leaf_id in ids for p in parents.get(leaf_id, ())})
        spines.append(Spine(ups[0] if ups else ids[0], tuple(ups), tuple(by_id[i] for i in ids)))
    return tuple(sorted(spines, key=lambda s: natural_key(s.id)))


def first_claim(
    memberships: Iterable[tuple[str, str, str]],
) -> tuple[dict[str, str], list[Unplaced], list[str]]:
    """(node, leaf, where) in source order -> node -> leaf for nodes listed under exactly one leaf.

    A node listed under two leaves cannot be placed truthfully: it is left unplaced, with both
    places named, and reported as a problem (its labels are not guessed).
    """
    seen: dict[str, list[tuple[str, str]]] = {}
    for node, leaf, where in memberships:
        places = seen.setdefault(node, [])
        if all(leaf != p for p, _ in places):
            places.append((leaf, where))
    placed, unplaced, problems = {}, [], []
    for node, places in seen.items():
        if len(places) == 1:
            placed[node] = places[0][0]
            continue
        said = ", ".join(f"{leaf} ({where})" for leaf, where in places)
        unplaced.append(Unplaced(node, f"listed under {len(places)} leaves: {said}"))
        problems.append(f"node {node} is listed under {len(places)} leaves: {said}")
    return placed, unplaced, problems


def yaml_hostlist(value: object, where: str, key: str = "nodes") -> tuple[str, ...]:
    """Node names from a YAML `nodes:` (or `key:`) value, a Slurm hostlist or a list of them.
    Anything else is a SourceError naming `where`: a number, a null or a mapping would otherwise
    become a node named `1`, `None` or `{'a': 'b'}` (and `nodes: [001]` loses its zeros)."""
    if value is None or value == "":
        return ()
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            hint = " (quote it)" if isinstance(item, int | float) else ""
            raise SourceError(f"{where}: {key}[{i}] is {item!r}, not a node name or hostlist{hint}")
        try:
            out += expand_hostlist(item)
        except ValueError as err:
            raise SourceError(f"{where}: {err}") from None
    return tuple(out)


def load_yaml(text: str) -> object:
    """YAML, or a SourceError naming the line where it stops being YAML."""
    try:
        return yamlload.load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise SourceError(
            f"not YAML: {getattr(err, 'problem', err)}", mark.line + 1 if mark else None
        ) from None
    except RecursionError:  # the pure-Python parser (libyaml stops at 1,000 levels: YAMLError)
        raise SourceError("not YAML: nested too deeply") from None

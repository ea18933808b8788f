"""ibnetdiscover graph + node GUIDs -> Fabric: leaves, rail groups, spine domains.

Leaf = a switch a node's compute HCA is cabled to. On a rail-optimized fabric one node touches
one leaf per rail, so leaves that serve (mostly) the same nodes merge into one leaf domain: the
scalable unit's rail leaves. Spine domains: leaf domains that share an upper switch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from webhook.fabric.build import UnionFind, spines_from_parents
from webhook.fabric.ibnet import Dump, switch_name
from webhook.fabric.model import Fabric, Leaf, Unplaced
from webhook.fabric.names import natural_key, natural_sorted

_DEFAULT_DESC = ("Mellanox Technologies Aggregation Node",)


def _names(dump: Dump) -> dict[str, str]:
    """Switch id -> readable name; a name two switches share falls back to the GUID id."""
    descs = Counter(n.desc.strip() for n in dump.nodes.values() if n.is_switch)
    unique = {d for d, c in descs.items() if c == 1}
    names = {n.id: switch_name(n, unique) for n in dump.nodes.values() if n.is_switch}
    dup = {v for v, c in Counter(names.values()).items() if c > 1}
    return {k: (k if v in dup else v) for k, v in names.items()}


def _join_by_guid(
    dump: Dump, nodes: Mapping[str, frozenset[int]]
) -> tuple[dict[str, str], list[str]]:
    owner: dict[int, str] = {}
    problems = []
    for name, guids in nodes.items():
        for g in guids:
            if owner.setdefault(g, name) != name:
                problems.append(f"GUID {g:016x} is claimed by nodes {owner[g]} and {name}")
    ca_node: dict[str, str] = {}
    for ca in dump.nodes.values():
        if ca.is_switch:
            continue
        for g in (ca.guid, *ca.port_guids):
            if g in owner:
                ca_node[ca.id] = owner[g]
                break
    return ca_node, problems


def _join_by_description(dump: Dump) -> dict[str, str]:
    """Preview only (no statuses given): `host dev` NodeDescriptions name the host."""
    out = {}
    for ca in dump.nodes.values():
        words = ca.desc.split()
        if not ca.is_switch and 1 <= len(words) <= 2 and ca.desc not in _DEFAULT_DESC:
            out[ca.id] = words[0]
    return out


def _rail_groups(node_leaves: Mapping[str, Counter[str]]) -> UnionFind:
    """Merge leaves that serve mostly the same nodes (rails of one scalable unit).

    Two leaves merge when at least half the nodes of the smaller one also reach the other: a whole
    SU shares its rail leaves, while a rail swap or a miscabled HCA links two leaves through one
    node only, which is not enough to merge two SUs.
    """
    served: dict[str, int] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for leaves in node_leaves.values():
        names = sorted(leaves)
        for i, a in enumerate(names):
            served[a] += 1
            for b in names[i + 1 :]:
                together[(a, b)] += 1
    uf = UnionFind(served)
    for (a, b), count in together.items():
        if 2 * count >= min(served[a], served[b]):
            uf.union(a, b)
    return uf


def derive(dump: Dump, nodes: Mapping[str, frozenset[int]] | None) -> Fabric:
    """The fabric of `dump` for the given nodes (None: preview named by NodeDescription)."""
    names = _names(dump)
    problems: list[str] = []
    if dump.skipped:
        problems.append(f"ignored {len(dump.skipped)} line(s) before the header (tool messages)")
    if nodes is None:
        ca_node = _join_by_description(dump)
        problems.append(
            "no GpuNodeStatus given: nodes are named from the HCAs' NodeDescription (preview only;"
            " the labeler joins by HCA GUID)"
        )
    else:
        ca_node, join_problems = _join_by_guid(dump, nodes)
        problems += join_problems
    adjacent = dump.adjacent
    node_leaves: dict[str, Counter[str]] = defaultdict(Counter)
    for ca_id, node in ca_node.items():
        for peer in adjacent.get(ca_id, ()):
            if peer.startswith("S-"):
                node_leaves[node][names[peer]] += 1
    groups = _rail_groups(node_leaves)
    leaf_of_switch = {}
    for group in groups.groups():
        first = natural_sorted(group)[0]
        for sw in group:
            leaf_of_switch[sw] = first
    members: dict[str, list[str]] = defaultdict(list)
    unplaced: list[Unplaced] = []
    for node in natural_sorted(node_leaves):
        per_domain: Counter[str] = Counter()
        for sw, count in node_leaves[node].items():
            per_domain[leaf_of_switch[sw]] += count
        best = min(per_domain, key=lambda d: (-per_domain[d], natural_key(d)))
        members[best].append(node)
        if len(per_domain) > 1:
            spread = ", ".join(f"{d}: {c}" for d, c in sorted(per_domain.items()))
            problems.append(
                f"node {node}: HCAs on {len(per_domain)} leaf domains ({spread}); placed in {best}"
            )
    for node in natural_sorted(set(nodes or ()) - set(node_leaves)):
        why = (
            "no compute HCA GUID in the status"
            if not (nodes or {}).get(node)
            else (
                "none of its HCA GUIDs is cabled to a switch in the dump"
                + (
                    f" (dump generated on {dump.generated}; is the node newer?)"
                    if dump.generated
                    else ""
                )
            )
        )
        unplaced.append(Unplaced(node, why))
    missing = sum(1 for u in unplaced if u.reason.startswith("none of its"))
    if missing:
        when = f" (generated on {dump.generated})" if dump.generated else ""
        problems.append(
            f"{missing} node(s) with compute HCAs are not in the dump{when}: is the dump older "
            "than the newest nodes? Run ibnetdiscover again"
        )
    switch_of_name = {v: k for k, v in names.items()}
    domain_switches: dict[str, list[str]] = defaultdict(list)
    for sw, dom in leaf_of_switch.items():
        domain_switches[dom].append(sw)
    leaves = [
        Leaf(dom, tuple(natural_sorted(domain_switches[dom])), tuple(natural_sorted(members[dom])))
        for dom in domain_switches
        if members[dom]
    ]
    tiers, level = _tiers(
        dump, {switch_of_name[sw] for leaf in leaves for sw in leaf.switches}, adjacent
    )
    parents: dict[str, set[str]] = defaultdict(set)
    peers = []
    for leaf in leaves:
        for sw in leaf.switches:
            for peer in adjacent.get(switch_of_name[sw], ()):
                if level.get(peer) == 1:
                    parents[leaf.id].add(names[peer])
                elif level.get(peer) == 0 and leaf_of_switch.get(names[peer], leaf.id) != leaf.id:
                    peers.append((leaf.id, leaf_of_switch[names[peer]]))
    unreached = sum(1 for n in dump.nodes.values() if n.is_switch and n.id not in level)
    if unreached:
        problems.append(f"{unreached} switch(es) are not connected to any leaf that holds a node")
    if not leaves:
        problems.append("no node's HCA is cabled to a switch in the dump")
    return Fabric(
        "ibnetdiscover",
        spines_from_parents(leaves, parents, peers),
        tuple(unplaced),
        tuple(problems),
        tiers,
    )


def _tiers(
    dump: Dump, leaf_ids: set[str], adjacent: Mapping[str, set[str]]
) -> tuple[tuple[int, ...], dict[str, int]]:
    """Breadth-first levels over switch links from the leaves: spines attached to spines go up."""
    level = dict.fromkeys(leaf_ids, 0)
    frontier = sorted(leaf_ids)
    counts = [len(frontier)] if frontier else []
    while frontier:
        nxt = sorted(
            {
                p
                for sw in frontier
                for p in adjacent.get(sw, ())
                if p.startswith("S-") and p not in level
            }
        )
        for sw in nxt:
            level[sw] = len(counts)
        if nxt:
            counts.append(len(nxt))
        frontier = nxt
    return tuple(counts), level

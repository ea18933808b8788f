"""ibnetdiscover graph + node GUIDs -> Fabric: leaves, rail groups, spine domains.

Leaf = a switch a node's compute HCA is cabled to. On a rail-optimized fabric one node touches
one leaf per rail, so leaves that serve (mostly) the same nodes merge into one leaf domain: the
scalable unit's rail leaves. Spine domains: leaf domains that share an upper switch.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from itertools import chain, pairwise, repeat

import numpy as np

from common.natural import natural_key, natural_ranks, natural_sorted
from webhook.fabric.model import Fabric, Leaf, Unplaced
from webhook.fabric.sources.build import UnionFind, spines_from_parents
from webhook.fabric.sources.ib import guids
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.ib.reader import switch_name

_AGGREGATION_NODE = "Mellanox Technologies Aggregation Node"  # SHARP's CA inside a switch
# A switch's own CAs take node GUIDs just above the switch's (the Aggregation Node: +0x8 on
# Quantum, +0x10 on Quantum-2, in every real dump of reference/fabric): no node owns one.
_SWITCH_GUID_BLOCK = 0x100


def _names(dump: Dump) -> dict[int, str]:
    """Switch number -> readable name; a name two switches share falls back to the GUID id."""
    switches = dump.switches()
    ids, descs = dump.ids_of(switches), dump.descs_of(switches)
    counted = Counter(d.strip() for d in descs)
    unique = {d for d, c in counted.items() if c == 1}
    names = dict(zip(switches, map(switch_name, ids, descs, repeat(unique)), strict=True))
    dup = {v for v, c in Counter(names.values()).items() if c > 1}
    if not dup:
        return names
    id_of = dict(zip(switches, ids, strict=True))
    return {k: (id_of[k] if v in dup else v) for k, v in names.items()}


def _join_by_description(dump: Dump) -> tuple[dict[int, str], int]:
    """Preview only (no statuses given): `host dev` NodeDescriptions name the host. Also the
    number of cabled HCAs a node could own that were skipped because their NodeDescription is
    not that (a firmware default such as "MT25408 ConnectX Mellanox Technologies"); a switch's
    own CAs are neither named nor counted."""
    out = {}
    skipped = 0
    inside = _in_switch_guid_blocks(dump)
    for ca in dump.host_switch:
        desc = dump.desc_of(ca)
        if ca in inside or desc == _AGGREGATION_NODE:
            continue
        words = desc.split()
        if 1 <= len(words) <= 2:
            out[ca] = words[0]
        else:
            skipped += 1
    return out, skipped


def _in_switch_guid_blocks(dump: Dump) -> set[int]:
    """The CAs whose node GUID lies in the GUID block of the switch they are cabled to: parts
    of that switch (its SHARP Aggregation Node, whatever its NodeDescription), not HCAs of any
    node. One in every Quantum switch: a dump of a large fabric holds hundreds."""
    hosts, firsts = dump.hosts()
    ca_guids = np.asarray(dump.guids_of(hosts), np.uint64)
    switch_guids = np.asarray(dump.guids_of(firsts), np.uint64)
    ahead = ca_guids > switch_guids  # guards the subtraction below, which wraps otherwise
    near = ahead & (ca_guids - switch_guids < _SWITCH_GUID_BLOCK)
    return set(np.asarray(hosts, np.int64)[near].tolist())


def _hosts_on_spines(dump: Dump, ca_node: Mapping[int, str]) -> dict[int, int]:
    """Preview only: switches that hold a few hosts (UFM, management) but sit above a leaf.

    Without statuses every named host counts, so a spine with a management host would become a
    leaf domain. A switch is a spine here when most of its cables go to other switches and one of
    them is a leaf that is not (at least half its cables go to hosts). Returns switch -> hosts.
    """
    hosts: Counter[int] = Counter()
    for ca in ca_node:
        hosts.update(dump.switches_of(ca))
    cables = dump.switch_cables
    mostly_hosts = {sw for sw, n in hosts.items() if n >= cables.get(sw, 0)}
    return {
        sw: n
        for sw, n in hosts.items()
        if sw not in mostly_hosts and not mostly_hosts.isdisjoint(dump.switch_links.get(sw, ()))
    }


def _rail_groups(kinds: Counter[tuple[str, ...]]) -> UnionFind:
    """Merge leaves that serve mostly the same nodes (rails of one scalable unit).

    Two leaves merge when at least half the nodes of the smaller one also reach the other: a whole
    SU shares its rail leaves, while a rail swap or a miscabled HCA links two leaves through one
    node only, which is not enough to merge two SUs.
    """
    # Nodes of one scalable unit reach the same leaves: each set of leaves is counted once.
    served: dict[str, int] = Counter()
    for names, k in kinds.items():
        for a in names:
            served[a] += k
    uf = UnionFind(served)
    together: Counter[tuple[str, str]] = Counter()
    for names, k in kinds.items():
        if any(served[a] == k for a in names):
            # A leaf only these nodes reach: with it, every leaf they reach passes the test
            # below (together >= k = its served), so the set merges whole, without its pairs.
            for a, b in pairwise(names):
                uf.union(a, b)
            continue
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                together[(a, b)] += k
    for (a, b), count in together.items():
        if 2 * count >= min(served[a], served[b]):
            uf.union(a, b)
    return uf


def derive(dump: Dump, nodes: Mapping[str, frozenset[int]] | None) -> Fabric:
    """The fabric of `dump` for the given nodes (None: preview named by NodeDescription)."""
    names = _names(dump)
    problems: list[str] = []
    unnamed = 0
    if dump.skipped:
        problems.append(f"ignored {len(dump.skipped)} line(s) before the header (tool messages)")
    if nodes is None:
        ca_node, unnamed = _join_by_description(dump)
        problems.append(
            "no GpuNodeStatus given: nodes are named from the HCAs' NodeDescription (preview only;"
            " the labeler joins by HCA GUID)"
        )
        if unnamed:
            problems.append(
                f"skipped {unnamed} cabled HCA(s) whose NodeDescription is not `host device` "
                "(e.g. the firmware default): give their nodes' GpuNodeStatus or a `GUID "
                "hostname` map with --status"
            )
        on_spines = _hosts_on_spines(dump, ca_node)
        if on_spines:
            ca_node = {
                ca: n
                for ca, n in ca_node.items()
                if on_spines.keys().isdisjoint(dump.switches_of(ca))
            }
            listed = ", ".join(natural_sorted(names[s] for s in on_spines))
            problems.append(
                f"ignored {sum(on_spines.values())} host(s) on {len(on_spines)} spine switch(es) "
                f"({listed}): management or UFM hosts (preview only; the labeler places nodes "
                "by their statuses' HCA GUIDs)"
            )
        node_of, node_names = guids.indexed(dump, ca_node)
    else:
        node_of, join_problems = guids.join_by_guid(dump, nodes)
        problems += join_problems
        node_names = list(nodes)
    reach = guids.node_reaches(dump, names, node_of, node_names)
    groups = _rail_groups(reach.kinds())
    leaf_of_switch = {}
    for group in groups.groups():
        first = natural_sorted(group)[0]
        for sw in group:
            leaf_of_switch[sw] = first
    domain_names = sorted(set(leaf_of_switch.values()))
    index = {d: i for i, d in enumerate(domain_names)}
    domain_of_leaf = np.array([index.get(leaf_of_switch.get(n, ""), -1) for n in reach.leaves])
    whole, across = reach.domains(domain_of_leaf, domain_names)
    members: dict[str, list[str]] = defaultdict(list, whole)
    unplaced: list[Unplaced] = []
    spread: list[tuple[str, str]] = []
    for node, per_domain in across:  # HCAs in several leaf domains: the most of them wins
        best = min(per_domain, key=lambda d: (-per_domain[d], natural_key(d)))
        members[best].append(node)
        where = ", ".join(f"{d}: {c}" for d, c in sorted(per_domain.items()))
        msg = f"HCAs on {len(per_domain)} leaf domains ({where}); placed in {best}"
        spread.append((node, f"node {node}: {msg}"))
    problems += [msg for _, msg in sorted(spread, key=lambda p: natural_key(p[0]))]
    for node in natural_sorted(set(nodes or ()).difference(reach.placed())):
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
    rank = natural_ranks(chain.from_iterable(members.values()))
    switch_of_name = {v: k for k, v in names.items()}
    domain_switches: dict[str, list[str]] = defaultdict(list)
    for sw, dom in leaf_of_switch.items():
        domain_switches[dom].append(sw)
    leaves = [
        Leaf(
            dom,
            tuple(natural_sorted(domain_switches[dom])),
            tuple(sorted(members[dom], key=rank.__getitem__)),
        )
        for dom in domain_switches
        if members[dom]
    ]
    links = dump.switch_links
    tiers, level = _tiers({switch_of_name[sw] for leaf in leaves for sw in leaf.switches}, links)
    parents: dict[str, set[str]] = defaultdict(set)
    peers = []
    leaf_level = {sw for sw, at in level.items() if at == 0}
    spine_level = {sw for sw, at in level.items() if at == 1}
    for leaf in leaves:
        up: set[int] = set()
        for sw in leaf.switches:  # set operations: no line of Python per cable
            linked = links.get(switch_of_name[sw], set())
            up |= linked & spine_level
            for peer in linked & leaf_level:
                if leaf_of_switch.get(names[peer], leaf.id) != leaf.id:
                    peers.append((leaf.id, leaf_of_switch[names[peer]]))
        if up:
            parents[leaf.id] |= {names[p] for p in up}
    unreached = sum(1 for sw in names if sw not in level)
    if unreached:
        problems.append(f"{unreached} switch(es) are not connected to any leaf that holds a node")
    if not leaves and not (nodes is None and unnamed):
        problems.append("no node's HCA is cabled to a switch in the dump")
    return Fabric(
        "ibnetdiscover",
        spines_from_parents(leaves, parents, peers),
        tuple(unplaced),
        tuple(problems),
        tiers,
    )


def _tiers(
    leaf_ids: set[int], links: Mapping[int, set[int]]
) -> tuple[tuple[int, ...], dict[int, int]]:
    """Breadth-first levels over switch links from the leaves: spines attached to spines go up."""
    level = dict.fromkeys(leaf_ids, 0)
    frontier = list(leaf_ids)
    counts = [len(frontier)] if frontier else []
    while frontier:
        nxt = set().union(*map(links.get, frontier, repeat(set()))) - level.keys()
        for sw in nxt:
            level[sw] = len(counts)
        if nxt:
            counts.append(len(nxt))
        frontier = list(nxt)
    return tuple(counts), level

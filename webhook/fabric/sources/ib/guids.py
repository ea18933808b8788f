"""HCAs -> each node's leaf switches and how many of its HCAs each holds, with NumPy.

A 65,536-node cluster has over half a million compute HCAs: joining each to its node's status
by GUID and counting it under its leaf costs a line of Python per HCA in dicts, and a sort here.
What stays per node (a few thousand to 65,536 of them) is one small dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.ib.reaches import Reaches

I64 = NDArray[np.int64]


def join_by_guid(dump: Dump, nodes: Mapping[str, frozenset[int]]) -> tuple[I64, list[str]]:
    """For each host of `dump.hosts()` (in its order), the index in `nodes` of the node
    whose status lists its node GUID, else one of its port GUIDs (-1: none); and a problem for
    each GUID two nodes claim, which the first of them in `nodes` keeps."""
    sizes = np.fromiter(map(len, nodes.values()), np.int64, len(nodes))
    guids = np.fromiter(chain.from_iterable(nodes.values()), np.uint64, int(sizes.sum()))
    owner = np.repeat(np.arange(len(nodes), dtype=np.int64), sizes)
    order = np.argsort(guids, kind="stable")  # stable: a GUID's first claimant comes first
    guids, owner = guids[order], owner[order]
    problems: list[str] = []
    again = np.flatnonzero(guids[1:] == guids[:-1]) + 1
    if len(again):
        problems = _claimed_twice(guids, owner, again, list(nodes))
        keep = np.ones(len(guids), bool)
        keep[again] = False
        guids, owner = guids[keep], owner[keep]
    hosts = np.asarray(dump.hosts()[0], np.int64)
    node_of = np.full(len(hosts), -1, np.int64)
    if not len(guids) or not len(hosts):
        return node_of, problems
    wanted = np.asarray(dump.guids_of(hosts), np.uint64)
    at = np.minimum(np.searchsorted(guids, wanted), len(guids) - 1)
    found = guids[at] == wanted
    node_of[found] = owner[at[found]]
    host_list = hosts.tolist() if dump.port_guids else []
    missed = [
        i
        for i in np.flatnonzero(~found).tolist()
        if dump.port_guids and host_list[i] in dump.port_guids
    ]
    if missed:  # not by node GUID: by a port GUID (rarer)
        index = dict(zip(guids.tolist(), owner.tolist(), strict=True))
        for i in missed:
            extra = dump.port_guids[host_list[i]]
            node_of[i] = next((index[g] for g in extra if g in index), -1)
    return node_of, problems


def _claimed_twice(
    guids: NDArray[np.uint64], owner: I64, again: I64, names: list[str]
) -> list[str]:
    """One line per later claim of a GUID (`again`: its places in the sorted `guids`), in the
    order of the nodes that claim it again."""
    first = owner[np.searchsorted(guids, guids[again])]
    lines = sorted(zip(owner[again].tolist(), guids[again].tolist(), first.tolist(), strict=True))
    return [f"GUID {g:016x} is claimed by nodes {names[f]} and {names[o]}" for o, g, f in lines]


def indexed(dump: Dump, ca_node: Mapping[int, str]) -> tuple[I64, list[str]]:
    """A host -> node name mapping as `join_by_guid` gives it, with the node names."""
    node_names = sorted(set(ca_node.values()))
    index = {name: i for i, name in enumerate(node_names)}
    got = [index.get(ca_node.get(host, ""), -1) for host in dump.hosts()[0]]
    return np.array(got, np.int64), node_names


def node_reaches(
    dump: Dump, names: Mapping[int, str], node_of: I64, node_names: list[str]
) -> Reaches:
    """Each node's leaf switches and its HCAs cabled to each; `node_of` gives each host of
    `dump.hosts()` (in its order) its index in `node_names` (-1: none)."""
    ordered = sorted(set(names.values()))
    rank = {name: r for r, name in enumerate(ordered)}
    numbers = list(names)
    switch_rank = np.zeros(max(numbers, default=0) + 1, np.int64)
    switch_rank[numbers] = [rank[names[n]] for n in numbers]
    hosts, firsts = dump.hosts()
    first = np.asarray(firsts, np.int64)
    placed = node_of >= 0
    keys = [node_of[placed] << 32 | switch_rank[first[placed]]]
    if dump.host_more:  # HCAs cabled to several switches: rare, one line each
        host_list = list(hosts)
        more = [
            node << 32 | rank[names[s]]
            for i, node in enumerate(node_of.tolist())
            if node >= 0 and host_list[i] in dump.host_more
            for s in dump.host_more[host_list[i]]
        ]
        keys.append(np.array(more, np.int64))
    pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
    return Reaches.of(node_names, ordered, pairs, counts)

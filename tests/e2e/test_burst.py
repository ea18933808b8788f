"""A burst of gangs that fills every node, on the real control plane (issue 38): 19 gangs of 2-32
8-GPU pods, 128 nodes in 16 leaves of 8, created at once in shuffled order. Every gang is bound
whole, each inside one domain of its level (none split, none partly bound). Timing is
bench/bind_bench.py's (docs/benchmarks.md), not this test's; the bench also runs the burst where
PodGroups are served. Not the tier's gang cluster: there, with the whole check loading this
shared machine, kube-scheduler once left 2 ungated members unbound past the 45 s this waits
(its gang cycle, issue 38), which would make the tier flaky."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

from kubernetes import client

from tests.e2e.env import Env
from tests.e2e.fleet import Fleet, static_map
from tests.e2e.pods import create, group_annotations, node_labels, pod, wait_bound

# (members, level): 8 x 2, 4 x 4 and 4 x 8 at leaf, 2 x 16 at leaf-pair, 1 x 32 at leaf-quad
GANGS = [(2, "leaf")] * 8 + [(4, "leaf")] * 4 + [(8, "leaf")] * 4
GANGS += [(16, "leaf-pair")] * 2 + [(32, "leaf-quad")]


def test_a_burst_of_gangs_filling_128_nodes_is_bound_whole_and_unsplit(
    cluster_env: Env, fleet: Fleet, ns: str
) -> None:
    layout = {
        f"leaf-{i:02d}": [f"{fleet.prefix}-{i * 8 + j:03d}" for j in range(8)] for i in range(16)
    }
    for names in layout.values():
        for name in names:
            fleet.add_node(name, 8, None)  # the network position alone: no status needed
    fleet.set_topology(static_map(layout))
    fleet.wait_labels({n: {"gpufabric.io/leaf": leaf} for leaf, ns_ in layout.items() for n in ns_})
    gangs = list(GANGS)
    random.Random(38).shuffle(gangs)
    core = client.CoreV1Api(cluster_env.cluster.client())

    def make(i: int) -> None:
        size, level = gangs[i]
        ann = group_annotations(f"g{i}", size, group_locality="required", group_level=level)
        create(core, ns, [pod(f"g{i}-{m}", 8, ann, labels={"gang": f"g{i}"}) for m in range(size)])

    try:
        with ThreadPoolExecutor(8) as pool:  # as a burst of Jobs creates them
            list(pool.map(make, range(len(gangs))))
        bound = wait_bound(core, ns, 128, timeout=45)
    finally:  # 128 bound pods at once, as a kubelet confirms them: the namespace goes quickly
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    labels = node_labels(core)
    split = {}
    for i, (size, level) in enumerate(gangs):
        nodes = [p.spec.node_name for p in bound if p.metadata.labels["gang"] == f"g{i}"]
        assert len(nodes) == size
        domains = {labels[n][f"gpufabric.io/{level}"] for n in nodes}
        if len(domains) > 1:
            split[f"g{i}"] = domains
    assert split == {}
    assert len({p.spec.node_name for p in bound}) == 128  # one 8-GPU pod a node

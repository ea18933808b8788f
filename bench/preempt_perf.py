"""`bench/group_sim.py prio-perf`: the cost of a decision with preemption beside the plain
decision, on a full cluster, at 4,096 and 65,536 nodes.

    .venv/bin/python bench/group_sim.py prio-perf [--nodes 4096 65536] [--decisions 200]
        [--pdb-every 16]

Tree fabric (leaves of 4, pairs 8, quads 16, spines 128), 8 GPUs per node, every GPU taken: one
8-GPU pod per node, except every 8th node runs two 4-GPU pods; pod priorities drawn 50 % 100,
30 % 500, 20 % 2,000,000 (not preemptible by the group); every 10th pair of nodes runs one gang
of two (a placed group: evicted whole). All fed through Placer.pods_listed, so the running-pod
index is the placer's own. A 16-pod x 8-GPU group at priority 1,000,000, required, level auto
(leaf-quad), fits nowhere: the plain decision (choose.decide, which waits) and the decision with
preemption (decide, then preempt.victims.choose over the index) are timed alternately, which goes
first switching every round; before each round 20 running pods are replaced in the index (as pod
events do), so their domains' cached bounds are computed again. Reported: p50/p99 of both, the
ratio, the first decision with preemption (its bounds computed for every domain), and the one-off
cost of the index's per-domain sums (once; a node change later moves only relabelled nodes).
With `--pdb-every K` (default 16) the running pods carry one PodDisruptionBudget per K pods, each
budget's pods spread over the cluster (pod i under budget i mod pods/K), allowing 1 disruption,
every 32nd budget 0 (`--pdb-zero-every`; 1: every budget allows 0, so every domain is refused and
each decision evaluates them all: the worst case) (issue 29): the decision with preemption counts
them against each plan.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections.abc import Iterator
from typing import Any

from group_perf import NullApi
from group_workload import ANY, FABRICS, node_objs, pct

from webhook.groups.decision.choose import chosen_level, decide
from webhook.groups.decision.decision import Member, Request, Waiting
from webhook.groups.extensions.preempt.victims import choose
from webhook.groups.placer.placer import Placer

HIGH = 1_000_000


def running(names: list[str], rng: random.Random, buckets: int = 0) -> Iterator[dict[str, Any]]:
    count = iter(range(1 << 62))

    def one(name: str, node: str, gpus: int, gang: str = "") -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": "bench", "uid": name}
        meta["labels"] = {"pdb": f"b{next(count) % buckets}"} if buckets else {}
        if gang:
            meta["labels"]["gpufabric.io/group"] = gang
            meta["annotations"] = {"gpufabric.io/group": gang, "gpufabric.io/group-size": "2"}
        priority = rng.choices((100, 500, 2_000_000), (0.5, 0.3, 0.2))[0]
        return {
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "priority": priority,
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            },
            "status": {"phase": "Running"},
        }

    for i, node in enumerate(names):
        if i % 8 == 7:
            yield one(f"half-{i}-a", node, 4)
            yield one(f"half-{i}-b", node, 4)
        elif (i // 2) % 10 == 0 and i % 8 < 6:
            yield one(f"gang-{i}", node, 8, gang=f"g{i // 2}")
        else:
            yield one(f"run-{i}", node, 8)


def budget(i: int, zero_every: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"b{i}", "namespace": "bench"},
        "spec": {"selector": {"matchLabels": {"pdb": f"b{i}"}}},
        "status": {"disruptionsAllowed": 0 if i % zero_every == zero_every - 1 else 1},
    }


def measure(nodes: int, decisions: int, seed: int, pdb_every: int, zero_every: int = 32) -> None:
    rng = random.Random(seed)
    placer = Placer(NullApi())
    placer.nodes_listed(node_objs(nodes, FABRICS["tree"].sizes))
    names = sorted(placer.view.nodes)
    pods = nodes + nodes // 8  # every 8th node runs two pods
    buckets = max(1, pods // pdb_every) if pdb_every else 0
    placer.pods_listed(running(names, rng, buckets))
    placer.budgets_listed(budget(i, zero_every) for i in range(buckets))
    view, index, budgets = placer.view, placer.ext.preempt.index, placer.budgets
    members = tuple(Member(f"g/{i}", 8, ANY) for i in range(16))
    req = Request("g", members, "required")
    level = chosen_level(view, req)
    assert level is not None
    t0 = time.perf_counter()
    index.domains(view, level)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    choose(view, index, members, level, HIGH, budgets=budgets)
    cold = time.perf_counter() - t0
    pods = list(index.pods.values())
    plain: list[float] = []
    with_preemption: list[float] = []
    victims = 0
    for i in range(decisions):
        for r in rng.sample(pods, 20):  # pod events between decisions
            index.put(r)
        for preempting in (bool(i % 2), not i % 2):
            t = time.perf_counter()
            d = decide(view, req)
            assert isinstance(d, Waiting)
            if preempting:
                plan = choose(view, index, members, level, HIGH, budgets=budgets).plan
                assert plan is not None or zero_every == 1  # 1: every budget refuses
                victims = len(plan.victims) if plan is not None else 0
            (with_preemption if preempting else plain).append(time.perf_counter() - t)
    p50, p99 = statistics.median(plain), pct(plain, 0.99)
    q50, q99 = statistics.median(with_preemption), pct(with_preemption, 0.99)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"| {nodes:,} | {len(view.bound):,} | {level} | {1000 * p50:.2f} / {1000 * p99:.2f} "
        f"| {1000 * q50:.2f} / {1000 * q99:.2f} | {q50 / p50:.2f}x / {q99 / p99:.2f}x "
        f"| {victims} | {len(budgets):,} | {1000 * cold:.1f} | {1000 * build:.0f} | {rss:.0f} |",
        flush=True,
    )


def cmd_prio_perf(args: argparse.Namespace) -> None:
    print(
        "| nodes | running pods | level | plain decision p50 / p99 (ms) | with preemption p50 / "
        "p99 (ms) | ratio p50 / p99 | victims | budgets | first (ms) | index sums build (ms) | "
        "peak RSS (MiB) |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes in args.nodes:
        measure(nodes, args.decisions, args.seed, args.pdb_every, args.pdb_zero_every)

"""`bench/group_sim.py perf`: decision speed at 4,096 nodes, with and without ranks (see
group_sim's docstring)."""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections.abc import Iterator
from typing import Any

from group_sim import ANY, FABRICS, node_objs, pct

from webhook.groups.choose import Member, Placed, Request, decide
from webhook.groups.names import GATE
from webhook.groups.placer import Placer
from webhook.groups.seating import seat_new

# -- perf --------------------------------------------------------------------------------------


def busy_pods(names: list[str], rng: random.Random) -> Iterator[dict[str, Any]]:
    """20,000 running pods: 1,000 whole-node 8-GPU pods and 19,000 1-GPU pods packed 8 per node
    on 2,375 more nodes, node order shuffled, so 721 nodes stay free, scattered."""
    order = names[:]
    rng.shuffle(order)
    k = 0
    for i in range(1000):
        yield pod(f"big-{i}", 8, order[k])
        k += 1
    for i in range(19000):
        yield pod(f"small-{i}", 1, order[k + i // 8])


def pod(name: str, gpus: int, node: str = "", group: str = "", size: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "bench", "uid": name}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
    }
    if node:
        spec["nodeName"] = node
    if group:
        meta["labels"] = {"gpufabric.io/group": group}
        meta["annotations"] = {
            "gpufabric.io/group": group,
            "gpufabric.io/group-size": str(size),
            "gpufabric.io/group-locality": "preferred",
        }
        spec["schedulingGates"] = [{"name": GATE}]
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


class NullApi:
    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        return None

    def event(self, pod: Any, reason: str, message: str, kind: str) -> None:
        return None


def cmd_perf(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    placer = Placer(NullApi())
    placer.nodes_listed(node_objs(4096, FABRICS["tree"].sizes))
    names = sorted(placer.view.nodes)
    placer.pods_listed(busy_pods(names, rng))
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    view = placer.view
    print(
        f"4,096 nodes, {len(view.bound):,} running pods, free GPUs {view.free_total():,}, "
        f"leaf fragmentation {view.fragmentation('leaf'):.2f}"
    )
    members = tuple(Member(f"g/{i}", 8, ANY) for i in range(16))
    lat, cpu, base, ranked, ranked_cpu = [], [], [], [], []

    def timed(locality: str, with_ranks: bool) -> tuple[float, float]:
        t, c = time.perf_counter(), time.thread_time()
        d = decide(view, Request("g", members, locality))  # type: ignore[arg-type]
        if with_ranks and isinstance(d, Placed):  # as the placer decides now
            seat_new(view, d, members, {})
        return time.perf_counter() - t, time.thread_time() - c

    for i in range(args.decisions):
        t0 = time.perf_counter()
        view.free_total(names)
        base.append(time.perf_counter() - t0)
        locality = "required" if i % 4 < 2 else "preferred"
        first = bool(i % 2)  # alternate which runs first: the second finds the caches warm
        for with_ranks in (first, not first):
            wall, used = timed(locality, with_ranks)
            (ranked if with_ranks else lat).append(wall)
            (ranked_cpu if with_ranks else cpu).append(used)
    b50 = statistics.median(base)
    print(
        f"decision, 16 pods x 8 GPUs (half required, half preferred): wall p50 "
        f"{1000 * statistics.median(lat):.2f} ms, p99 {1000 * pct(lat, 0.99):.2f} ms, max "
        f"{1000 * max(lat):.2f} ms; CPU time p50 {1000 * statistics.median(cpu):.2f} ms, p99 "
        f"{1000 * pct(cpu, 0.99):.2f} ms; baseline (one pass over 4,096 nodes) p50 "
        f"{1000 * b50:.2f} ms: decision p50 = {statistics.median(lat) / b50:.1f}x baseline"
    )
    print(
        f"with ranks (decide + seat_new, interleaved): wall p50 "
        f"{1000 * statistics.median(ranked):.2f} ms, p99 {1000 * pct(ranked, 0.99):.2f} ms, CPU "
        f"p99 {1000 * pct(ranked_cpu, 0.99):.2f} ms; ratio to the decision without ranks: wall "
        f"p50 {statistics.median(ranked) / statistics.median(lat):.2f}x, p99 "
        f"{pct(ranked, 0.99) / pct(lat, 0.99):.2f}x; CPU p50 "
        f"{statistics.median(ranked_cpu) / statistics.median(cpu):.2f}x, p99 "
        f"{pct(ranked_cpu, 0.99) / pct(cpu, 0.99):.2f}x"
    )
    # End to end: group arrives (16 ADDED events), reconcile places it; then it finishes.
    t0, c0 = time.perf_counter(), time.thread_time()
    groups = args.decisions // 4
    for g in range(groups):
        objs = [pod(f"g{g}-{i}", 8, group=f"g{g}", size=16) for i in range(16)]
        for o in objs:
            placer.pod_event("ADDED", o)
        placer.reconcile()
        for o in objs:
            placer.pod_event("DELETED", o)
    took, busy = time.perf_counter() - t0, time.thread_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"end to end through the Placer: {groups / took:.0f} groups/s wall, {groups / busy:.0f} "
        f"groups/s of CPU time ({1000 * busy / groups:.1f} ms CPU per 16-pod group: 16 ADDED "
        "events, decision, 16 patches, 16 DELETED events)"
    )
    print(f"peak RSS: {rss_built:.0f} MiB after building the view, {rss:.0f} MiB at the end")

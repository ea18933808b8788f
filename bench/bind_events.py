"""The placer's work per bind while groups wait, by cluster size: what a burst of binds costs it.

    .venv/bin/python bench/bind_events.py [--nodes 65536] [--waiting 16] [--binds 512]

A tree fabric of N 8-GPU nodes (leaves of 4, spines of 128: bench/group_workload.py) with the busy
mix of bench/group_perf.py (82 % of the nodes busy, the free ones scattered); `--waiting` groups
that fit nowhere (required, each larger than any spine's free nodes: they wait for room); one
group of `--binds` whole-node members placed and ungated. Then kube-scheduler binds each member
where the placer kept its room, one watch event and one reconcile each (the placer's loop under
a burst: an event, then decide). Timed per event (CPU, thread_time), two ways interleaved event by
event on the same placer: as the placer does now (a bind where its room was kept frees nothing,
so no waiting group is decided again) and as it did before (every group with a gated member
decided again at each bind). Then 16 members deleted one by one (room freed: every waiting group
decided again), to show that cost; then 20 groups of 8 arriving one after another.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from group_perf import NullApi, busy_pods, pod
from group_workload import FABRICS, node_objs

from webhook.groups.placer.placer import TICK_EVERY, Placer


def member(name: str, group: str, size: int) -> dict:  # type: ignore[type-arg]
    obj = pod(name, 8, group=group, size=size)
    obj["metadata"]["annotations"]["gpufabric.io/group-locality"] = "required"
    return obj


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=65536)
    ap.add_argument("--waiting", type=int, default=16)
    ap.add_argument("--binds", type=int, default=512)
    args = ap.parse_args()
    shape = FABRICS["tree"]
    placer = Placer(NullApi(), tick_every=TICK_EVERY)  # as in the cluster
    t = time.monotonic()
    placer.nodes_listed(node_objs(args.nodes, shape.sizes, shape.gpus))
    names = sorted(placer.view.nodes)
    placer.pods_listed(busy_pods(names, shape.gpus, random.Random(1)))
    print(
        f"{args.nodes:,} nodes, {len(placer.view.bound):,} running pods, built in "
        f"{time.monotonic() - t:.1f} s",
        flush=True,
    )
    spine = shape.sizes["spine"]
    for w in range(args.waiting):  # each larger than a spine: required, it waits
        size = spine + 1 + w
        for i in range(size):
            placer.pod_event("ADDED", member(f"w{w}-{i}", f"w{w}", size))
    placed = [member(f"p-{i}", "p", args.binds) for i in range(args.binds)]
    placed_ann = placed[0]["metadata"]["annotations"]
    placed_ann["gpufabric.io/group-locality"] = "preferred"  # spread where it must
    for obj in placed:
        obj["metadata"]["annotations"] = dict(placed_ann)
        placer.pod_event("ADDED", obj)
    placer.reconcile()
    waiting = sum(1 for k in placer.waiting if k[1].startswith("w"))
    promised = {u: n for u, (n, _) in placer.view.promised.items() if u.startswith("p-")}
    print(f"{waiting} groups waiting for room, {len(promised)} members ungated", flush=True)
    now: list[float] = []
    before: list[float] = []
    for i, obj in enumerate(placed):
        uid = obj["metadata"]["uid"]
        if uid not in promised:
            continue
        bound = {**obj, "spec": {**obj["spec"], "nodeName": promised[uid]}}
        bound["spec"].pop("schedulingGates", None)
        bound["status"] = {"phase": "Running"}
        c = time.thread_time()
        placer.pod_event("MODIFIED", bound)
        if i % 2:  # the old rule, interleaved: every group with a gated member decided again
            placer.retry_all()
        placer.reconcile()
        (before if i % 2 else now).append(time.thread_time() - c)
    freed = []
    for obj in placed[:16]:  # each frees one node: every waiting group is decided again
        c = time.thread_time()
        placer.pod_event("DELETED", obj)
        placer.reconcile()
        freed.append(time.thread_time() - c)
    arrivals = []
    for g in range(20):  # more groups that fit nowhere: each one's decision, its hold included
        size = 8
        for i in range(size):
            c = time.thread_time()
            placer.pod_event("ADDED", member(f"n{g}-{i}", f"n{g}", size))
            placer.reconcile()
        arrivals.append(time.thread_time() - c)  # the last member's: the group decided
    waits = sum(1 for k in placer.waiting if k[1].startswith("n"))
    print(
        f"a group of 8 arriving ({waits} of {len(arrivals)} fit nowhere; its last member, event "
        f"+ reconcile, median): {1000 * statistics.median(arrivals):.2f} ms",
        flush=True,
    )
    ms_now, ms_before = 1000 * statistics.median(now), 1000 * statistics.median(before)
    print(
        f"a bind where its room was kept, event + reconcile (median of {len(now)} / "
        f"{len(before)}): now {ms_now:.3f} ms, before {ms_before:.3f} ms "
        f"({ms_before / max(ms_now, 1e-9):.0f}x); a pod deleted (room freed), median of "
        f"{len(freed)}: {1000 * statistics.median(freed):.1f} ms"
    )


if __name__ == "__main__":
    main()

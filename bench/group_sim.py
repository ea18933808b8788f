#!/usr/bin/env python3
"""Group placement: a discrete-event simulation over the placer's own decision code, and the
decision speed at scale.

    .venv/bin/python bench/group_sim.py sim  [--jobs 3000] [--seed 1] [--fabric tree|rail|both]
    .venv/bin/python bench/group_sim.py perf [--decisions 1000]

`sim`: 1,024 nodes x 8 GPUs. Fabrics: "tree" (leaves of 4 nodes, pairs of 8, quads of 16, spines
of 128) and "rail" (rail-optimized: a leaf domain is a 32-node scalable unit; pairs of 64, quads
of 128, spines of 512, as in the DGX SuperPOD RAs, notes/fabric_topology.md 3). Every job runs one
8-GPU pod per node. Sizes 1, 2, 4, 8, 16, 32 nodes with job shares 40/20/15/12/8/5 % (the ITP trace
below has no job above 8 nodes, so the mix is set, not fitted). Durations: drawn from the empirical
durations of the jobs with >= 8 GPUs in shared/reference/traces/microsoft-itp-2021.csv.gz
(Microsoft ITP 2021, MIT; see its PROVENANCE.md), clipped at 7 days, independent of size. Arrivals:
Poisson, rate set so that offered load is 85 % of the cluster's GPUs. Queue: FIFO with backfill
(each waiting job is tried in arrival order whenever GPUs free up), identical for every policy.
Policies, on the same stream and seed:
  stock      kube-scheduler alone: each pod to the node with the most free GPUs (LeastAllocated,
             ties at random), no group constraint; a job starts when all its pods fit (ideal gang)
  first-fit  webhook.groups.choose.decide, first domain in fabric order, locality preferred
  tightest   webhook.groups.choose.decide, tightest fit (gpufabric), locality preferred
(`--locality required`: groups wait for a domain of their level instead of going up; every job
is then in its domain by construction and the queueing delay is what differs; `--load` sets the
offered load.)
Reported per policy, over the jobs arriving after the first third (warm-up): share of multi-node
jobs inside one domain of the level the rule asks for (auto level), mean leaf domains spanned per
multi-node job, mean and p95 queueing delay, GPU utilisation (time-weighted busy GPUs / all GPUs
between the first measured arrival and the last arrival), leaf fragmentation over time
(time-weighted mean and max of CapacityView.fragmentation("leaf"), docs/metrics.md).

`perf`: 4,096 nodes / 32,768 GPUs, 20,000 running pods fed through Placer.pods_listed; decisions
for 16-pod x 8-GPU groups (p50/p99 latency), end-to-end groups/s through the Placer (ADDED events,
reconcile, one patch per member to a no-op API), and the process's peak RSS. Speed is shown
beside a baseline interleaved in the same process (one pass summing the free GPUs of all 4,096
nodes), since absolute numbers on a shared machine swing.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import heapq
import math
import random
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.groups.capacity import CapacityView  # noqa: E402
from webhook.groups.choose import Member, Placed, Request, decide  # noqa: E402
from webhook.groups.names import GATE, LEVELS, NETWORK_LEVELS, level_key  # noqa: E402
from webhook.groups.placer import Placer  # noqa: E402
from webhook.groups.selector import selector_of  # noqa: E402

TRACE = ROOT.parent / "shared" / "reference" / "traces" / "microsoft-itp-2021.csv.gz"
if not TRACE.exists():
    TRACE = Path("/work/shared/reference/traces/microsoft-itp-2021.csv.gz")
GPUS = 8
SIZES = (1, 2, 4, 8, 16, 32)
SHARES = (0.40, 0.20, 0.15, 0.12, 0.08, 0.05)
MAX_DURATION = 7 * 86400
FABRICS = {  # nodes per domain at leaf, leaf-pair, leaf-quad, spine
    "tree": (4, 8, 16, 128),
    "rail": (32, 64, 128, 512),
}
ANY = selector_of({})


def node_objs(n: int, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        labels = {
            level_key(lv): f"{lv}-{i // s}" for lv, s in zip(NETWORK_LEVELS, sizes, strict=True)
        }
        out.append(
            {
                "metadata": {"name": f"n{i:05d}", "labels": labels},
                "spec": {},
                "status": {
                    "allocatable": {"nvidia.com/gpu": str(GPUS)},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


def trace_durations() -> list[int]:
    with gzip.open(TRACE, "rt") as f:
        return sorted(
            min(int(r["duration_s"]), MAX_DURATION)
            for r in csv.DictReader(f)
            if int(r["gpus"]) >= GPUS
        )


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    arrival: float
    nodes: int
    duration: float


def job_stream(n: int, seed: int, total_gpus: int, load: float = 0.85) -> list[Job]:
    rng = random.Random(seed)
    durations = trace_durations()
    mean_gpu_s = sum(s * GPUS * p for s, p in zip(SIZES, SHARES, strict=True)) * statistics.fmean(
        durations
    )
    rate = load * total_gpus / mean_gpu_s  # jobs per second
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        size = rng.choices(SIZES, SHARES)[0]
        out.append(Job(i, t, size, float(rng.choice(durations))))
    return out


def rule_level(view: CapacityView, nodes: int) -> str:
    """The level the rule asks for: the smallest whose domains hold the job when empty."""
    for level in LEVELS:
        if max((len(ns) for _, ns in view.index()[level]), default=0) >= nodes:
            return level
    return LEVELS[-1]


@dataclass
class Stats:
    delays: list[float] = field(default_factory=list)
    in_domain: list[bool] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)
    busy_area: float = 0.0
    frag_area: float = 0.0
    frag_max: float = 0.0
    span: float = 0.0


def simulate(
    policy: str, jobs: list[Job], sizes: tuple[int, ...], seed: int, locality: str = "preferred"
) -> Stats:
    view = CapacityView()
    view.replace_nodes(node_objs(1024, sizes))
    names = sorted(view.nodes)
    leaf_of = {n: view.nodes[n].labels[level_key("leaf")] for n in names}
    rng = random.Random(seed)
    levels = {j.nodes: rule_level(view, j.nodes) for j in jobs}
    warm = jobs[len(jobs) // 3].arrival
    end = jobs[-1].arrival
    stats = Stats()
    events: list[tuple[float, int, int]] = [(j.arrival, 1, j.id) for j in jobs]  # 0 = finish
    heapq.heapify(events)
    waiting: list[Job] = []
    running: dict[int, list[str]] = {}
    busy, last = 0, 0.0

    def place(job: Job) -> list[str] | None:
        if policy == "stock":
            free = {n: view.free(n) for n in names}
            if sum(1 for f in free.values() if f >= GPUS) < job.nodes:
                return None
            chosen = []
            for _ in range(job.nodes):  # LeastAllocated: most free, ties at random
                top = max(free.values())
                pick = rng.choice([n for n, f in free.items() if f == top])
                chosen.append(pick)
                free[pick] -= GPUS
            return chosen
        members = tuple(Member(f"j{job.id}/{i}", GPUS, ANY) for i in range(job.nodes))
        d = decide(view, Request(f"j{job.id}", members, locality), policy)  # type: ignore[arg-type]
        if not isinstance(d, Placed):
            return None
        return [a.node for a in d.assignments]

    def account(now: float) -> None:
        nonlocal last
        lo, hi = max(last, warm), min(now, end)
        if hi > lo:
            stats.busy_area += busy * (hi - lo)
            frag = view.fragmentation("leaf")
            stats.frag_area += frag * (hi - lo)
            stats.frag_max = max(stats.frag_max, frag)
        last = now

    def start(job: Job, nodes: list[str], now: float) -> None:
        nonlocal busy
        for i, n in enumerate(nodes):
            view.put_pod(f"{job.id}/{i}", n, GPUS, True)
        busy += GPUS * job.nodes
        running[job.id] = nodes
        heapq.heappush(events, (now + job.duration, 0, job.id))
        if job.arrival >= warm:
            stats.delays.append(now - job.arrival)
            if job.nodes > 1:
                key = level_key(levels[job.nodes])
                stats.in_domain.append(len({view.nodes[n].labels[key] for n in nodes}) == 1)
                stats.leaves.append(len({leaf_of[n] for n in nodes}))

    by_id = {j.id: j for j in jobs}
    while events:
        now, kind, jid = heapq.heappop(events)
        if now > end and not waiting:
            break
        account(now)
        if kind == 1:
            job = by_id[jid]
            nodes = place(job) if not waiting else None  # FIFO: join the queue behind others
            if nodes is None:
                waiting.append(job)
            else:
                start(job, nodes, now)
            continue
        for i, _ in enumerate(running.pop(jid)):
            view.delete_pod(f"{jid}/{i}")
        busy -= GPUS * by_id[jid].nodes
        still = []
        for job in waiting:  # backfill: every waiting job, in arrival order
            nodes = place(job)
            if nodes is None:
                still.append(job)
            else:
                start(job, nodes, now)
        waiting = still
    stats.span = end - warm
    return stats


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(q * len(s)) - 1)]


def cmd_sim(args: argparse.Namespace) -> None:
    fabrics = ["tree", "rail"] if args.fabric == "both" else [args.fabric]
    print(
        f"{args.jobs} jobs, seed {args.seed}, 1,024 nodes x 8 GPUs, offered load "
        f"{100 * args.load:.0f} %, locality {args.locality}; "
        "in-domain and leaves spanned over multi-node jobs"
    )
    print(
        "| fabric | policy | in rule's domain | leaf domains / job | mean delay (h) "
        "| p95 delay (h) | GPU util | leaf frag mean / max | sim s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for fab in fabrics:
        jobs = job_stream(args.jobs, args.seed, 1024 * GPUS, args.load)
        for policy in ("stock", "first", "tightest"):
            t0 = time.perf_counter()
            s = simulate(policy, jobs, FABRICS[fab], args.seed, args.locality)
            took = time.perf_counter() - t0
            name = {"first": "first-fit", "tightest": "tightest (gpufabric)"}.get(policy, policy)
            print(
                f"| {fab} | {name} | {100 * statistics.fmean(s.in_domain):.1f} % "
                f"| {statistics.fmean(s.leaves):.2f} | {statistics.fmean(s.delays) / 3600:.2f} "
                f"| {pct(s.delays, 0.95) / 3600:.2f} | {100 * s.busy_area / (s.span * 1024 * GPUS):.1f} % "
                f"| {s.frag_area / s.span:.2f} / {s.frag_max:.2f} | {took:.0f} |",
                flush=True,
            )


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
    placer.nodes_listed(node_objs(4096, FABRICS["tree"]))
    names = sorted(placer.view.nodes)
    placer.pods_listed(busy_pods(names, rng))
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    view = placer.view
    print(
        f"4,096 nodes, {len(view.bound):,} running pods, free GPUs {view.free_total():,}, "
        f"leaf fragmentation {view.fragmentation('leaf'):.2f}"
    )
    members = tuple(Member(f"g/{i}", 8, ANY) for i in range(16))
    lat, cpu, base = [], [], []
    for i in range(args.decisions):
        t0 = time.perf_counter()
        view.free_total(names)
        t1, c1 = time.perf_counter(), time.thread_time()
        locality = "required" if i % 2 else "preferred"
        d = decide(view, Request("g", members, locality))  # type: ignore[arg-type]
        t2, c2 = time.perf_counter(), time.thread_time()
        base.append(t1 - t0)
        lat.append(t2 - t1)
        cpu.append(c2 - c1)
        del d
    b50 = statistics.median(base)
    print(
        f"decision, 16 pods x 8 GPUs (half required, half preferred): wall p50 "
        f"{1000 * statistics.median(lat):.2f} ms, p99 {1000 * pct(lat, 0.99):.2f} ms, max "
        f"{1000 * max(lat):.2f} ms; CPU time p50 {1000 * statistics.median(cpu):.2f} ms, p99 "
        f"{1000 * pct(cpu, 0.99):.2f} ms; baseline (one pass over 4,096 nodes) p50 "
        f"{1000 * b50:.2f} ms: decision p50 = {statistics.median(lat) / b50:.1f}x baseline"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sim")
    s.add_argument("--jobs", type=int, default=3000)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--fabric", choices=("tree", "rail", "both"), default="both")
    s.add_argument("--locality", choices=("preferred", "required"), default="preferred")
    s.add_argument("--load", type=float, default=0.85, help="offered load (share of all GPUs)")
    p = sub.add_parser("perf")
    p.add_argument("--decisions", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    (cmd_sim if args.cmd == "sim" else cmd_perf)(args)


if __name__ == "__main__":
    main()

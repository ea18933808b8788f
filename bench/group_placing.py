"""`bench/group_sim.py sim`: a discrete-event simulation of group placement over the placer's own
decision code.

`sim`: 1,024 nodes x 8 GPUs. Fabrics: "tree" (leaves of 4 nodes, pairs of 8, quads of 16, spines
of 128) and "rail" (rail-optimized: a leaf domain is a 32-node scalable unit; pairs of 64, quads
of 128, spines of 512, as in the DGX SuperPOD RAs, notes/fabric_topology.md 3). Every job runs one
8-GPU pod per node. "nvl72": 1,152 GB200 trays of 4 GPUs, 18 per rack = one multi-node NVLink
domain (label gpufabric.io/nvlink-domain), 8 racks per rail leaf; jobs run one 4-GPU pod per tray,
same sizes in nodes; the placer tries the nvlink-domain level first (groups/names.LEVELS).
Sizes 1, 2, 4, 8, 16, 32 nodes with job shares 40/20/15/12/8/5 % (the ITP trace
below has no job above 8 nodes, so the mix is set, not fitted). Durations: drawn from the empirical
durations of the jobs with >= 8 GPUs in shared/reference/traces/microsoft-itp-2021.csv.gz
(Microsoft ITP 2021, MIT; see its PROVENANCE.md), clipped at 7 days, independent of size. Arrivals:
Poisson, rate set so that offered load is 85 % of the cluster's GPUs. Queue: FIFO with backfill
(each waiting job is tried in arrival order whenever GPUs free up), identical for every policy.
Policies, on the same stream and seed:
  stock      kube-scheduler alone: each pod to the node with the most free GPUs (LeastAllocated,
             ties at random), no group constraint; a job starts when all its pods fit (ideal gang)
  first-fit  webhook.groups.decision.choose.decide, first domain in fabric order, locality preferred
  tightest   webhook.groups.decision.choose.decide, tightest fit (gpufabric), locality preferred; rank i
             is member i wherever the decision put it
  ranked     tightest, then webhook.groups.decision.seating.seat_new: ranks in fabric order (the placer)
(`--locality required`: groups wait for a domain of their level instead of going up; every job
is then in its domain by construction and the queueing delay is what differs; `--load` sets the
offered load.)
Reported per policy, over the jobs arriving after the first third (warm-up): share of multi-node
jobs inside one domain of the level the rule asks for (auto level), mean leaf domains spanned per
multi-node job, ring boundary crossings per job (rings.py) and the share of jobs with no more
than their placement forces, on nvl72 the share of 2..18-node jobs in one NVLink domain, mean and
p95 queueing delay, GPU utilisation (time-weighted busy GPUs / all GPUs
between the first measured arrival and the last arrival), leaf fragmentation over time
(time-weighted mean and max of CapacityView.fragmentation("leaf"), docs/metrics.md).
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from group_workload import (  # noqa: E402
    ANY,
    FABRICS,
    NVLINK,
    Job,
    Shape,
    job_stream,
    node_objs,
    pct,
    rule_level,
)
from rings import Ring, ring  # noqa: E402  (bench/, beside this script)

from webhook.groups.decision.capacity import CapacityView  # noqa: E402
from webhook.groups.decision.choose import decide  # noqa: E402
from webhook.groups.decision.decision import Member, Placed, Request  # noqa: E402
from webhook.groups.decision.inside import fewest_possible  # noqa: E402
from webhook.groups.decision.seating import seat_assignments, seat_new  # noqa: E402
from webhook.groups.model.names import level_key  # noqa: E402

POLICIES = ("stock", "first", "tightest", "ranked")


@dataclass
class Stats:
    delays: list[float] = field(default_factory=list)
    in_domain: list[bool] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)
    rings: list[Ring] = field(default_factory=list)  # multi-node jobs, on the fabric's ring level
    nvl_small: list[bool] = field(default_factory=list)  # 2..18-node jobs: in one NVLink domain
    busy_area: float = 0.0
    frag_area: float = 0.0
    frag_max: float = 0.0
    span: float = 0.0
    lows_used: list[int] = field(default_factory=list)  # multi-node jobs: lowest domains used
    lows_fewest: list[int] = field(default_factory=list)  # ... and the fewest that could hold it
    whole_leaves: list[int] = field(default_factory=list)  # wholly free leaves after a placement
    whole_lows: list[int] = field(default_factory=list)  # ... NVLink domains on nvl72, else leaves


def simulate(
    policy: str,
    jobs: list[Job],
    shape: Shape,
    seed: int,
    locality: str = "preferred",
    shuffle: bool = False,
) -> Stats:
    view = CapacityView()
    view.replace_nodes(node_objs(shape.nodes, shape.sizes, shape.gpus, shuffle))
    names = sorted(view.nodes)
    gpus = shape.gpus
    leaf_of = {n: view.nodes[n].labels[level_key("leaf")] for n in names}
    ring_of = {n: view.nodes[n].labels[level_key(shape.ring_level)] for n in names}
    nvl_of = {n: view.nodes[n].labels.get(level_key(NVLINK), "") for n in names}
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
    fewest_of: dict[int, int] = {}  # job -> the fewest lowest domains that could hold it
    leaf_nodes = view.index()["leaf"]
    low_nodes = view.index()[shape.ring_level]  # type: ignore[index]

    def place(job: Job) -> list[str] | None:
        if policy == "stock":
            free = {n: view.free(n) for n in names}
            if sum(1 for f in free.values() if f >= gpus) < job.nodes:
                return None
            chosen = []
            for _ in range(job.nodes):  # LeastAllocated: most free, ties at random
                top = max(free.values())
                pick = rng.choice([n for n, f in free.items() if f == top])
                chosen.append(pick)
                free[pick] -= gpus
            return chosen  # rank i is pod i
        # keys as a Job names its pods (<job>-<index>-<suffix>): name order is not index order
        members = tuple(Member(f"j{job.id}-{i}-x", gpus, ANY) for i in range(job.nodes))
        how = "tightest" if policy in ("ranked", "before") else policy
        d = decide(view, Request(f"j{job.id}", members, locality), how)  # type: ignore[arg-type]
        if not isinstance(d, Placed):
            return None
        if d.level is not None:
            fewest_of[job.id] = sum(
                fewest_possible(
                    view, d.level, dom, [m for m in members if m.key in keys], view.free
                )
                or 0
                for dom in d.domains
                if (keys := {a.member for a in d.assignments if a.domain == dom})
            )
        if policy == "before":  # issue 25's "before": ranks in fabric order on decide's nodes
            seats = seat_assignments(view, d.assignments, members, {}, frozenset())
            return [s.node for s in sorted(seats, key=lambda s: s.rank or 0)]
        if policy != "ranked":  # rank i is member i (its index), wherever pack put it
            node_of = {a.member: a.node for a in d.assignments}
            return [node_of[m.key] for m in members]
        seats = seat_new(view, d, members, {})
        return [s.node for s in sorted(seats, key=lambda s: s.rank or 0)]

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
            view.put_pod(f"{job.id}/{i}", n, gpus, True)
        busy += gpus * job.nodes
        running[job.id] = nodes
        heapq.heappush(events, (now + job.duration, 0, job.id))
        if job.arrival >= warm:
            stats.delays.append(now - job.arrival)
            if job.nodes > 1:
                key = level_key(levels[job.nodes])
                stats.in_domain.append(len({view.nodes[n].labels[key] for n in nodes}) == 1)
                stats.leaves.append(len({leaf_of[n] for n in nodes}))
                stats.rings.append(ring(nodes, ring_of))
                if NVLINK in shape.sizes and job.nodes <= shape.sizes[NVLINK]:
                    stats.nvl_small.append(len({nvl_of[n] for n in nodes}) == 1)
                if job.id in fewest_of:
                    stats.lows_used.append(len({view.lowest(n) for n in nodes}))
                    stats.lows_fewest.append(fewest_of[job.id])
            for whole, domains in ((stats.whole_leaves, leaf_nodes), (stats.whole_lows, low_nodes)):
                whole.append(sum(all(view.free(n) == shape.gpus for n in ns) for _, ns in domains))

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
        busy -= gpus * by_id[jid].nodes
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


def cmd_sim(args: argparse.Namespace) -> None:
    fabrics = ["tree", "rail", "nvl72"] if args.fabric == "all" else [args.fabric]
    print(
        f"{args.jobs} jobs, seed {args.seed}, offered load {100 * args.load:.0f} %, locality "
        f"{args.locality}; in-domain, leaves and ring crossings over multi-node jobs (ring: "
        "consecutive ranks, wrap-around included, on different leaf domains; NVLink domains on "
        "nvl72); minimal: share of jobs crossing only the boundaries their placement forces"
    )
    print(
        "| fabric | policy | in rule's domain | leaf domains / job | ring crossings / job "
        "| minimal | <=18-node jobs in one NVLink domain | mean delay (h) | p95 delay (h) "
        "| GPU util | leaf frag mean / max | sim s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"first": "first-fit", "tightest": "gpufabric, no ranks", "ranked": "gpufabric, ranks"}
    for fab in fabrics:
        shape = FABRICS[fab]
        total = shape.nodes * shape.gpus
        jobs = job_stream(args.jobs, args.seed, total, args.load, shape.gpus)
        for policy in POLICIES:
            t0 = time.perf_counter()
            s = simulate(policy, jobs, shape, args.seed, args.locality)
            took = time.perf_counter() - t0
            minimal = statistics.fmean(r.crossings == r.forced for r in s.rings)
            nvl = f"{100 * statistics.fmean(s.nvl_small):.1f} %" if s.nvl_small else "-"
            print(
                f"| {fab} | {names.get(policy, 'stock scheduler')} "
                f"| {100 * statistics.fmean(s.in_domain):.1f} % "
                f"| {statistics.fmean(s.leaves):.2f} "
                f"| {statistics.fmean(r.crossings for r in s.rings):.2f} | {100 * minimal:.1f} % "
                f"| {nvl} | {statistics.fmean(s.delays) / 3600:.2f} "
                f"| {pct(s.delays, 0.95) / 3600:.2f} | {100 * s.busy_area / (s.span * total):.1f} % "
                f"| {s.frag_area / s.span:.2f} / {s.frag_max:.2f} | {took:.0f} |",
                flush=True,
            )

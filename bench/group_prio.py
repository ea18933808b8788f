"""`bench/group_sim.py prio`: two priority classes through the Placer itself (order, holds,
preemption, Eviction API answered at once), with and without preemption, on the `sim` stream.

    .venv/bin/python bench/group_sim.py prio [--jobs 1500] [--load 0.85] [--high 0.2] [--seed 1]

Every job is one group (one 8-GPU pod per node, locality as `--locality`), a share `--high` of
them at priority 1,000,000, the rest at 100. The simulated cluster answers the placer at once:
an ungated member binds to the node its GPUs were promised on, an evicted pod leaves at once
(grace 0) and its job loses its work and comes back as new gated pods (its controller recreates
them; their creation time is now). Variants on the same stream: "no priority" (every job at the
same priority: the placer's order is oldest first), "priority, no preemption" (order and held
domains, no evictor) and "priority + preemption". Reported per class: queueing delay (every wait
of the job, also after a preemption; mean, p95), the share of multi-node jobs in one domain of
their rule's level, preemptions, and the GPU-hours of work lost to them.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from group_workload import FABRICS, Job, job_stream, node_objs, pct, rule_level

from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.framework.evictions import Outcome
from webhook.groups.model.names import GATE, level_key
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer

HIGH, LOW = 1_000_000, 100


class SimApi:
    """The cluster as the placer sees it: patches and evictions recorded for the loop to apply."""

    def __init__(self) -> None:
        self.ungated: list[tuple[str, str]] = []
        self.evicted: list[str] = []

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        self.ungated.append((namespace, name))

    def event(self, pod: Any, reason: str, message: str, kind: str) -> None:
        return None

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        if not dry_run:
            self.evicted.append(name)
        return "evicted", ""


def pod(name: str, job: Job, size: int, priority: int, created: float, locality: str) -> dict:
    group = name.rsplit("-", 1)[0]
    return {
        "metadata": {
            "name": name,
            "namespace": "sim",
            "uid": name,
            "creationTimestamp": f"{created:015.3f}",  # fixed width: sorts as text, as RFC 3339
            "labels": {"gpufabric.io/group": group},
            "annotations": {
                "gpufabric.io/group": group,
                "gpufabric.io/group-size": str(size),
                "gpufabric.io/group-locality": locality,
            },
        },
        "spec": {
            "priority": priority,
            "terminationGracePeriodSeconds": 0,
            "schedulingGates": [{"name": GATE}],
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
        "status": {"phase": "Pending"},
    }


@dataclass
class Stats:
    delays: dict[int, list[float]] = field(default_factory=lambda: {HIGH: [], LOW: []})
    in_domain: dict[int, list[bool]] = field(default_factory=lambda: {HIGH: [], LOW: []})
    preempted: dict[int, int] = field(default_factory=lambda: {HIGH: 0, LOW: 0})
    lost_gpu_h: float = 0.0
    busy_gpu_h: float = 0.0  # GPU-hours running between the first measured and the last arrival


def simulate(
    jobs: list[Job], prio: dict[int, int], classes: dict[int, int], preempt: bool, locality: str
) -> Stats:
    """`prio`: what the pods say; `classes`: how the jobs are counted (the same, but for the run
    without priorities)."""
    shape = FABRICS["tree"]
    api = SimApi()
    now = [0.0]
    ext = Extensions(Preemption(api if preempt else None))
    placer = Placer(api, clock=lambda: now[0], extensions=ext)
    nodes = node_objs(shape.nodes, shape.sizes, shape.gpus)
    placer.nodes_listed(nodes)
    view = placer.view
    levels = {j.nodes: rule_level(view, j.nodes) for j in jobs}
    warm, end = jobs[len(jobs) // 3].arrival, jobs[-1].arrival
    by_id = {j.id: j for j in jobs}
    events: list[tuple[float, int, int, int]] = [(j.arrival, 1, j.id, 0) for j in jobs]
    heapq.heapify(events)
    tries: dict[int, int] = {}  # job -> incarnation (pods of an earlier one are gone)
    waited: dict[int, float] = {}  # job -> waiting so far, over its incarnations
    since: dict[int, float] = {}  # job -> when its current wait began
    bound: dict[int, set[str]] = {}
    started: dict[int, float] = {}
    objs: dict[str, dict[str, Any]] = {}
    stats = Stats()

    def create(job: Job) -> None:
        k = tries.get(job.id, 0)
        since[job.id] = now[0]
        bound[job.id] = set()
        for i in range(job.nodes):
            obj = pod(f"j{job.id}r{k}-{i}", job, job.nodes, prio[job.id], now[0], locality)
            objs[obj["metadata"]["name"]] = obj
            placer.pod_event("ADDED", obj)

    def remove(job: Job) -> None:
        k = tries.get(job.id, 0)
        for i in range(job.nodes):
            obj = objs.pop(f"j{job.id}r{k}-{i}", None)
            if obj is not None:
                placer.pod_event("DELETED", obj)

    def settle() -> None:
        """Reconcile until the placer has nothing more to do this instant."""
        for _ in range(10):
            placer.reconcile()
            if not api.ungated and not api.evicted:
                return
            ungated, api.ungated = api.ungated, []
            for _, name in ungated:
                obj = objs[name]
                node = view.promised[name][0]
                obj = {**obj, "spec": {**obj["spec"], "nodeName": node, "schedulingGates": []}}
                obj["status"] = {"phase": "Running"}
                objs[name] = obj
                placer.pod_event("MODIFIED", obj)
                jid = int(name[1:].split("r")[0])
                bound[jid].add(name)
                if len(bound[jid]) == by_id[jid].nodes:
                    start(by_id[jid])
            evicted, api.evicted = api.evicted, []
            for jid in sorted({int(n[1:].split("r")[0]) for n in evicted}):
                if jid in started:
                    preempted(by_id[jid])

    def start(job: Job) -> None:
        if job.id in started:
            return
        started[job.id] = now[0]
        busy[0] += job.nodes * shape.gpus
        waited[job.id] = waited.get(job.id, 0.0) + now[0] - since[job.id]
        heapq.heappush(events, (now[0] + job.duration, 0, job.id, tries.get(job.id, 0)))
        if job.arrival >= warm and job.id not in stats_seen:
            stats_seen.add(job.id)
            if job.nodes > 1:
                key = level_key(levels[job.nodes])
                names = [n for n in objs if n.startswith(f"j{job.id}r{tries.get(job.id, 0)}-")]
                domains = {view.nodes[objs[n]["spec"]["nodeName"]].labels[key] for n in names}
                stats.in_domain[classes[job.id]].append(len(domains) == 1)

    def preempted(job: Job) -> None:
        ran = now[0] - started.pop(job.id)
        busy[0] -= job.nodes * shape.gpus
        if job.arrival >= warm:
            stats.lost_gpu_h += ran * job.nodes * shape.gpus / 3600
            stats.preempted[classes[job.id]] += 1
        remove(job)
        tries[job.id] = tries.get(job.id, 0) + 1
        create(job)

    stats_seen: set[int] = set()
    finished: set[int] = set()
    busy, last = [0], 0.0
    while events:
        t, kind, jid, k = heapq.heappop(events)
        if t > end:
            break
        if t > warm:
            stats.busy_gpu_h += busy[0] * (t - max(last, warm)) / 3600
        now[0] = last = t
        job = by_id[jid]
        if kind == 1:
            create(job)
        elif k == tries.get(jid, 0) and jid in started:  # a finish of the current incarnation
            started.pop(jid)
            busy[0] -= job.nodes * shape.gpus
            finished.add(jid)
            remove(job)
        settle()
    for job in jobs:  # every wait of every measured job, also of those still waiting at the end
        if job.arrival >= warm and job.id in since:
            still = 0.0 if job.id in started or job.id in finished else end - since[job.id]
            stats.delays[classes[job.id]].append(waited.get(job.id, 0.0) + still)
    return stats


def cmd_prio(args: argparse.Namespace) -> None:
    shape = FABRICS["tree"]
    total = shape.nodes * shape.gpus
    print(
        f"tree fabric, {shape.nodes} nodes x {shape.gpus} GPUs; {args.jobs} jobs, seed {args.seed}, "
        f"{100 * args.high:.0f} % high priority, locality {args.locality}; measured after the "
        "first third; delay: all waiting of a job (after a preemption too)"
    )
    print(
        "| load | variant | high: mean / p95 delay (h) | low: mean / p95 delay (h) | in rule's "
        "domain high / low | preempted jobs high / low | GPU-hours preempted (share of GPU-hours "
        "run) | GPU util | sim s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for load in args.load:
        jobs = job_stream(args.jobs, args.seed, total, load, shape.gpus)
        warm = jobs[len(jobs) // 3].arrival
        rng = random.Random(args.seed)
        classes = {j.id: HIGH if rng.random() < args.high else LOW for j in jobs}
        flat = dict.fromkeys(classes, LOW)
        variants = (
            ("no priority", flat, False),
            ("priority, no preemption", classes, False),
            ("priority + preemption", classes, True),
        )
        for label, prio, preempt in variants:
            t0 = time.perf_counter()
            s = simulate(jobs, prio, classes, preempt, args.locality)
            took = time.perf_counter() - t0
            cells = []
            for c in (HIGH, LOW):
                d = s.delays[c]
                mean = statistics.fmean(d) / 3600 if d else 0.0
                cells.append(f"{mean:.2f} / {pct(d, 0.95) / 3600:.2f}")
            dom = " / ".join(
                f"{100 * statistics.fmean(s.in_domain[c]):.1f} %" if s.in_domain[c] else "-"
                for c in (HIGH, LOW)
            )
            print(
                f"| {100 * load:.0f} % | {label} | {cells[0]} | {cells[1]} | {dom} "
                f"| {s.preempted[HIGH]} / {s.preempted[LOW]} | {s.lost_gpu_h:,.0f} "
                f"({100 * s.lost_gpu_h / max(s.busy_gpu_h, 1e-9):.1f} %) "
                f"| {100 * s.busy_gpu_h * 3600 / (total * (jobs[-1].arrival - warm)):.1f} % "
                f"| {took:.0f} |",
                flush=True,
            )

"""The group placer's decision speed by cluster size (`bench/group_sim.py perf` runs the default).

    .venv/bin/python bench/group_perf.py [--nodes 4096] [--fabric tree|nvl72] [--decisions 1000]
    .venv/bin/python bench/group_perf.py --curve [--decisions 400]

One size: N nodes (tree: 8 GPUs, leaves of 4, spines of 128; nvl72: trays of 4 GPUs, 18 per
NVLink domain, 144 per leaf), running pods scaled from the 4,096-node case (1,000 whole-node pods
and 19,000 1-GPU pods packed 8 per node: 82 % of the nodes busy, the free ones scattered), fed
through Placer.pods_listed. Decisions for a 16-pod group of whole nodes (half required, half
preferred), decide alone and decide + seat_new, with CPU time (thread_time) beside a bare baseline
interleaved in the same run: one dict lookup per node of the cluster (the free GPUs of every node
summed from a plain dict), so the ratio says how many such passes a decision costs; after one
warm-up decision, since a pod shape's first decision judges its eligible nodes once (timed on its
own, for a shape pinned to one spine). A node event and the decision after it: a Ready flip, and
a node joining in domains of its own (each level's order sorted again). End to end: groups placed
per CPU-second through the Placer (16 ADDED events, reconcile, 16 patches to a no-op API, 16
DELETED events). Peak RSS of the process. `--curve` runs 4,096 / 16,384 / 65,536
nodes and 65,520 NVL72 trays, each in its own process (so each peak RSS is its own), and prints
one table.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from group_workload import ANY, FABRICS, node_objs, pct

from webhook.groups.decision.choose import decide
from webhook.groups.decision.decision import Member, Placed, Request
from webhook.groups.decision.seating import seat_new
from webhook.groups.model.names import GATE
from webhook.groups.model.selector import selector_of
from webhook.groups.placer.placer import Placer

CURVE = (("tree", 4096), ("tree", 16384), ("tree", 65536), ("nvl72", 65520))
BASE = 4096  # the size the busy-pod mix is drawn for


def busy_pods(names: list[str], gpus: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    """Per 4,096 nodes: 1,000 whole-node pods and 2,375 nodes packed with 1-GPU pods, node order
    shuffled, so 721 nodes stay free, scattered."""
    order = names[:]
    rng.shuffle(order)
    whole = len(names) * 1000 // BASE
    packed = len(names) * 2375 // BASE
    for k in range(whole):
        yield pod(f"big-{k}", gpus, order[k])
    for i in range(packed * gpus):
        yield pod(f"small-{i}", 1, order[whole + i // gpus])


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


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.2f}"


def measure(fabric: str, nodes: int, decisions: int, seed: int) -> dict[str, Any]:
    """One size: the numbers `--curve` tabulates."""
    rng = random.Random(seed)
    shape = FABRICS[fabric]
    placer = Placer(NullApi())
    objs = node_objs(nodes, shape.sizes, shape.gpus)
    placer.nodes_listed(objs)
    names = sorted(placer.view.nodes)
    placer.pods_listed(busy_pods(names, shape.gpus, rng))
    view = placer.view
    view.index()  # built once per node change, not per decision
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    members = tuple(Member(f"g/{i}", shape.gpus, ANY) for i in range(16))
    free = {n: view.free(n) for n in names}  # the baseline's plain dict
    cpu: list[float] = []
    ranked: list[float] = []
    base: list[float] = []

    def timed(locality: str, with_ranks: bool) -> float:
        c = time.thread_time()
        d = decide(view, Request("g", members, locality))  # type: ignore[arg-type]
        if with_ranks and isinstance(d, Placed):  # as the placer decides now
            seat_new(view, d, members, {})
        return time.thread_time() - c

    decide(view, Request("g", members, "required"))  # warm-up: a new shape's cost is its own
    for i in range(decisions):
        c = time.thread_time()
        sum(free[n] for n in names)
        base.append(time.thread_time() - c)
        locality = "required" if i % 4 < 2 else "preferred"
        first = bool(i % 2)  # alternate which runs first: the second finds the caches warm
        for with_ranks in (first, not first):
            (ranked if with_ranks else cpu).append(timed(locality, with_ranks))
    flips, adds, shape_first = after_node_events(placer, objs, members, rng)
    # End to end: group arrives (16 ADDED events), reconcile places it; then it finishes.
    c0 = time.thread_time()
    groups = max(1, decisions // 4)
    for g in range(groups):
        objs = [pod(f"g{g}-{i}", shape.gpus, group=f"g{g}", size=16) for i in range(16)]
        for o in objs:
            placer.pod_event("ADDED", o)
        placer.reconcile()
        for o in objs:
            placer.pod_event("DELETED", o)
    busy = time.thread_time() - c0
    return {
        "fabric": fabric,
        "nodes": nodes,
        "pods": len(view.bound),
        "free_gpus": view.free_total(),
        "cpu_p50": statistics.median(cpu),
        "cpu_p99": pct(cpu, 0.99),
        "ranked_p50": statistics.median(ranked),
        "ranked_p99": pct(ranked, 0.99),
        "base_p50": statistics.median(base),
        "base_p99": pct(base, 0.99),
        "groups_per_cpu_s": groups / busy,
        "flip_p50": statistics.median(flips),
        "flip_max": max(flips),
        "add_p50": statistics.median(adds),
        "add_max": max(adds),
        "new_shape": shape_first,
        "rss_built": rss_built,
        "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def after_node_events(
    placer: Placer, objs: list[dict[str, Any]], members: tuple[Member, ...], rng: random.Random
) -> tuple[list[float], list[float], float]:
    """CPU of a node event and the next decision: a node's Ready flip (its domains unchanged);
    a node joining in a leaf, pair, quad and spine of its own (each level's order sorted again);
    and the first decision of a pod shape never seen (its eligible nodes judged once)."""
    view, flips, adds = placer.view, [], []
    for k in range(20):
        i = rng.randrange(len(objs))
        down = copy.deepcopy(objs[i])
        down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        for o in (down, objs[i]):  # NotReady, then Ready again
            c = time.thread_time()
            placer.node_event("MODIFIED", o)
            decide(view, Request("g", members, "required" if k % 2 else "preferred"))
            flips.append(time.thread_time() - c)
    for k in range(20):
        obj = copy.deepcopy(objs[0])
        obj["metadata"]["name"] = f"joined-{k}"
        labels = obj["metadata"]["labels"]
        for key in labels:
            labels[key] = f"{labels[key]}-joined-{k}"
        c = time.thread_time()
        placer.node_event("ADDED", obj)
        decide(view, Request("g", members, "required" if k % 2 else "preferred"))
        adds.append(time.thread_time() - c)
    spine = objs[0]["metadata"]["labels"]["gpufabric.io/spine"]
    pinned = selector_of({"nodeSelector": {"gpufabric.io/spine": spine}})
    shaped = tuple(Member(m.key, m.gpus, pinned) for m in members)
    c = time.thread_time()
    decide(view, Request("g", shaped, "required"))
    return flips, adds, time.thread_time() - c


def report(r: dict[str, Any]) -> None:
    print(
        f"{r['nodes']:,} nodes ({r['fabric']}), {r['pods']:,} running pods, free GPUs "
        f"{r['free_gpus']:,}\n"
        f"decision, 16 whole-node pods (half required, half preferred): CPU p50 "
        f"{ms(r['cpu_p50'])} ms, p99 {ms(r['cpu_p99'])} ms; baseline (one dict lookup per node, "
        f"{r['nodes']:,} nodes) p50 {ms(r['base_p50'])} ms, p99 {ms(r['base_p99'])} ms: decision "
        f"p50 {r['cpu_p50'] / r['base_p50']:.2f}x, p99 {r['cpu_p99'] / r['base_p99']:.2f}x\n"
        f"with ranks (decide + seat_new): CPU p50 {ms(r['ranked_p50'])} ms, p99 "
        f"{ms(r['ranked_p99'])} ms = {r['ranked_p50'] / r['base_p50']:.2f}x / "
        f"{r['ranked_p99'] / r['base_p99']:.2f}x baseline\n"
        f"end to end through the Placer: {r['groups_per_cpu_s']:.0f} groups placed per CPU-second "
        "(16 ADDED events, decision, 16 patches, 16 DELETED events per group)\n"
        f"a node event, then a decision: Ready flip p50 {ms(r['flip_p50'])} ms, max "
        f"{ms(r['flip_max'])} ms; a node in a new leaf p50 {ms(r['add_p50'])} ms, max "
        f"{ms(r['add_max'])} ms; a new pod shape's first decision {ms(r['new_shape'])} ms\n"
        f"peak RSS: {r['rss_built']:.0f} MiB after building the view, {r['rss']:.0f} MiB at the end"
    )


def curve(decisions: int, seed: int) -> None:
    rows = []
    for fabric, nodes in CURVE:
        cmd = [sys.executable, __file__, "--json", "--fabric", fabric, "--nodes", str(nodes)]
        cmd += ["--decisions", str(decisions), "--seed", str(seed)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out))
        print(f"{fabric} {nodes:,}: done", file=sys.stderr, flush=True)
    print(
        "| nodes | decision CPU p50 / p99 (ms) | with ranks p50 / p99 (ms) | baseline p50 / p99 "
        "(ms) | decision / baseline p50 / p99 | groups placed per CPU-s | node event + decision: "
        "Ready flip / new leaf, p50 (max) (ms) | new shape's first decision (ms) "
        "| peak RSS (MiB) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        label = f"{r['nodes']:,}" + (" NVL72 trays" if r["fabric"] == "nvl72" else "")
        print(
            f"| {label} | {ms(r['cpu_p50'])} / {ms(r['cpu_p99'])} "
            f"| {ms(r['ranked_p50'])} / {ms(r['ranked_p99'])} "
            f"| {ms(r['base_p50'])} / {ms(r['base_p99'])} "
            f"| {r['cpu_p50'] / r['base_p50']:.2f}x / {r['cpu_p99'] / r['base_p99']:.2f}x "
            f"| {r['groups_per_cpu_s']:.0f} "
            f"| {ms(r['flip_p50'])} ({ms(r['flip_max'])}) / {ms(r['add_p50'])} "
            f"({ms(r['add_max'])}) | {ms(r['new_shape'])} | {r['rss']:.0f} |"
        )


def cmd_perf(args: argparse.Namespace) -> None:
    fabric, nodes = getattr(args, "fabric", "tree"), getattr(args, "nodes", BASE)
    if getattr(args, "curve", False):
        curve(args.decisions, args.seed)
        return
    r = measure(fabric, nodes, args.decisions, args.seed)
    if getattr(args, "json", False):
        print(json.dumps(r))
    else:
        report(r)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=BASE, help="nodes (NVL72: trays)")
    parser.add_argument("--fabric", choices=("tree", "nvl72"), default="tree")
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--curve", action="store_true", help="4,096 / 16,384 / 65,536 / NVL72")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nodes < 64:
        parser.error(f"--nodes {args.nodes}: at least 64")
    cmd_perf(args)


if __name__ == "__main__":
    main()

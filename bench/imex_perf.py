"""The decision cost of a group with an IMEX channel (one member a node, trays of other
ComputeDomains skipped) beside a plain group, on NVL72 trays.

    .venv/bin/python bench/imex_perf.py [--trays 65520] [--decisions 400]

The cluster and its running pods as bench/group_perf.py builds them (trays of 4 GPUs, 18 per
NVLink domain, 82 % of the trays busy, the free ones scattered), plus 10 % of the trays labelled
with another ComputeDomain's UID. Interleaved in one run, after each shape's first decision: the bare
baseline (one dict lookup per tray), a plain group of 16 (--size) whole trays (group_perf's decision),
and a group of as many 1-GPU members with `compute-domain` as the placer decides it (Imex.request_for:
each member's selector narrowed, one member a node), decide alone and decide + seat_new. Half
required, half preferred. CPU time (thread_time) per decision: p50, p99 and the ratios; and the first decision of each
shape on its own (it judges every tray once: group_perf's "new shape").
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from group_perf import NullApi, busy_pods
from group_workload import ANY, FABRICS, node_objs, pct

from webhook.groups.decision.choose import decide
from webhook.groups.decision.decision import Member, Placed, Request
from webhook.groups.decision.seating import seat_new
from webhook.groups.extensions.imex.names import NODE_LABEL
from webhook.groups.extensions.imex.nodes import excluding
from webhook.groups.model.names import NVLINK_LEVEL
from webhook.groups.placer.placer import Placer


def run(trays: int, decisions: int, seed: int, size: int = 16) -> dict[str, float]:
    rng = random.Random(seed)
    shape = FABRICS["nvl72"]
    objs = node_objs(trays, shape.sizes, shape.gpus)
    for o in rng.sample(objs, trays // 10):
        o["metadata"]["labels"][NODE_LABEL] = "uid-of-another-compute-domain"
    placer = Placer(NullApi())
    placer.nodes_listed(objs)
    view = placer.view
    names = sorted(view.nodes)
    placer.pods_listed(busy_pods(names, shape.gpus, rng))
    view.index()
    free = {n: view.free(n) for n in names}
    plain = tuple(Member(f"g/{i}", shape.gpus, ANY) for i in range(size))

    def imex_request(locality: str) -> Request:
        # what Imex.request_for hands choose.decide: narrowed selectors, one member a node
        members = tuple(Member(f"g/{i}", 1, excluding(ANY, ""), whole=True) for i in range(size))
        return Request("g", members, locality, NVLINK_LEVEL)  # type: ignore[arg-type]

    def plain_request(locality: str) -> Request:
        return Request("g", plain, locality)  # type: ignore[arg-type]

    def timed(make: Callable[[str], Request], locality: str, seat: bool) -> float:
        c = time.thread_time()
        req = make(locality)
        d = decide(view, req)
        if seat and isinstance(d, Placed):
            seat_new(view, d, req.members, {})
        return time.thread_time() - c

    out: dict[str, list[float]] = {k: [] for k in ("base", "plain", "imex", "imex_seat")}
    first = {}
    for key, make in (("plain", plain_request), ("imex", imex_request)):
        first[key] = timed(make, "required", False)  # a new shape judges its nodes once

    for i in range(decisions):
        c = time.thread_time()
        sum(free[n] for n in names)
        out["base"].append(time.thread_time() - c)
        locality = "required" if i % 4 < 2 else "preferred"
        runs = [
            ("plain", plain_request, False),
            ("imex", imex_request, False),
            ("imex_seat", imex_request, True),
        ]
        if i % 2:
            runs.reverse()  # alternate which runs first: the later ones find caches warm
        for key, make, seat in runs:
            out[key].append(timed(make, locality, seat))
    stats = {f"{k}_first": v for k, v in first.items()}
    for key, values in out.items():
        stats[f"{key}_p50"] = statistics.median(values)
        stats[f"{key}_p99"] = pct(values, 0.99)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trays", type=int, default=65520)
    parser.add_argument("--decisions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", type=int, default=16, help="pods per group")
    args = parser.parse_args()
    s = run(args.trays, args.decisions, args.seed, args.size)
    print(f"{args.trays:,} NVL72 trays, groups of {args.size}, {args.decisions} decisions (CPU ms)")
    for key in ("base", "plain", "imex", "imex_seat"):
        p50, p99 = 1000 * s[f"{key}_p50"], 1000 * s[f"{key}_p99"]
        ratio = s[f"{key}_p99"] / s["plain_p99"]
        print(f"  {key:10} p50 {p50:7.2f}  p99 {p99:7.2f}  p99 / plain {ratio:5.2f}x")
    print(f"  imex p99 / baseline p99: {s['imex_p99'] / s['base_p99']:.2f} passes")
    print(
        f"  first decision of a new shape: plain {1000 * s['plain_first']:.1f} ms, "
        f"imex {1000 * s['imex_first']:.1f} ms (its nodes judged once, then kept current)"
    )


if __name__ == "__main__":
    main()

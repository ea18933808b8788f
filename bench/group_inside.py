"""`bench/group_sim.py inside` (issue 25): inside the domain a group is given, the lowest domains
each multi-node job uses against the fewest that could hold it at placement, ring crossings per
job and whole free leaves after each placement, before (ranks in fabric order on the nodes
choose.decide packed in name order) and after (seating.seat_new: the fewest lowest domains,
tightest set first), at several offered loads, with node names in fabric order or shuffled (as
on the cluster of issue 25, whose names do not follow the leaves). Same job stream, simulator and
seed as `sim`; see group_sim.py's docstring for the model.
"""

from __future__ import annotations

import argparse
import statistics
import time

from group_placing import simulate
from group_workload import FABRICS, job_stream


def cmd_inside(args: argparse.Namespace) -> None:
    """Issue 25: lowest domains per job against the fewest that could hold it, ring crossings
    and whole free leaves, before (ranks in fabric order on decide's own nodes) and after
    (seat_new: the fewest lowest domains, tightest set first)."""
    fabrics = ["tree", "rail", "nvl72"] if args.fabric == "all" else [args.fabric]
    print(
        f"{args.jobs} jobs, seed {args.seed}, locality {args.locality}; multi-node jobs after "
        "warm-up; lowest domain: NVLink domain on nvl72, else leaf; at fewest: share of jobs "
        "using no more lowest domains than the fewest that could hold them in their domain at "
        "placement; whole free leaves (lowest domains): mean over all placements after warm-up"
    )
    print(
        "| fabric | node names | load | placer | lowest domains / job | fewest / job "
        "| at fewest | ring crossings / job | minimal rings | whole free leaves "
        "| whole free lowest domains | sim s |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"before": "before (#25)", "ranked": "after"}
    for fab in fabrics:
        shape = FABRICS[fab]
        for order in args.names.split(","):
            for load in (float(x) for x in args.loads.split(",")):
                jobs = job_stream(args.jobs, args.seed, shape.nodes * shape.gpus, load, shape.gpus)
                for policy in ("before", "ranked"):
                    t0 = time.perf_counter()
                    st = simulate(
                        policy, jobs, shape, args.seed, args.locality, order == "shuffled"
                    )
                    took = time.perf_counter() - t0
                    pairs = list(zip(st.lows_used, st.lows_fewest, strict=True))
                    at = statistics.fmean(u <= f for u, f in pairs)
                    minimal = statistics.fmean(r.crossings == r.forced for r in st.rings)
                    print(
                        f"| {fab} | {order} | {100 * load:.0f} % | {names[policy]} "
                        f"| {statistics.fmean(st.lows_used):.2f} "
                        f"| {statistics.fmean(st.lows_fewest):.2f} | {100 * at:.1f} % "
                        f"| {statistics.fmean(r.crossings for r in st.rings):.2f} "
                        f"| {100 * minimal:.1f} % | {statistics.fmean(st.whole_leaves):.1f} "
                        f"| {statistics.fmean(st.whole_lows):.1f} "
                        f"| {took:.0f} |",
                        flush=True,
                    )

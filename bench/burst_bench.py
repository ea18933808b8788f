#!/usr/bin/env python3
"""Bursts of gangs through the placer, with kube-scheduler's bind simulated member by member.

    .venv/bin/python bench/burst_bench.py [--bursts 1000] [--quick] [--seed 1]

The issue's burst on its cluster: 128 nodes x 8 GPUs, 16 leaves of 8 under 2 spines, every node
running a pod of the earlier burst. Each burst: the earlier burst's pods are deleted, and at once
19 gangs come (one 8-GPU pod a node, `group-locality: required`; 8 x 2 nodes, 4 x 4, 4 x 8 at
leaf level, 2 x 16 at leaf-pair, 1 x 32 at leaf-quad: exactly the 128 nodes), in shuffled order,
while 0-3 pods of other tenants wait for room. kube-scheduler (tests/webhook/groups/
burst_world.py) binds each ungated member 0-3 s after its gate went (the injected delay), from a
view that still counts each deleted pod for 0.5-6 s, trying the other tenants' pods first: the
partial bind of the issue. Members are Job pods (an evicted one is made again 1 s later, gated).

Each burst runs twice on the same seed, interleaved: with the placer's partly-bound watch (60 s)
and without it (the bound set past any run), the placer as it was. Reported: gangs placed (all
members bound), gangs left partly bound at the end (some members bound, others not, or gated),
partial binds the watch saw (GroupPartlyBound on an unbound member) and gangs it released whole,
time from the burst to all bound (per burst: its last gang placed; simulated seconds), and the
wall time per burst (placer and simulated cluster). `--shape half`: the issue's half-load burst
(8 x 2, 4 x 4, 4 x 8 at leaf level: 64 nodes), where a displaced member finds room again. A burst ends when every gang is bound, else after 200 simulated seconds.
The other tenants' pods never end, so a gang they displaced either finds room again in its domain
or waits, gated and holding nothing, once released.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.webhook.groups.burst_world import Burst, World, member

HALF = [(2, "leaf")] * 8 + [(4, "leaf")] * 4 + [(8, "leaf")] * 4  # 64 nodes, 16 gangs
SHAPES = {"full": [*HALF, (16, "leaf-pair"), (16, "leaf-pair"), (32, "leaf-quad")], "half": HALF}
UNTIL = 200.0
QUIET = 130.0  # without the watch: a gang partly bound at 130 s stays so (nothing moves it)


def settled(w: World, names: list[str]) -> bool:
    """Every gang bound, or waiting gated with nothing bound, and nothing left to do."""
    if len(w.bound_at) == len(names):
        return True
    if w.again or w.watch.recovering or w.now < 10.0:
        return False
    for p in w.api.pods.values():
        labels = p["metadata"].get("labels") or {}
        group = labels.get("gpufabric.io/group")
        if group is None or group in w.bound_at:
            continue
        if p["spec"].get("nodeName") or not p["spec"].get("schedulingGates"):
            return False  # a gang partly bound, or ungated and not bound yet
        if (p["metadata"]["namespace"], group) not in w.placer.waiting:
            return False  # gated, and the placer has not looked yet
    return True


def burst(seed: int, watch: bool, shape_name: str = "full") -> tuple[Burst, int, int, float]:
    rng = random.Random(seed)
    w = World(
        128,
        seed=seed,
        after=60.0 if watch else float("inf"),
        lag=(0.5, 6.0),
        delay=(0.0, 3.0),
        leaf=8,
        spine_leaves=8,
    )
    w.waiting_pods(rng.randrange(4))
    w.delete_earlier()
    shape = list(enumerate(SHAPES[shape_name]))
    rng.shuffle(shape)
    names = [f"gp{size}-{i}" for i, (size, _) in shape]
    for i, (size, level) in shape:
        for m in range(size):
            w.create(member(f"gp{size}-{i}", m, size, level=level))
    started = time.perf_counter()
    w.run(UNTIL if watch else QUIET, done=lambda: settled(w, names))
    took = time.perf_counter() - started
    b = w.outcome(names)
    told = {n for n, r, t in b.events if r == "GroupPartlyBound" and "released" not in t}
    released = {
        t.split(":")[0] for _, r, t in b.events if r == "GroupPartlyBound" and "released" in t
    }
    return b, len(told), len(released), took


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bursts", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="50 bursts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="full", help="half: 16 gangs")
    args = ap.parse_args(argv)
    bursts = 50 if args.quick else args.bursts
    rows: dict[bool, list[tuple[Burst, int, int, float]]] = {True: [], False: []}
    for k in range(bursts):
        for watch in (True, False):  # interleaved: the same burst, with and without the watch
            rows[watch].append(burst(args.seed * 100_000 + k, watch, args.shape))
    gangs = len(SHAPES[args.shape])
    print(f"{bursts} bursts of {gangs} gangs on 128 nodes (seed {args.seed}, {args.shape})")
    header = f"placer          placed/burst  all {gangs}   left partly  partial binds  released"
    print(header + "  to all bound p50/p95/max (s)  wall/burst")
    for watch in (True, False):
        r = rows[watch]
        placed = [b.placed for b, *_ in r]
        last = [max(b.bound_at.values()) for b, *_ in r if b.bound_at]  # its last placed gang
        print(
            f"{'with the watch' if watch else 'without':<15} {statistics.mean(placed):12.2f}"
            f"  {sum(p == gangs for p in placed):6d}  {sum(b.partly for b, *_ in r):11d}"
            f"  {sum(t for _, t, _, _ in r):13d}  {sum(x for _, _, x, _ in r):8d}"
            f"  {pct(last, 0.5):8.1f} {pct(last, 0.95):6.1f} {max(last, default=0):6.1f}"
            f"        {statistics.mean(w for *_, w in r) * 1000:6.0f} ms"
        )
    hit = sum(1 for b, *_ in rows[False] if b.partly)
    print(f"bursts with a gang left partly bound without the watch: {hit} of {bursts}")
    print("per burst (with the watch): burst, gangs placed, left partly, to all bound (s)")
    for k, (b, *_rest) in enumerate(rows[True][: 10 if bursts > 10 else bursts]):
        final = max(b.bound_at.values(), default=float("nan"))
        print(f"  {k:4d} {b.placed:3d} {b.partly:2d} {final:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

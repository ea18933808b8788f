#!/usr/bin/env python3
"""Group placement: a discrete-event simulation over the placer's own decision code, and the
decision speed at scale.

    .venv/bin/python bench/group_sim.py sim  [--jobs 3000] [--seed 1] [--fabric tree|rail|nvl72|all]
    .venv/bin/python bench/group_sim.py perf [--decisions 1000]
    .venv/bin/python bench/group_sim.py inside [--jobs 3000] [--loads 0.85,0.95]
        [--names fabric,shuffled] [--fabric tree|rail|nvl72|all]
    .venv/bin/python bench/group_sim.py prio [--jobs 1500] [--load 0.85 0.95] [--high 0.2]
    .venv/bin/python bench/group_sim.py prio-perf [--nodes 4096 65536] [--decisions 200]

`sim`: the placement simulation (group_placing.py, its docstring says what is simulated).
`perf`: 4,096 nodes / 32,768 GPUs, 20,000 running pods fed through Placer.pods_listed; decisions
for 16-pod x 8-GPU groups (p50/p99 latency), end-to-end groups/s through the Placer (ADDED events,
reconcile, one patch per member to a no-op API), and the process's peak RSS. Speed is shown
beside a baseline interleaved in the same process (one pass summing the free GPUs of all 4,096
nodes), since absolute numbers on a shared machine swing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from group_workload import FABRICS  # noqa: E402  (bench/, beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sim")
    s.add_argument("--jobs", type=int, default=3000)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--fabric", choices=(*FABRICS, "all"), default="all")
    s.add_argument("--locality", choices=("preferred", "required"), default="preferred")
    s.add_argument("--load", type=float, default=0.85, help="offered load (share of all GPUs)")
    i = sub.add_parser("inside", help="issue 25: fewest lowest domains, before and after")
    i.add_argument("--jobs", type=int, default=3000)
    i.add_argument("--seed", type=int, default=1)
    i.add_argument("--fabric", choices=(*FABRICS, "all"), default="all")
    i.add_argument("--locality", choices=("preferred", "required"), default="preferred")
    i.add_argument("--loads", default="0.85,0.95", help="offered loads, comma-separated")
    i.add_argument(
        "--names", default="fabric,shuffled", help="node name order(s): fabric, shuffled"
    )
    p = sub.add_parser("perf")
    p.add_argument("--decisions", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    q = sub.add_parser("prio", help="two priority classes through the Placer (group_prio.py)")
    q.add_argument("--jobs", type=int, default=1500)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--high", type=float, default=0.2, help="share of jobs at high priority")
    q.add_argument("--load", type=float, nargs="+", default=[0.85, 0.95])
    q.add_argument("--locality", choices=("preferred", "required"), default="preferred")
    r = sub.add_parser("prio-perf", help="decision cost with preemption (preempt_perf.py)")
    r.add_argument("--nodes", type=int, nargs="+", default=[4096, 65536])
    r.add_argument("--decisions", type=int, default=200)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument(
        "--pdb-every",
        type=int,
        default=16,
        help="one PodDisruptionBudget per this many running pods, counted per plan (0: none)",
    )
    r.add_argument(
        "--pdb-zero-every",
        type=int,
        default=32,
        help="every Nth budget allows 0 disruptions (1: all: every domain refused)",
    )
    args = parser.parse_args()
    if args.cmd == "sim":
        from group_placing import cmd_sim

        cmd_sim(args)
    elif args.cmd == "inside":
        from group_inside import cmd_inside

        cmd_inside(args)
    elif args.cmd == "prio-perf":
        from preempt_perf import cmd_prio_perf

        cmd_prio_perf(args)
    elif args.cmd == "prio":
        from group_prio import cmd_prio

        cmd_prio(args)
    else:
        from group_perf import cmd_perf

        cmd_perf(args)


if __name__ == "__main__":
    main()

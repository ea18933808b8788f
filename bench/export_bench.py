#!/usr/bin/env python3
"""Export benchmark (issue 19): each scheduler export of the 4,096-node x 8-rail fabric, as ratios
to `topology -o labels` of the same fabric, measured in the same run, interleaved.

    .venv/bin/python bench/export_bench.py [--rounds 5] [--nvlink]

The fabric: the synthetic rail-optimized ibnetdiscover dump of bench/fabric_bench.py (128 scalable
units of 32 nodes, 8 rails, 3 tiers), joined to its 4,096 statuses by HCA GUID. Each measured
command is what `gpufabric-webhook topology --source DUMP --status ... -o X` does in-process after
reading its files: derive the fabric, make the Positions, print X (to a string). `-o labels` is
the baseline. Time: median of --rounds, CPU time, every round running the baseline and every export
in turn. Memory: tracemalloc peak of one whole command (the dump text itself excluded), as a ratio
to the baseline's. With --nvlink, every 16 nodes share one NVLink domain (so Volcano gets its fifth
tier and Kueue/KAI their second Topology). Also: the API writes the in-cluster exporter makes to
reach a steady state against the fake API server, and in steady state (target 0).
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fabric_dump import FatTree  # noqa: E402
from webhook.cli.topology import EXPORTS, render_export  # noqa: E402
from webhook.export.model import build  # noqa: E402
from webhook.fabric import render  # noqa: E402
from webhook.fabric.levels import Positions  # noqa: E402
from webhook.fabric.sources import join  # noqa: E402
from webhook.fabric.sources.formats import derive  # noqa: E402

UUID = "6a1c9e4e-2f3b-4d5a-9c8e-0123456789ab"


def _cpu(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def _peak(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def bench_writes(positions: Positions, domains: dict[str, str]) -> None:
    from tests.webhook.export.fake_api import FakeSchedulerApi
    from webhook.export.controller import Exporter
    from webhook.export.kinds import KINDS

    api = FakeSchedulerApi(
        ("kueue.x-k8s.io", "topologies", ()),
        ("kai.scheduler", "topologies", ()),
        ("topology.volcano.sh", "hypernodes", ()),
    )
    now = [0.0]
    exporter = Exporter(
        api,
        list(KINDS.values()),
        lambda: positions,
        lambda k, c: None,
        lambda: domains,
        clock=lambda: now[0],
    )
    exporter.listed("statuses")
    exporter.listed("nodes")
    start = exporter.sync()
    now[0] += 1
    steady = exporter.sync()
    now[0] += 301  # the periodic relist
    steady += exporter.sync()
    objects = sum(len(api.stored(k)) for k in KINDS.values())
    print(
        f"  in-cluster: {objects} objects; {start} writes to a steady state "
        f"({start / max(objects, 1):.2f} per object); {steady} writes in steady state "
        "(two rounds and a full relist)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nvlink", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    tree = FatTree(128, 32, rails=8, spines=16, tiers=3, pod_size=4)
    text, statuses = tree.render()
    nodes = join.from_statuses(statuses.items())
    names = sorted(statuses)
    domains = {n: f"{UUID}.{i // 16}" for i, n in enumerate(names)} if args.nvlink else {}

    def labels() -> str:
        return render.label_lines(Positions(derive(text, "ibnetdiscover", nodes)))

    def export(output: str) -> Callable[[], str]:
        def run() -> str:
            pos = Positions(derive(text, "ibnetdiscover", nodes))
            return render_export(output, build(pos, domains))

        return run

    commands = {"labels": labels} | {o: export(o) for o in EXPORTS}
    cpu: dict[str, list[float]] = {o: [] for o in commands}
    for _ in range(args.rounds):
        for output, fn in commands.items():
            cpu[output].append(_cpu(fn))
    peak = {o: _peak(fn) for o, fn in commands.items()}
    size = {o: len(fn()) for o, fn in commands.items()}
    pos = Positions(derive(text, "ibnetdiscover", nodes))
    print(
        f"4,096 nodes x 8 rails: {len(pos.placed)} placed, "
        f"{sum(1 for d in pos.domains if d.level == 'leaf')} leaf domains, "
        f"NVLink domains: {len(set(domains.values())) or 'none'}; {args.rounds} rounds"
    )
    base_cpu, base_peak = statistics.median(cpu["labels"]), peak["labels"]
    print(
        f"  {'-o':<12} {'cpu s':>7} {'x labels':>9} {'peak MiB':>9} {'x labels':>9} {'bytes':>10}"
    )
    for output in commands:
        t = statistics.median(cpu[output])
        print(
            f"  {output:<12} {t:7.3f} {t / base_cpu:8.2f}x {peak[output]:9.1f} "
            f"{peak[output] / base_peak:8.2f}x {size[output]:10,}"
        )
    # The step alone, from one Positions: what an export adds to what the labels already cost.
    steps = {"labels": lambda: render.label_lines(pos)} | {
        o: (lambda o=o: render_export(o, build(pos, domains))) for o in EXPORTS
    }
    step_cpu: dict[str, list[float]] = {o: [] for o in steps}
    for _ in range(args.rounds * 4):
        for output, fn in steps.items():
            step_cpu[output].append(_cpu(fn))
    base = statistics.median(step_cpu["labels"])
    print(
        "  the output step alone (same Positions), ms: "
        + ", ".join(f"{o} {statistics.median(v) * 1000:.1f}" for o, v in step_cpu.items())
        + f" (labels = {base * 1000:.1f})"
    )
    bench_writes(pos, domains)
    return 0


if __name__ == "__main__":
    sys.exit(main())

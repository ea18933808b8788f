#!/usr/bin/env python3
"""Agent benchmarks: probe latency on the HGX H100 fixture, status size, steady-state writes, RSS.

    .venv/bin/python bench/agent_bench.py [--runs 300] [--soak-seconds 600]

Targets (issue 2): probe median <= 20 ms; status <= 16 KiB; 0 writes across 1,000 unchanged probes
and 1 after a port goes down; RSS of the running loop <= 80 MB after 10 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from agent.assemble import Options  # noqa: E402
from agent.gather import open_snapshot  # noqa: E402
from agent.host import HostReader  # noqa: E402
from agent.nvml import SnapshotNvml  # noqa: E402
from agent.output import canonical_json, status_object  # noqa: E402
from agent.probe import ProbeConfig, probe_node  # noqa: E402
from agent.publish import RecordingPublisher  # noqa: E402
from agent.runner import Agent  # noqa: E402
from agent.udev import QueueSource  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "hosts" / "hgx-h100.tar.gz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=60.0,
        help="how long to run the daemon loop for the RSS figure (target: 600)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snap = open_snapshot(FIXTURE, Path(tmp))
        reader = HostReader(snap.root)
        nvml = SnapshotNvml(snap.nvml)
        cfg = ProbeConfig()
        for _ in range(20):
            probe_node(reader, nvml, cfg)
        times = []
        gc.collect()
        for _ in range(args.runs):
            t = time.perf_counter()
            result = probe_node(reader, nvml, cfg)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        size = len(canonical_json(status_object("hgx-h100", result)).encode())
        print(
            f"probe hgx-h100: median {statistics.median(times):.2f} ms, "
            f"p90 {times[int(len(times) * 0.9)]:.2f} ms, min {times[0]:.2f} ms "
            f"({args.runs} runs; target median <= 20 ms)"
        )
        print(f"status JSON size: {size} bytes = {size / 1024:.1f} KiB (target <= 16 KiB)")

        publisher = RecordingPublisher()

        def prober(opts: Options):  # type: ignore[no-untyped-def]
            return probe_node(reader, nvml, cfg, opts)

        agent = Agent("hgx-h100", prober, publisher)
        agent.cycle("start")
        for _ in range(1000):
            agent.cycle("resync")
        print(
            f"steady state: {len(publisher.applied) - 1} writes across 1,000 unchanged probes "
            "(target 0)"
        )
        port = snap.root / "sys/class/infiniband/mlx5_4/ports/1"
        (port / "state").write_text("1: DOWN\n")
        (port / "phys_state").write_text("2: Polling\n")
        before = len(publisher.applied)
        for _ in range(10):
            agent.cycle("udev")
        print(f"after a port goes down: {len(publisher.applied) - before} write(s) (target 1)")

        async def soak() -> int:
            stop = asyncio.Event()
            task = asyncio.create_task(agent.run(QueueSource(), stop, resync=0.05, debounce=0.5))
            await asyncio.sleep(args.soak_seconds)
            stop.set()
            await task
            return int(psutil.Process().memory_info().rss)

        cycles_before = agent.metrics.applies.labels(outcome="unchanged")._value.get()
        rss = asyncio.run(soak())
        cycles = agent.metrics.applies.labels(outcome="unchanged")._value.get() - cycles_before
        print(
            f"daemon loop RSS after {args.soak_seconds:.0f} s ({cycles:.0f} probe cycles at a "
            f"20/s resync): {rss / 2**20:.1f} MiB (target <= 80 MB after 10 minutes)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

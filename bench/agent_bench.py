#!/usr/bin/env python3
"""Agent benchmarks, each a ratio against a bare baseline measured in the same run, interleaved.

    .venv/bin/python bench/agent_bench.py [--runs 300] [--proc-runs 20] [--soak-seconds 600]
    .venv/bin/python bench/agent_bench.py --src /tmp/old-checkout   # the same bench, older code

Targets (issue 10): in-process probe of hgx-h100 <= 4 ms median; `probe --from hgx-h100.tar.gz -o
json` as a process <= 150 ms; `gpufabric-agent --help` <= 100 ms. Baselines: a bare walk that
reads the same host files with plain open()/read() and lists the same directories; `python -c
pass` for a process. Wall and CPU medians are both shown: on a shared machine wall time swings 2x
and more with the neighbours' load, CPU time and the ratios much less.
Also (issue 2): status <= 16 KiB; 0 writes across 1,000 unchanged probes, 1 after a port goes
down; RSS of the running loop <= 80 MB after 10 minutes (--soak-seconds). Issue 22: the status as
etcd stores it, managedFields included, and what 4,096 / 16,384 / 65,536 of them take.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "hosts" / "hgx-h100.tar.gz"


def _stored_curve(status: dict[str, object]) -> list[str]:
    """Issue 22: bytes etcd holds per status (managedFields included) and for the whole fleet."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fakes.stored import crd_root, per_leaf, stored_bytes

    now, before = stored_bytes(status, crd_root()), stored_bytes(status, per_leaf(crd_root()))
    lines = [f"stored per node with managedFields: {now} B (per-leaf field sets: {before} B)"]
    for nodes in (4096, 16384, 65536):
        lines.append(
            f"  {nodes:>6} nodes: {nodes * now / 1e9:.2f} GB in etcd (per-leaf"
            f" {nodes * before / 1e9:.2f} GB; default quota 2 GiB)"
        )
    return lines


def _cpu() -> float:
    """CPU seconds of this process and its finished children (steadier than wall time here)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def interleaved(
    cases: dict[str, Callable[[], object]], rounds: int, warmup: int = 5
) -> dict[str, tuple[list[float], list[float]]]:
    """(wall ms, CPU ms) per call, the cases taking turns so load swings hit all of them alike."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    gc.collect()
    for _ in range(rounds):
        for name, fn in cases.items():
            c, t = _cpu(), time.perf_counter()
            fn()
            out[name][0].append((time.perf_counter() - t) * 1000)
            out[name][1].append((_cpu() - c) * 1000)
    return out


def bare_walk(root: Path, files: list[str], dirs: list[str]) -> Callable[[], None]:
    """The least work that reads what the probe reads: open/read every file, list every dir."""
    paths = [f"{root}{p}" for p in files]
    dir_paths = [f"{root}{d}" for d in dirs]

    def walk() -> None:
        for d in dir_paths:
            os.listdir(d)
        for p in paths:
            with open(p, "rb") as fh:
                fh.read()

    return walk


def row(
    name: str,
    samples: tuple[list[float], list[float]],
    base: tuple[list[float], list[float]],
    target: str,
) -> str:
    (wall, cpu), (base_wall, base_cpu) = samples, base
    med, ref = statistics.median(wall), statistics.median(base_wall)
    cmed, cref = statistics.median(cpu), statistics.median(base_cpu)
    return (
        f"| {name} | {med:.2f} ms | {ref:.2f} ms | {med / ref:.2f}x "
        f"| {cmed:.1f} ms | {cref:.1f} ms | {cmed / cref:.2f}x | {target} |"
    )


def in_process(src: Path, runs: int) -> list[str]:
    from agent.gather import open_snapshot
    from agent.host import HostReader
    from agent.nvml import SnapshotNvml
    from agent.probe import ProbeConfig, probe_node

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        snap = open_snapshot(FIXTURE, Path(tmp))
        nvml = SnapshotNvml(snap.nvml)
        cfg = ProbeConfig()
        recorder = HostReader(snap.root, record=True)
        probe_node(recorder, nvml, cfg)
        assert recorder.recording is not None
        files = sorted(recorder.recording.files)
        dirs = sorted(recorder.recording.dirs)
        reader = HostReader(snap.root)
        cases: dict[str, Callable[[], object]] = {
            "probe": lambda: probe_node(reader, nvml, cfg),
            "bare": bare_walk(Path(snap.root), files, dirs),
        }
        try:
            from agent.gather import load

            memory = load(FIXTURE).reader()
            cases["memory"] = lambda: probe_node(memory, nvml, cfg)
        except ImportError:  # older checkouts have no in-memory snapshot
            pass
        ms = interleaved(cases, runs)
        lines.append(
            f"(hgx-h100: {len(files)} files read, {len(dirs)} directories listed; {runs} rounds)"
        )
        lines.append(row("probe in-process (host dir)", ms["probe"], ms["bare"], "<= 4 ms"))
        if "memory" in ms:
            lines.append(row("probe in-process (archive in memory)", ms["memory"], ms["bare"], ""))
    return lines


def processes(src: Path, runs: int) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    # An installed package has its bytecode compiled; a source checkout run with
    # PYTHONDONTWRITEBYTECODE recompiles every module on every start. Measure the installed case.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="gpufabric-pyc-")
    py = sys.executable
    entry = "import sys; from agent.__main__ import main; sys.exit(main())"  # = console script
    commands = {
        "pass": [py, "-c", "pass"],
        "json": [py, "-c", entry, "probe", "--from", str(FIXTURE), "-o", "json"],
        "help": [py, "-c", entry, "--help"],
    }

    def runner(cmd: list[str]) -> Callable[[], object]:
        return lambda: subprocess.run(cmd, env=env, cwd=src, stdout=subprocess.DEVNULL, check=True)

    ms = interleaved({k: runner(v) for k, v in commands.items()}, runs, warmup=2)
    return [
        f"(process wall time; baseline `python -c pass`; {runs} rounds)",
        row("`probe --from hgx-h100.tar.gz -o json`", ms["json"], ms["pass"], "<= 150 ms"),
        row("`gpufabric-agent --help`", ms["help"], ms["pass"], "<= 100 ms"),
    ]


def steady_state(soak_seconds: float) -> list[str]:
    import psutil

    from agent.assemble import Assembled, Options
    from agent.gather import open_snapshot
    from agent.host import HostReader
    from agent.nvml import SnapshotNvml
    from agent.output import canonical_json, status_object
    from agent.probe import ProbeConfig, probe_node
    from agent.publish import RecordingPublisher
    from agent.runner import Agent
    from agent.udev import QueueSource

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        snap = open_snapshot(FIXTURE, Path(tmp))
        reader = HostReader(snap.root)
        nvml = SnapshotNvml(snap.nvml)
        cfg = ProbeConfig()
        result = probe_node(reader, nvml, cfg)
        size = len(canonical_json(status_object("hgx-h100", result)).encode())
        lines.append(f"status JSON size: {size} bytes = {size / 1024:.1f} KiB (target <= 16 KiB)")
        lines.extend(_stored_curve(result.status.to_dict()))
        publisher = RecordingPublisher()

        def prober(opts: Options) -> Assembled:
            return probe_node(reader, nvml, cfg, opts)

        agent = Agent("hgx-h100", prober, publisher)
        agent.cycle("start")
        for _ in range(1000):
            agent.cycle("resync")
        lines.append(
            f"steady state: {len(publisher.applied) - 1} writes across 1,000 unchanged probes "
            "(target 0)"
        )
        port = snap.root / "sys/class/infiniband/mlx5_4/ports/1"
        (port / "state").write_text("1: DOWN\n")
        (port / "phys_state").write_text("2: Polling\n")
        before = len(publisher.applied)
        for _ in range(10):
            agent.cycle("udev")
        lines.append(
            f"after a port goes down: {len(publisher.applied) - before} write(s) (target 1)"
        )
        if soak_seconds > 0:

            async def soak() -> int:
                stop = asyncio.Event()
                task = asyncio.create_task(
                    agent.run(QueueSource(), stop, resync=0.05, debounce=0.5)
                )
                await asyncio.sleep(soak_seconds)
                stop.set()
                await task
                return int(psutil.Process().memory_info().rss)

            rss = asyncio.run(soak())
            lines.append(
                f"daemon loop RSS after {soak_seconds:.0f} s at a 20/s resync: "
                f"{rss / 2**20:.1f} MiB (target <= 80 MB after 10 minutes)"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="in-process rounds (default 300)")
    parser.add_argument("--proc-runs", type=int, default=20, help="process rounds (default 20)")
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=0.0,
        help="run the daemon loop this long for the RSS figure (default 0: skip; target 600)",
    )
    parser.add_argument(
        "--src",
        type=Path,
        default=ROOT,
        help="checkout whose agent code to measure (default: this one), for before/after",
    )
    parser.add_argument("--only", choices=["probe", "process", "steady"], help="one part only")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    print("| measurement | wall | baseline | ratio | CPU | baseline | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    lines: list[str] = []
    if args.only in (None, "probe"):
        lines += in_process(args.src, args.runs)
    if args.only in (None, "process"):
        lines += processes(args.src.resolve(), args.proc_runs)
    for line in lines:
        print(line)
    if args.only in (None, "steady"):
        for line in steady_state(args.soak_seconds):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

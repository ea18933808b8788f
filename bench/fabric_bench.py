#!/usr/bin/env python3
"""Fabric benchmark: derive network positions from a big ibnetdiscover dump; converge the labels.

    .venv/bin/python bench/fabric_bench.py [--rounds 3] [--skip-labeler]
    .venv/bin/python bench/fabric_bench.py --sizes 4096,16384,65536 [--nvl72] [--rounds 3]

1. Derive: a synthetic rail-optimized dump of 4,096 nodes x 8 rails (128 scalable units of 32,
   1,024 rail leaves, 3 tiers) printed in ibnetdiscover's own format, joined to 4,096 statuses by
   HCA GUID. Also 10,000 single-rail nodes under 916 switches (issue 8's size for "parse in
   under 2 s"). Time is the median of --rounds, wall and CPU, each round interleaved with the
   baseline: one bare `line.split()` pass over the same dump (the least any parser must do).
   Memory: tracemalloc peak of one derivation (the dump text itself excluded). Targets (issue 8):
   <= 2 s and <= 200 MB for the 4,096-node dump.
2. Labeler: 5,000 nodes with GpuNodeStatus and network positions from the same kind of dump;
   a fake Node API (server-side apply semantics, counting requests). Start: every node converges
   with <= 1 write; steady state (everything listed again, the ConfigMap re-read): 0 writes.
3. `--sizes N,N,...` (issue 22): the curve instead. Per size, a rail-optimized 3-tier dump of N
   8-GPU nodes x 8 rails (32 per scalable unit); with `--nvl72`, N GB200 trays x 4 rails instead
   (144 trays = 8 NVL72 racks per scalable unit, each rack one NVLink domain). Each round runs the
   bare line split of the same dump (as in 1.), `text.splitlines()` alone, and the derive (parse,
   join to the statuses' GUIDs, positions), interleaved; CPU is the median. Memory:
   tracemalloc peak of one derive (the dump text itself excluded). Then the GpuFabric status of
   that fabric: its JSON size (limit 256 KiB) and CPU to render it, and the longest label value.
4. `--status-change N,N,...` (issue 32): the labeler's refresh after one node's GUIDs change, the
   dump kept parsed and placed again vs parsed again, vs the bare line split; what the kept
   parse holds.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import logging
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import nvlink  # noqa: E402
from tests.fakes.fabric_dump import FatTree  # noqa: E402
from webhook.fabric import render  # noqa: E402
from webhook.fabric.levels import Positions  # noqa: E402
from webhook.fabric.nvdomains import nvlink_view  # noqa: E402
from webhook.fabric.sources import join  # noqa: E402
from webhook.fabric.sources.formats import derive  # noqa: E402


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def _split_words(text: str) -> int:
    """Issue 8's "bare line split": what any parser of the lines must do (the baseline)."""
    return sum(len(line.split()) for line in text.splitlines())


def _cpu_medians(fns: list[Callable[[], object]], rounds: int) -> list[float]:
    """Each function's median CPU over `rounds`, run interleaved, every other round reversed."""
    times: list[list[float]] = [[] for _ in fns]
    steps = list(zip(fns, times, strict=True))
    for r in range(rounds):
        for fn, into in steps if r % 2 == 0 else steps[::-1]:
            into.append(_timed(fn)[1])
    return [statistics.median(t) for t in times]


def bench_derive(name: str, tree: FatTree, rounds: int) -> None:
    text, statuses = tree.render()
    nodes = join.from_statuses(statuses.items())

    def run() -> Positions:
        return Positions(derive(text, "ibnetdiscover", nodes))

    def baseline() -> int:
        return _split_words(text)

    ours, base = [], []
    for _ in range(rounds):
        base.append(_timed(baseline))
        ours.append(_timed(run))
    pos = run()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    wall = statistics.median(w for w, _ in ours)
    cpu = statistics.median(c for _, c in ours)
    bwall = statistics.median(w for w, _ in base)
    switches = sum(1 for line in text.splitlines() if line.startswith("Switch"))
    print(
        f"{name}: {len(statuses)} nodes, {switches} switches, {len(text) / 2**20:.1f} MiB dump, "
        f"{len(pos.fabric.leaves)} leaf domains, tiers {pos.fabric.tiers}"
    )
    print(
        f"  derive: wall {wall:.2f} s (cpu {cpu:.2f} s), baseline line-split {bwall:.2f} s, "
        f"ratio {wall / bwall:.1f}x; peak memory {peak:.0f} MiB (+ the dump text "
        f"{len(text) / 2**20:.0f} MiB)"
    )


def _curve_tree(size: int, nvl72: bool) -> FatTree:
    if nvl72:  # 144 trays (8 racks of 18) per scalable unit, 4 rails
        return FatTree(-(-size // 144), 144, rails=4, spines=16, tiers=3, pod_size=4)
    return FatTree(-(-size // 32), 32, rails=8, spines=16, tiers=3, pod_size=4)


def _rack_domains(names: list[str]) -> dict[str, nvlink.Domain]:
    """Node `su<k>-n<i>` of an NVL72 tree -> its rack's NVLink domain (18 trays a rack)."""
    out = {}
    for name in names:
        su, n = name.split("-n")
        out[name] = nvlink.Domain(f"{su}-rack{(int(n) - 1) // 18}.1")
    return out


def bench_curve(size: int, nvl72: bool, rounds: int) -> str:
    """One row of the curve (see the module doc)."""
    tree = _curve_tree(size, nvl72)
    text, statuses = tree.render()
    nodes = join.from_statuses(statuses.items())
    del statuses
    names = list(nodes)[:size]
    nodes = {n: nodes[n] for n in names}

    def run() -> Positions:
        return Positions(derive(text, "ibnetdiscover", nodes))

    def lines() -> int:  # the lines alone
        return sum(1 for _line in text.splitlines())

    bcpu, lcpu, cpu = _cpu_medians([lambda: _split_words(text), lines, run], rounds)
    pos = run()
    gc.collect()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    view = nvlink_view(_rack_domains(names) if nvl72 else {}, pos)
    started = time.process_time()
    body = render.status(pos.fabric, pos, view)
    render_cpu = time.process_time() - started
    size_kib = len(json.dumps(body, separators=(",", ":"))) / 1024
    longest = max(len(v) for labels in pos.placed.values() for v in labels.values())
    kind = "NVL72 trays x 4 rails" if nvl72 else "8-GPU nodes x 8 rails"
    return (
        f"| {len(pos.placed):,} {kind} | {len(text) / 2**20:.0f} MiB | {cpu:.2f} s "
        f"| {cpu / bcpu:.2f}x ({bcpu:.2f} s) | {cpu / lcpu:.1f}x ({lcpu:.2f} s) | {peak:.0f} MiB "
        f"| {size_kib:.1f} KiB ({render_cpu * 1000:.0f} ms) | {longest} |"
    )


CURVE_HEADER = (
    "| size | dump | derive CPU | vs bare line split (`line.split()`) | vs `splitlines()` alone "
    "| derive peak memory | GpuFabric status (render CPU) | longest label value |\n"
    "|---|---|---|---|---|---|---|---|"
)


def _realistic(golden: dict[str, Any], synthetic: dict[str, Any]) -> dict[str, Any]:
    """The HGX H100 golden status with its compute HCAs' GUIDs replaced by the synthetic ones."""
    status = copy.deepcopy(golden)
    guids = iter(h["nodeGuid"] for h in synthetic["hcas"])
    for hca in status["hcas"]:
        if hca.get("computeFabric"):
            hca["nodeGuid"] = next(guids, "")
            for port in hca.get("ports") or []:
                port["guid"] = ""
    return status


def bench_labeler(n: int) -> None:
    from tests.webhook.helpers import golden_statuses
    from tests.webhook.node_fakes import NodeServer
    from webhook.fabric.controller import FabricController
    from webhook.labeler.nodes import Labeler

    golden = dict(golden_statuses())["hgx-h100"]
    tree = FatTree(n // 40, 40, rails=8, spines=16, tiers=3, pod_size=4)
    text, synthetic = tree.render()
    statuses = {name: _realistic(golden, st) for name, st in synthetic.items()}
    objs = [{"metadata": {"name": name}, "status": st} for name, st in statuses.items()]
    server = NodeServer({name: {"kubernetes.io/hostname": name} for name in statuses})
    fabric = FabricController()
    fabric.configmap({"ibnetdiscover": text})
    fabric.statuses(list(statuses.items()))
    fabric.refresh()
    labeler = Labeler(server, extra=fabric.labels_for_node)
    labeler.statuses_listed(objs)
    labeler.nodes_listed(server.list_objects())
    labeler.drain()
    start = len(server.requests)
    per_node: dict[str, int] = {}
    for name, _ in server.requests:
        per_node[name] = per_node.get(name, 0) + 1
    labeled = sum(1 for name in statuses if "gpufabric.io/leaf" in server.nodes[name].labels)
    # Steady state: the same statuses and nodes listed again, the same ConfigMap read again.
    fabric.configmap({"ibnetdiscover": text})
    changed, _ = fabric.refresh()
    if changed:
        labeler.resync_all()
    labeler.statuses_listed(objs)
    labeler.nodes_listed(server.list_objects())
    labeler.drain()
    steady = len(server.requests) - start
    most = max(per_node.values(), default=0)
    print(
        f"labeler: {len(statuses)} nodes, {labeled} with network labels; start {start} writes "
        f"(at most {most} per node), steady state {steady} writes"
    )


def bench_status_change(size: int, rounds: int) -> str:
    """The labeler's refresh after one node's GUIDs change (`--status-change`): its dump parsed
    once and placed again, vs parsed again (what it did before issue 32), vs the bare line split
    of the same dump; CPU medians of interleaved rounds. The source is given as the labeler gets
    it, ConfigMap parts (gzip); memory: what the kept parse holds (tracemalloc, after a place)."""
    from webhook.fabric.controller import FabricController
    from webhook.fabric.sources import parts, split
    from webhook.fabric.sources.formats import parse, place

    text, statuses = _curve_tree(size, False).render()
    statuses = {n: statuses[n] for n in list(statuses)[:size]}
    made = split.split([text.encode()], "ibnetdiscover")
    items = list(split.configmaps(made, "gpufabric-system"))
    c = FabricController()
    c.configmaps("labelled", items)
    c.statuses(list(statuses.items()))
    first = _timed(c.refresh)[1]
    victim = next(iter(statuses))
    present = [True]

    def again() -> object:  # one node leaves or comes back: its GUIDs change
        present[0] = not present[0]
        c.status(victim, statuses[victim] if present[0] else None)
        return c.refresh()

    def reparsed() -> object:  # the same, with the parse thrown away first (the old way)
        c._parsed = None  # the bench measures the old way through the new code
        return again()

    bcpu, cpu, ocpu = _cpu_medians([lambda: _split_words(text), again, reparsed], rounds)
    source = parts.assemble(p for o in items if (p := parts.part_of(o)) is not None)
    assert source is not None
    gc.collect()
    tracemalloc.start()
    kept = parse(parts.text_chunks(source), source.key)
    place(kept, join.from_statuses(statuses.items()))
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    return (
        f"| {size:,} | {len(made.values)} parts | {first:.2f} s | {cpu:.2f} s, **{cpu / bcpu:.2f}x** "
        f"| {ocpu:.2f} s, {ocpu / bcpu:.2f}x | {bcpu:.2f} s | {held:.0f} MiB |"
    )


STATUS_CHANGE_HEADER = (
    "| nodes x 8 rails | source | first derive CPU | after a GUID change, parsed once (vs split) "
    "| parsed again (vs split) | bare `line.split()` | the kept parse holds |\n"
    "|---|---|---|---|---|---|---|"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-labeler", action="store_true")
    parser.add_argument("--sizes", default="", help="the curve at these node counts: 4096,16384")
    parser.add_argument("--nvl72", action="store_true", help="the curve on GB200 NVL72 trays")
    parser.add_argument(
        "--status-change",
        default="",
        metavar="N,N",
        help="the labeler's refresh after one node's GUIDs change, at these node counts",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.status_change:
        print(STATUS_CHANGE_HEADER)
        for size in (int(x) for x in args.status_change.split(",")):
            print(bench_status_change(size, args.rounds), flush=True)
        return 0
    if args.sizes:
        print(CURVE_HEADER)
        for size in (int(x) for x in args.sizes.split(",")):
            print(bench_curve(size, args.nvl72, args.rounds), flush=True)
        return 0
    bench_derive(
        "rail-optimized", FatTree(128, 32, rails=8, spines=16, tiers=3, pod_size=4), args.rounds
    )
    bench_derive(
        "single-rail", FatTree(500, 20, rails=1, spines=8, tiers=3, pod_size=10), args.rounds
    )
    if not args.skip_labeler:
        bench_labeler(5000)
    return 0


if __name__ == "__main__":
    sys.exit(main())

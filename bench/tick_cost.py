"""The placer's extension ticks at scale: what one costs when nothing changed, and after a Pod list.

    .venv/bin/python bench/tick_cost.py [--nodes 65536] [--size 8] [--ticks 20]

A tree fabric of N 8-GPU nodes (bench/group_workload.py) filled with groups of `--size`
whole-node members, each a native gang (its PodGroup in the book, PodGroups served), two ways:
every group bound (a cluster at rest), and half of them ungated but not yet bound (kube-scheduler
behind: each still followed by the gang and partly-bound extensions). The ticks run as in the
cluster (TICK_EVERY apart on the placer's clock), timed in CPU (thread_time), interleaved tick by
tick with a baseline on the same placer: every group marked changed before the tick, which is the
work a tick did before it looked only at what changed (every followed group at each tick, every
group and PodGroup each 10 s). Also the first tick after the Pod list, which looks at everything
once (the groups a previous leader ungated).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from group_perf import NullApi, pod
from group_workload import FABRICS, node_objs

from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.gang.podgroups import pod_group
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import TICK_EVERY, Placer


class GangApi(NullApi):
    """The PodGroups' writes too (none is made in this bench: each is in the book already)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def members(names: list[str], groups: int, size: int, unbound: int) -> Iterator[dict[str, Any]]:
    """`groups` gangs of `size`; the last `unbound` ungated by the placer, not bound yet."""
    for g in range(groups):
        for m in range(size):
            node = names[g * size + m] if g < groups - unbound else ""
            obj = pod(f"g{g}-{m}", 8, node, group=f"g{g}", size=size)
            obj["spec"].pop("schedulingGates", None)
            obj["spec"]["schedulingGroup"] = {"podGroupName": f"gpufabric-g{g}"}
            obj["metadata"]["annotations"]["gpufabric.io/placement"] = "leaf=x"
            yield obj


def world(nodes: int, size: int, unbound_share: float) -> tuple[Placer, list[float]]:
    clock = [0.0]
    gang = NativeGang(GangApi())
    placer = Placer(
        NullApi(), clock=lambda: clock[0], tick_every=TICK_EVERY, extensions=Extensions(gang=gang)
    )
    shape = FABRICS["tree"]
    placer.nodes_listed(node_objs(nodes, shape.sizes, shape.gpus))
    names = sorted(placer.view.nodes)
    groups = nodes // size
    books = []
    for g in range(groups):
        body = pod_group("bench", f"gpufabric-g{g}", f"g{g}", size, None, "v1alpha2")
        body["metadata"]["uid"] = f"pg-{g}"
        books.append(body)
    gang.book.listed(books)
    placer.pods_listed(members(names, groups, size, int(groups * unbound_share)))
    return placer, clock


def tick(placer: Placer, clock: list[float], everything: bool) -> float:
    clock[0] += TICK_EVERY
    if everything:  # the baseline: every group looked at, as before
        placer.changed.update(placer.groups)
        placer.ext.gang.full = True
    c = time.thread_time()
    placer.reconcile()
    return time.thread_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=65536)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=20)
    args = ap.parse_args()
    for label, share in (("every group bound", 0.0), ("half ungated, not bound", 0.5)):
        t = time.monotonic()
        placer, clock = world(args.nodes, args.size, share)
        built = time.monotonic() - t
        first = tick(placer, clock, everything=False)
        now, before = [], []
        for i in range(2 * args.ticks):
            (before if i % 2 else now).append(tick(placer, clock, everything=bool(i % 2)))
        ms_now, ms_before = 1000 * statistics.median(now), 1000 * statistics.median(before)
        print(
            f"{args.nodes:,} nodes, {len(placer.groups):,} groups of {args.size} ({label}; built "
            f"in {built:.1f} s): first tick after the Pod list {1000 * first:.1f} ms; a tick with "
            f"nothing changed (median of {len(now)}) {ms_now:.3f} ms, every group looked at "
            f"(interleaved) {ms_before:.1f} ms ({ms_before / max(ms_now, 1e-6):.0f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()

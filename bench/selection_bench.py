#!/usr/bin/env python3
"""The first review of a pod with a new node-constraint shape (its own nodeSelector / required node
affinity, judged on Node labels: webhook/fleet/selection.py), over the scale curve (issue 22).

    .venv/bin/python bench/selection_bench.py                    # 4,096 / 16,384 / 65,536 nodes
    .venv/bin/python bench/selection_bench.py --sizes 4096 --fleet alike   # a quick look
    .venv/bin/python bench/selection_bench.py --src ../main      # the same on another checkout

In process (one core): a FabricCache filled as serve fills it (bench/webhook_servers.py's fleet,
the statuses, and Node labels as GPU nodes carry them plus the labeler's network position: leaf of
32, spine of 512, two zones, two instance types), then the bench's fabric pod with each of 20
shapes of its own (In, NotIn, Exists, DoesNotExist, Gt, Lt, hostname, matchFields, several terms,
a nodeSelector). Each is reviewed once (a new shape: its selection is built) and again (kept).
The baseline, of the same size in the same run, right before each review: one pass building a
dict of the nodes (name -> layout), the least any per-node pass costs. Then the shapes round-robin
past the 16 kept ones, three times over (every review a new shape again). The label index's
memory: tracemalloc over the LabelStore alone, filled with every Node's labels, with the index of
every key the 20 shapes ask of built.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import webhook_servers
from webhook_bench import realistic_pod, review

ZONE, ITYPE = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"


def labels(n: int) -> dict[str, dict[str, str]]:
    out = webhook_servers.node_labels(n)
    for i, own in enumerate(out.values()):
        own["gpufabric.io/leaf"] = f"s{i // 512:03d}.l{i // 32:04d}"
        own["gpufabric.io/spine"] = f"s{i // 512:03d}"
        own["example.com/rack"] = str(i // 16)
    return out


def _in(key: str, *values: str, op: str = "In") -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def t(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(exprs)}


def shapes() -> list[tuple[dict[str, str] | None, list[dict[str, Any]] | None]]:
    """(nodeSelector, nodeSelectorTerms) pairs, all different."""
    return [
        (None, [t(_in(ZONE, "zone-a"))]),
        (None, [t(_in(ZONE, "zone-a")), t(_in(ITYPE, "gpu-4x"))]),
        (None, [t(_in(ITYPE, "gpu-4x", op="NotIn"))]),
        (None, [t(_in("gpufabric.io/leaf", "s000.l0001", "s001.l0020", "s002.l0070"))]),
        (None, [t(_in("gpufabric.io/spine", "s000", op="NotIn"), _in(ZONE, "zone-b"))]),
        (None, [t({"key": "nvidia.com/gpu.present", "operator": "Exists"})]),
        (None, [t({"key": "example.com/spot", "operator": "DoesNotExist"})]),
        (None, [t(_in("example.com/rack", "100", op="Gt"))]),
        (None, [t(_in("example.com/rack", "40", op="Lt"), _in(ZONE, "zone-a"))]),
        (None, [t(_in("nvidia.com/gpu.memory", "40000", op="Gt"))]),
        (None, [t(_in("kubernetes.io/hostname", "gpu-node-00007", "gpu-node-00100"))]),
        (None, [t(_in("kubernetes.io/hostname", "gpu-node-00007", op="NotIn"))]),
        (None, [{"matchFields": [_in("metadata.name", "gpu-node-00003", op="NotIn")]}]),
        (None, [t(_in(ZONE, "zone-a"), _in("gpufabric.io/rdma-ports", "6", op="Gt"))]),
        ({"node.kubernetes.io/instance-type": "gpu-8x"}, None),
        ({ZONE: "zone-b", "kubernetes.io/arch": "amd64"}, None),
        ({ZONE: "zone-a"}, [t(_in("gpufabric.io/spine", "s001", "s002"))]),
        (None, [t(_in("example.com/rack", "7", op="Gt"), _in("example.com/rack", "90", op="Lt"))]),
        (None, [t(_in("kubernetes.io/os", "linux")), t(_in(ZONE, "zone-c"))]),
        (None, [t(_in("feature.node.kubernetes.io/pci-10de.present", "true"))]),
    ]


def body(selector: Any, terms: Any, i: int) -> bytes:
    pod = copy.deepcopy(realistic_pod())
    spec = pod["spec"]
    del spec["affinity"]
    if selector:
        spec["nodeSelector"] = selector
    if terms is not None:
        required = {"nodeSelectorTerms": terms}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}  # fmt: skip
    return review(i, pod)


def index_memory(n: int) -> tuple[float, float]:
    """MiB the LabelStore keeps for n Nodes' labels, and its peak while filling."""
    from webhook.fleet.selection import LabelStore

    known = labels(n)
    gc.collect()
    tracemalloc.start()
    store = LabelStore()
    for name, own in known.items():
        store.put(name, own)
    if hasattr(store, "postings"):  # the index of each key the shapes ask of (not on the old code)
        for selector, terms in shapes():
            exprs = [e for term in terms or () for e in term.get("matchExpressions", ())]
            for key in [*(selector or ()), *(e["key"] for e in exprs)]:
                store.postings(key)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del store
    return kept / 2**20, peak / 2**20


def measure(n: int, shape: str, rounds: int) -> dict[str, Any]:
    from webhook.admission import review as rv
    from webhook.admission.admit import admit
    from webhook.admission.placement import Settings
    from webhook.fleet.cache import FabricCache

    cache = FabricCache()
    cache.replace_nodes(webhook_servers.fleet(n, shape))
    cache.replace_claims([])
    known = labels(n)
    cache.replace_existing_nodes(list(known), known)
    del known
    settings = Settings()
    all_shapes = shapes()
    bodies = [body(s, t, i) for i, (s, t) in enumerate(all_shapes)]

    def baseline() -> float:
        t0 = time.perf_counter()
        _ = {name: record.layout for name, record in cache.nodes.items()}
        return time.perf_counter() - t0

    def one(b: bytes) -> float:
        request = rv.parse(b)
        t0 = time.perf_counter()
        answer = admit(request, cache, settings, owned=True)
        took = time.perf_counter() - t0
        assert answer.outcome in ("mutated", "warned"), answer
        return took

    firsts, ratios, kept = [], [], []
    admit(rv.parse(review(0, realistic_pod())), cache, settings)  # warm: views of the pod
    for b in bodies:
        base = baseline()
        first = one(b)
        firsts.append(first)
        ratios.append(first / base)
        kept.append(one(b))
    cycle, cycle_ratios = [], []
    extra = len(bodies) - 16  # past the kept shapes: every review builds its selection again
    for _ in range(rounds):
        for b in bodies:
            base = baseline()
            took = one(b)
            cycle.append(took)
            cycle_ratios.append(took / base)
    ms = 1e3
    return {
        "first": statistics.median(firsts) * ms,
        "first_max": max(firsts) * ms,
        "ratio": statistics.median(ratios),
        "ratio_max": max(ratios),
        "kept": statistics.median(kept) * ms,
        "cycle": statistics.median(cycle) * ms,
        "cycle_max": max(cycle) * ms,
        "cycle_ratio": statistics.median(cycle_ratios),
        "base": statistics.median(baseline() for _ in range(5)) * ms,
        "layouts": len(cache.groups()),
        "extra": extra,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[4096, 16384, 65536],
        help="node counts (default 4096,16384,65536)",
    )
    parser.add_argument(
        "--fleet",
        choices=["alike", "distinct", "both"],
        default="both",
        help="statuses: alike (~40 layouts) or distinct (a layout per node) (default both)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="round-robin passes (default 3)")
    parser.add_argument("--src", type=Path, help="another checkout to measure (its webhook/)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve() if args.src else webhook_servers.ROOT))
    fleets = ["alike", "distinct"] if args.fleet == "both" else [args.fleet]
    print(
        "| nodes | fleet | layouts | first review of a new shape ms: median (max) | vs one dict "
        "pass over the nodes: median (max) | same shape again ms | 20 shapes round-robin past "
        "16 kept ms: median (max), vs dict pass | dict pass ms | label index MiB (peak) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        kept, peak = index_memory(n)
        for shape in fleets:
            m = measure(n, shape, args.rounds)
            print(
                f"| {n:,} | {shape} | {m['layouts']:,} | {m['first']:.1f} ({m['first_max']:.1f})"
                f" | {m['ratio']:.1f}x ({m['ratio_max']:.1f}x) | {m['kept']:.2f}"
                f" | {m['cycle']:.1f} ({m['cycle_max']:.1f}), {m['cycle_ratio']:.1f}x"
                f" | {m['base']:.1f} | {kept:.1f} ({peak:.1f}) |",
                flush=True,
            )
            gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())

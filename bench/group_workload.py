"""The clusters and jobs the group benchmarks simulate (group_sim.py's docstring gives the model):
fabric shapes and their Node objects, the job stream (sizes and shares, Poisson arrivals,
durations from the Microsoft ITP trace) and the level the rule asks for a job of N nodes.
"""

from __future__ import annotations

import csv
import gzip
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.groups.decision.capacity import CapacityView  # noqa: E402
from webhook.groups.model.names import level_key  # noqa: E402
from webhook.groups.model.selector import selector_of  # noqa: E402

TRACE = ROOT.parent / "shared" / "reference" / "traces" / "microsoft-itp-2021.csv.gz"
if not TRACE.exists():
    TRACE = Path("/work/shared/reference/traces/microsoft-itp-2021.csv.gz")
GPUS = 8
SIZES = (1, 2, 4, 8, 16, 32)
SHARES = (0.40, 0.20, 0.15, 0.12, 0.08, 0.05)
MAX_DURATION = 7 * 86400
NVLINK = "nvlink-domain"  # the level below leaf where nodes share a multi-node NVLink domain


@dataclass(frozen=True, slots=True)
class Shape:
    nodes: int
    gpus: int  # per node; every job runs one pod of this many GPUs per node
    sizes: dict[str, int]  # nodes per domain, by level name (labels gpufabric.io/<level>)

    @property
    def ring_level(self) -> str:
        """Where ring crossings are counted: NVLink domains where there are, else leaves."""
        return NVLINK if NVLINK in self.sizes else "leaf"


_NETWORK = ("leaf", "leaf-pair", "leaf-quad", "spine")
FABRICS = {
    "tree": Shape(1024, GPUS, dict(zip(_NETWORK, (4, 8, 16, 128), strict=True))),
    "rail": Shape(1024, GPUS, dict(zip(_NETWORK, (32, 64, 128, 512), strict=True))),
    # GB200 NVL72: 64 racks of 18 trays x 4 GPUs, 8 racks (a 576-GPU scalable unit) per rail leaf
    "nvl72": Shape(
        1152, 4, {NVLINK: 18, **dict(zip(_NETWORK, (144, 288, 576, 1152), strict=True))}
    ),
}
ANY = selector_of({})


def node_objs(
    n: int, sizes: dict[str, int], gpus: int = GPUS, shuffle: bool = False
) -> list[dict[str, Any]]:
    """`shuffle`: node names that do not follow the leaves (as on the cluster of issue 25)."""
    names = list(range(n))
    if shuffle:
        random.Random(n).shuffle(names)
    out = []
    for i in range(n):
        labels = {level_key(lv): f"{lv}-{i // s}" for lv, s in sizes.items()}
        out.append(
            {
                "metadata": {"name": f"n{names[i]:05d}", "labels": labels},
                "spec": {},
                "status": {
                    "allocatable": {"nvidia.com/gpu": str(gpus)},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


def trace_durations() -> list[int]:
    with gzip.open(TRACE, "rt") as f:
        return sorted(
            min(int(r["duration_s"]), MAX_DURATION)
            for r in csv.DictReader(f)
            if int(r["gpus"]) >= GPUS
        )


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    arrival: float
    nodes: int
    duration: float


def job_stream(
    n: int, seed: int, total_gpus: int, load: float = 0.85, gpus: int = GPUS
) -> list[Job]:
    rng = random.Random(seed)
    durations = trace_durations()
    mean_gpu_s = sum(s * gpus * p for s, p in zip(SIZES, SHARES, strict=True)) * statistics.fmean(
        durations
    )
    rate = load * total_gpus / mean_gpu_s  # jobs per second
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        size = rng.choices(SIZES, SHARES)[0]
        out.append(Job(i, t, size, float(rng.choice(durations))))
    return out


def rule_level(view: CapacityView, nodes: int) -> str:
    """The level the rule asks for: the smallest whose domains hold the job when empty."""
    levels = view.levels()
    for level in levels:
        if max((len(ns) for _, ns in view.index()[level]), default=0) >= nodes:
            return level
    return levels[-1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(q * len(s)) - 1)]

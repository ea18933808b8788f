#!/usr/bin/env python3
"""kube-scheduler 1.36's gang handling alone: how soon a gated gang is bound after its gates go,
for orders of the writes that lift them.

    .venv/bin/python bench/ungate_bench.py [--sizes 8,32] [--rounds 2]

One real control plane serving PodGroups (bench/realcluster.py; 128 8-GPU nodes labelled by
gpufabric's labeler), no gpufabric in the way of the pods: each gang's pods are created by this script with a scheduling
gate of its own (`bench.gpufabric.io/hold`), `spec.schedulingGroup` naming the gang's PodGroup
(`gang.minCount` = its size) and required node affinity to one leaf-quad, as the placer pins a
gang. Once every pod exists (and 1 s has passed), the gates are lifted, 16 patches at a time:
- `concurrent`: the PodGroup made first (as DESIGN has it), every gate lifted at once;
- `sequential`: the same, one patch after another;
- `all-but-last`: the same, the last gate 0.3 s after the others;
- `podgroup-last`: every gate lifted first, the PodGroup made after (the order DESIGN rules
  out: members wait at PreEnqueue for their PodGroup, and its add requeues all of them at once);
- `ungated`: created without a gate, the PodGroup first (kube-scheduler's own gang).
Printed per gang: the seconds the gate writes took, and the first and last bind after the first
gate went (`ungated`: after the last pod was created).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realcluster
from kubernetes import client, watch

from tests.e2e.pods import gpu_container  # realcluster put the repository on the path

NS = "ungate"
HOLD = "bench.gpufabric.io/hold"
ROOT = Path(__file__).resolve().parent.parent
WAYS = ("concurrent", "sequential", "all-but-last", "podgroup-last", "ungated")


def pod_body(name: str, group: str, gated: bool) -> dict[str, Any]:
    term = {"key": "gpufabric.io/leaf-quad", "operator": "In", "values": ["spine1.leaf12"]}
    spec: dict[str, Any] = {
        "containers": [gpu_container(8)],
        "terminationGracePeriodSeconds": 0,
        "schedulingGroup": {"podGroupName": group},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        },
    }
    if gated:
        spec["schedulingGates"] = [{"name": HOLD}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def podgroup_body(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
    }


class Binds:
    """When each pod of the namespace was first seen bound."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api, self.at, self.lock = api, dict[str, float](), threading.Lock()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        core = client.CoreV1Api(self.api)
        while True:
            try:
                for ev in watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=60):
                    p = ev["object"]
                    if p.spec.node_name:
                        with self.lock:
                            self.at.setdefault(p.metadata.name, time.monotonic())
            except Exception:  # noqa: BLE001 - a dropped watch is started again
                time.sleep(0.1)

    def of(self, names: list[str]) -> list[float]:
        with self.lock:
            return [self.at[n] for n in names if n in self.at]


def one(
    core: client.CoreV1Api,
    objects: client.CustomObjectsApi,
    binds: Binds,
    pool: ThreadPoolExecutor,
    group: str,
    size: int,
    way: str,
) -> str:
    names = [f"{group}-{i}" for i in range(size)]

    def make_podgroup() -> None:
        objects.create_namespaced_custom_object(
            "scheduling.k8s.io", "v1alpha2", NS, "podgroups", podgroup_body(group, size)
        )

    def lift(name: str) -> None:
        ops = [{"op": "remove", "path": "/spec/schedulingGates"}]
        core.patch_namespaced_pod(
            name, NS, ops, _content_type="application/json-patch+json", _preload_content=False
        )

    if way != "podgroup-last":
        make_podgroup()
    list(
        pool.map(
            lambda n: core.create_namespaced_pod(NS, pod_body(n, group, way != "ungated")), names
        )
    )
    t0 = time.monotonic()
    if way != "ungated":
        time.sleep(1.0)
        t0 = time.monotonic()
        if way in ("concurrent", "podgroup-last"):
            list(pool.map(lift, names))
        elif way == "sequential":
            for n in names:
                lift(n)
        else:
            list(pool.map(lift, names[:-1]))
            time.sleep(0.3)
            lift(names[-1])
    writes = time.monotonic() - t0
    if way == "podgroup-last":
        make_podgroup()
    end = time.monotonic() + 30
    while time.monotonic() < end and len(binds.of(names)) < size:
        time.sleep(0.02)
    got = [t - t0 for t in binds.of(names)]
    span = f"first {min(got):.2f} last {max(got):.2f} s" if got else "none"
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    while core.list_namespaced_pod(NS, limit=1).items:
        time.sleep(0.1)
    objects.delete_collection_namespaced_custom_object(
        "scheduling.k8s.io", "v1alpha2", NS, "podgroups"
    )
    time.sleep(0.5)
    return f"{size:3} {way:14} gate writes {writes:.2f} s, bound {len(got)}/{size}: {span}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ways", default=",".join(WAYS))
    args = ap.parse_args()
    made = realcluster.up(served=True, webhook=ROOT / ".venv" / "bin" / "gpufabric-webhook")
    try:
        api = made.cluster.client()
        api.configuration.connection_pool_maxsize = 16
        core, objects = client.CoreV1Api(api), client.CustomObjectsApi(api)
        made.cluster.kubectl("create", "namespace", NS)
        binds = Binds(api)
        k = 0
        with ThreadPoolExecutor(16) as pool:
            for _ in range(args.rounds):
                for size in (int(s) for s in args.sizes.split(",")):
                    for way in args.ways.split(","):
                        k += 1
                        print(one(core, objects, binds, pool, f"g{k}", size, way), flush=True)
    finally:
        realcluster.down(made)


if __name__ == "__main__":
    main()

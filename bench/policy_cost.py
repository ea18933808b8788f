#!/usr/bin/env python3
"""What the placer's admission policies cost kube-apiserver for each write, one write at a time.

    .venv/bin/python bench/policy_cost.py [--writes 60] [--rounds 2]

One Kubernetes 1.36.2 control plane (bench/realcluster.py, gpufabric installed as the end-to-end
tier installs it), pods made gated by the admin, then the two writes the placer makes for a native
gang's member, each `--writes` times in turn, as the admin (the policies' matchCondition says no:
only their match and its object conversion run) and with the placer's own ServiceAccount token
(ValidatingAdmissionPolicies gpufabric-placer-pods and gpufabric-placer-pod-status evaluate every
validation): the ungating JSONPatch (the group gate removed, gpufabric.io/placement written) and
the nomination (merge patch of pods/status). Prints the mean time of each as the API server saw it
(apiserver_request_duration_seconds) and as this client waited. Rounds alternate the order.

Quiet machine (2 cores), 60 writes each, 2 rounds: ungating PATCH 2.81 / 3.79 ms as the admin,
3.75 / 3.28 ms as the placer; nomination 2.46 / 3.45 ms as the admin, 3.56 / 3.06 ms as the placer:
the order moves it more than the policies do (at most ~1 ms a write). A write costs the API server
3-4 ms on a quiet plane whoever makes it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realcluster
from bind_report import api_metrics, request_counts, request_seconds
from kubernetes import client

from tests.e2e.install import NAMESPACE  # realcluster put the repository on the path
from tests.e2e.pods import gpu_container
from webhook.kube.client import let_go

NS = "policy-cost"
UNGATE: list[dict[str, Any]] = [
    {"op": "remove", "path": "/spec/schedulingGates/0"},
    {"op": "add", "path": "/metadata/annotations", "value": {"gpufabric.io/placement": "leaf=x"}},
]


def _metrics(admin: client.ApiClient) -> tuple[dict[str, float], dict[str, float]]:
    text = api_metrics(admin)
    return request_counts(text), request_seconds(text)


def _ungate(core: client.CoreV1Api, name: str) -> None:
    let_go(
        core.patch_namespaced_pod(
            name, NS, UNGATE, _content_type="application/json-patch+json", _preload_content=False
        )
    )


def _nominate(core: client.CoreV1Api, name: str) -> None:
    body = {"status": {"nominatedNodeName": "gpu-001"}}
    let_go(
        core.patch_namespaced_pod_status(
            name, NS, body, _content_type="application/merge-patch+json", _preload_content=False
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writes", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    n = args.writes
    made = realcluster.up(
        served=True, webhook=Path(__file__).resolve().parent.parent / ".venv/bin/gpufabric-webhook"
    )
    try:
        cluster = made.cluster
        admin = cluster.client()
        token = cluster.kubectl("create", "token", "gpufabric-webhook", "-n", NAMESPACE).strip()
        who = {"admin": client.CoreV1Api(admin), "placer": client.CoreV1Api(cluster.client(token))}
        cluster.kubectl("create", "namespace", NS)
        pods = iter(f"p{i}" for i in range(4 * n * args.rounds))
        gated: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {
                "schedulingGates": [{"name": "gpufabric.io/group"}, {"name": "bench-hold"}],
                "containers": [gpu_container(8)],
            },
        }
        writes: dict[str, Callable[[client.CoreV1Api, str], None]] = {
            "ungating PATCH": _ungate,
            "nomination": _nominate,
        }
        for r in range(args.rounds):
            order = list(who.items()) if r % 2 == 0 else list(who.items())[::-1]
            for what, write in writes.items():
                for name, core in order:
                    mine = [next(pods) for _ in range(n)]
                    for pod in mine:  # made by the admin, kept gated by bench-hold
                        body: Any = gated | {"metadata": {"name": pod}}
                        let_go(who["admin"].create_namespaced_pod(NS, body, _preload_content=False))
                    (c0, s0), started = _metrics(admin), time.perf_counter()
                    for pod in mine:
                        write(core, pod)
                    waited = (time.perf_counter() - started) / n * 1000
                    c1, s1 = _metrics(admin)
                    key = "PATCH pods" if what == "ungating PATCH" else "PATCH pods/status"
                    count = c1.get(key, 0.0) - c0.get(key, 0.0)
                    took = 1000 * (s1.get(key, 0.0) - s0.get(key, 0.0)) / max(count, 1)
                    print(
                        f"round {r} {what:15} as {name:6}: {count:.0f} writes, "
                        f"API server {took:.2f} ms each, this client {waited:.2f} ms",
                        flush=True,
                    )
    finally:
        realcluster.down(made)


if __name__ == "__main__":
    main()

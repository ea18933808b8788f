"""The real control planes of bench/bind_bench.py, set up by the end-to-end tier's harness
(tests/e2e: cluster.start, env.installed, fleet.node): gpufabric installed as the tier installs it,
`gpufabric-webhook serve --labeler --placer` running as the webhook's ServiceAccount, no kubelet
(placed = bound). What is the bench's own: the served plane's extra gate for kube-scheduler's
native gang (its topology-aware placement), 8-GPU Node objects under two spines, and keeping the
logs.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e import cluster as k8s
from tests.e2e import webhook as serve
from tests.e2e.env import installed
from tests.e2e.fleet import TOPOLOGY, node
from tests.e2e.install import NAMESPACE
from tests.e2e.waits import wait_until

# The tier's gang plane (its podgroup-protection controller lets each run's PodGroups go), plus
# what the native gang the bench compares with needs: its `schedulingConstraints.topology`.
SERVED = replace(k8s.GANG, gates=(*k8s.GANG.gates, "TopologyAwareWorkloadScheduling"))


def topology(spines: int, leaves: int, per_leaf: int) -> str:
    """A static map (nodes.yaml): `spines` x `leaves` leaves of `per_leaf` nodes gpu-001..."""
    out: dict[str, Any] = {"spines": []}
    n = 0
    for s in range(spines):
        rows = []
        for leaf in range(leaves):
            names = [f"gpu-{n + i + 1:03d}" for i in range(per_leaf)]
            n += per_leaf
            rows.append({"name": f"leaf{s * leaves + leaf:02d}", "nodes": names})
        out["spines"].append({"name": f"spine{s}", "leaves": rows})
    return yaml.safe_dump(out)


@dataclass(frozen=True)
class Installed:
    """One control plane with gpufabric installed; `workdir` holds the webhook's log."""

    cluster: k8s.Cluster
    webhook: serve.Webhook
    workdir: Path


def up(
    served: bool,
    webhook: Path,
    nodes: int = 128,
    leaves: int = 16,
    spines: int = 2,
    sched_args: tuple[str, ...] = (),
) -> Installed:
    """A plane (PodGroups and kube-scheduler's gang on where `served`) running `webhook` (another
    checkout's build: a before/after), `nodes` 8-GPU nodes in `leaves` leaves under `spines`
    spines, every node labelled by the labeler; `sched_args`: more kube-scheduler flags (its log
    level). down() ends it."""
    tools = k8s.find_tools()
    if tools.path is None:
        raise SystemExit(tools.reason)
    flags = SERVED if served else k8s.PLAIN
    flags = replace(flags, sched_args=(*flags.sched_args, *sched_args))
    cluster = k8s.start(tools.path, flags, prefix="bind-bench-k8s-")
    workdir = Path(tempfile.mkdtemp(prefix="bind-bench-", dir="/tmp"))
    try:
        hook = installed(cluster, workdir, program=webhook)
    except BaseException:
        k8s.stop(cluster)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    made = Installed(cluster, hook, workdir)
    try:
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": TOPOLOGY, "namespace": NAMESPACE},
            "data": {"nodes.yaml": topology(spines, leaves // spines, nodes // leaves)},
        }
        items = [node(f"gpu-{i + 1:03d}", 8) for i in range(nodes)]
        body = {"apiVersion": "v1", "kind": "List", "items": [cm, *items]}
        cluster.kubectl("create", "-f", "-", stdin=json.dumps(body))
        wait_until(
            lambda: len(labelled(cluster)) >= nodes,
            120,
            f"every node labelled (see {hook.log})",
        )
    except BaseException:
        down(made)
        raise
    return made


def labelled(cluster: k8s.Cluster) -> list[str]:
    return cluster.kubectl("get", "nodes", "-l", "gpufabric.io/leaf-quad", "-o", "name").split()


def down(made: Installed, logs: Path | None = None) -> None:
    """Stop it; `logs`: keep its logs (the control plane's and the webhook's) there first, in a
    folder named after its state directory."""
    serve.stop(made.webhook)
    if logs is not None:
        keep = logs / made.cluster.state.name
        keep.mkdir(parents=True, exist_ok=True)
        for f in [*made.cluster.state.glob("*.log"), made.webhook.log]:
            shutil.copy(f, keep / f.name)
    k8s.stop(made.cluster)
    shutil.rmtree(made.workdir, ignore_errors=True)

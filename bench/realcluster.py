"""The real control planes of bench/bind_bench.py, set up by the end-to-end tier's harness
(tests/e2e: cluster.start, env.installed, fleet.node): gpufabric installed as the tier installs it,
`gpufabric-webhook serve --labeler --placer` running as the webhook's ServiceAccount, no kubelet
(placed = bound). What is the bench's own: the served plane's extra gate for kube-scheduler's
native gang (its topology-aware placement), 8-GPU Node objects under two spines, and keeping the
logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def _redundant(cluster: k8s.Cluster, seconds: float) -> set[str]:
    log = cluster.state / "sched.log"
    start = log.stat().st_size
    os.kill(int((cluster.state / "sched.pid").read_text()), signal.SIGUSR2)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        if "Dump of cached NodeInfo" in text:
            found = re.search(r"redundantPods=\[([^\]]*)\]", text)
            return set(re.findall(r'"([^"]+)"', found.group(1))) if found else set()
        time.sleep(0.1)
    return set()


def scheduler_ghosts(cluster: k8s.Cluster, seconds: float = 5.0) -> list[str]:
    """Pods kube-scheduler's cache still holds that the API server no longer has: on SIGUSR2
    it compares its cache with its informer and logs the difference ("Cache mismatch ...
    redundantPods=[uids]") and then a dump of each node's pods. kube-scheduler 1.36.2 keeps a
    gang member deleted while its binding cycle waits ("Failed to update the nominated node
    name in the binding cycle ... not found") on its node for good: its GPUs stay taken."""
    first = _redundant(cluster, seconds)
    if not first:
        return []
    time.sleep(2.0)  # a pod deleted just now may still be on its way out of the cache
    return sorted(first & _redundant(cluster, seconds))


def restart_scheduler(cluster: k8s.Cluster, seconds: float = 60.0) -> int:
    """kube-scheduler stopped and started again with the same command line (its log goes on in
    the same file); returns the new pid once its /readyz answers ok (the plane runs it without
    leader election, so it schedules as soon as its informers have synced)."""
    pid_file, log = cluster.state / "sched.pid", cluster.state / "sched.log"
    old = int(pid_file.read_text())
    argv = Path(f"/proc/{old}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
    port = next(a.split("=", 1)[1] for a in argv if a.startswith("--secure-port="))
    os.kill(old, signal.SIGTERM)
    wait_until(lambda: not Path(f"/proc/{old}").exists(), 30, "kube-scheduler stopped")
    with log.open("ab") as out:
        new = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    pid_file.write_text(f"{new.pid}\n")
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # its own in-memory cert

    def ready() -> bool:
        try:
            url = f"https://127.0.0.1:{port}/readyz"
            with urllib.request.urlopen(url, timeout=2, context=insecure) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    wait_until(ready, seconds, f"kube-scheduler ready again (see {log})")
    return new.pid

"""An installed cluster with NVIDIA's real ComputeDomain controller (../shared/tools/dra/run.sh,
root: it chroots to read its fixed /templates), the driver's CRDs and DeviceClasses, and NVL72
racks whose trays carry the ResourceSlice the compute-domain kubelet plugin publishes (one
channel-0 and one daemon-0 device a node). No kubelet plugin runs: nothing labels a node
resource.nvidia.com/computeDomain, as with IMEX run as a host service, or before a pod is
prepared."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import nvl72
from tests.e2e import install
from tests.e2e import webhook as serve
from tests.e2e.cluster import ROOT
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet

CRDS = ROOT / "tests" / "fixtures" / "schedulers" / "dra-driver-nvidia-gpu"
DRIVER = "compute-domain.nvidia.com"
CD = ("resource.nvidia.com", "v1beta1", "computedomains")
CRD_NOW = CRDS / "resource.nvidia.com_computedomains.yaml"  # v0.4.0 on: numNodes optional
CRD_V25 = CRDS / "resource.nvidia.com_computedomains-v25.8.1.yaml"  # v25.3-v25.12: required


def controller_missing(k8s_tools: Path) -> str:
    """Why NVIDIA's controller cannot run here ('' when it can)."""
    run = k8s_tools.parent / "dra" / "run.sh"
    if not run.is_file():
        return f"no NVIDIA ComputeDomain controller for the e2e tier: no {run}"
    if os.geteuid() != 0:
        return f"{run} chroots (the controller reads /templates): needs root"
    return ""


@dataclasses.dataclass(frozen=True)
class Imex:
    env: Env
    pid: int  # the controller's (run.sh started it; nothing else holds state)
    state: Path


def serve_compute_domains(env: Env, k8s_tools: Path) -> Imex:
    """The driver's CRDs and DeviceClasses applied, the controller started, and the webhook
    restarted so that its first list of ComputeDomains answers (a cluster that does not serve
    them is asked again only every minute)."""
    cluster = env.cluster
    for name in ("computedomains", "computedomaincliques"):  # the controller watches both
        name = f"resource.nvidia.com_{name}.yaml"
        cluster.kubectl("apply", "--server-side", "-f", str(CRDS / name))
    cluster.kubectl(
        "apply", "--server-side", "-f", str(k8s_tools.parent / "dra/deviceclasses.yaml")
    )
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/computedomains.resource.nvidia.com",
    )
    state = Path(tempfile.mkdtemp(prefix="imex-dra-", dir="/tmp"))
    out = subprocess.run(
        ["bash", str(k8s_tools.parent / "dra/run.sh"), str(cluster.admin_kubeconfig), str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    pid = int(out.stdout.strip().splitlines()[-1])
    serve.stop(env.webhook)
    workdir = env.workdir
    serving = install.Serving(workdir / "tls.crt", workdir / "tls.key", b"")
    hook = serve.start(cluster, serving, workdir, port=env.webhook.port)
    return Imex(dataclasses.replace(env, webhook=hook), pid, state)


def stop_controller(imex: Imex) -> None:
    with contextlib.suppress(ProcessLookupError):  # the controller keeps no other state
        os.kill(imex.pid, signal.SIGTERM)
    shutil.rmtree(imex.state, ignore_errors=True)


def racks(fleet: Fleet, count: int, trays: int) -> dict[str, list[str]]:
    """`count` racks of `trays` trays (4 GPUs each), their NVLink domain from the status the agent
    writes, each with the compute-domain plugin's ResourceSlice; NVLink domain -> trays once
    the labeler has labelled them."""
    custom = client.CustomObjectsApi(fleet.cluster.client())
    layout: dict[int, list[str]] = {}
    for rack in range(count):
        for tray in range(trays):
            name = f"{fleet.prefix}-{nvl72.tray_name(rack, tray)}"
            fleet.add_node(name, nvl72.GPUS, nvl72.tray_status(rack, tray)["status"])
            custom.create_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", slice_of(name)
            )
            layout.setdefault(rack, []).append(name)
    fleet.wait_labels(
        {n: {"gpufabric.io/nvlink-domain": nvl72.domain(r)} for r, ns in layout.items() for n in ns}
    )
    return {nvl72.domain(r): names for r, names in layout.items()}


def slice_of(node: str) -> dict[str, Any]:
    """The ResourceSlice the compute-domain kubelet plugin publishes for its node."""
    device = lambda kind: {  # noqa: E731
        "name": f"{kind}-0",
        "attributes": {"type": {"string": kind}, "id": {"int": 0}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device("channel"), device("daemon")],
        },
    }


def drop_slices(fleet: Fleet) -> None:
    custom = client.CustomObjectsApi(fleet.cluster.client())
    for node in fleet.nodes:
        try:
            custom.delete_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", f"{node}-{DRIVER}"
            )
        except ApiException as err:
            if err.status != 404:
                raise


def channels(api: client.ApiClient, namespace: str) -> tuple[list[str], int]:
    """The nodes of the channels the namespace's claims were allocated, and how many claims
    have none."""
    claims = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaims"
    )["items"]
    nodes, pending = [], 0
    for c in claims:
        allocation = (c.get("status") or {}).get("allocation")
        if not allocation:
            pending += 1
            continue
        nodes += [r["pool"] for r in allocation["devices"]["results"] if r["device"] == "channel-0"]
    return nodes, pending


def compute_domain(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
            *CD[:2], namespace, CD[2], name
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return found

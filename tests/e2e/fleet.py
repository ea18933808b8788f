"""GPU nodes on a kubelet-less control plane: Node objects (nvidia.com/gpu capacity, Ready), each
node's GpuNodeStatus written by the agent's own code (agent/kube.py KubePublisher) under the agent
ServiceAccount's token bound to that node, and the topology ConfigMap. A Fleet remembers what it
made and removes it all in cleanup(), so a test on a shared cluster leaves nothing behind."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agent.kube import KubePublisher
from tests.e2e.cluster import ROOT, Cluster
from tests.e2e.install import AGENT_ACCOUNT, NAMESPACE
from tests.e2e.waits import wait_until

TOPOLOGY = "gpufabric-topology"  # DESIGN.md: the labeler's source in the install namespace
HGX_H100 = ROOT / "tests" / "golden" / "hgx-h100.yaml"  # 8 GPUs, one NVLink island, 8 NDR HCAs


def hgx_status() -> dict[str, Any]:
    """The status the agent writes for the bundled HGX H100 sample node."""
    status: dict[str, Any] = yaml.safe_load(HGX_H100.read_text())["status"]
    return status


def node(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node as a kubelet registers it: allocatable GPUs, Ready."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "status": {
            "capacity": {
                "cpu": "64",
                "memory": "512Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "allocatable": {
                "cpu": "64",
                "memory": "512Gi",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def static_map(leaves: dict[str, list[str]]) -> str:
    """nodes.yaml of one spine domain: `leaves` in fabric order (docs/topology.md)."""
    doc = {"leaves": [{"name": leaf, "nodes": nodes} for leaf, nodes in leaves.items()]}
    return yaml.safe_dump(doc, sort_keys=False)


class Fleet:
    def __init__(self, cluster: Cluster, workdir: Path) -> None:
        self.cluster = cluster
        admin = cluster.client()
        self.core = client.CoreV1Api(admin)
        self.custom = client.CustomObjectsApi(admin)
        self.workdir = workdir
        self.nodes: list[str] = []
        self._topology = False
        self.prefix = f"n{uuid.uuid4().hex[:4]}"  # node names of this fleet alone

    def hgx_leaves(self, leaves: int, per_leaf: int) -> dict[str, list[str]]:
        """`leaves` leaf domains of `per_leaf` HGX H100 nodes (8 GPUs) in one spine, from the
        topology ConfigMap; returns leaf -> nodes in fabric order once the labeler has labelled
        them all."""
        layout = {
            f"leaf-{i}": [f"{self.prefix}-{i * per_leaf + j:02d}" for j in range(per_leaf)]
            for i in range(leaves)
        }
        status = hgx_status()
        for names in layout.values():
            for name in names:
                self.add_node(name, 8, status)
        self.set_topology(static_map(layout))
        self.wait_labels(
            {n: {"gpufabric.io/leaf": leaf} for leaf, names in layout.items() for n in names}
        )
        return layout

    def add_node(
        self,
        name: str,
        gpus: int,
        status: dict[str, Any] | None,
        labels: dict[str, str] | None = None,
    ) -> None:
        """The Node (admin, as a kubelet registers it), then its status as the agent writes it."""
        self.core.create_node(node(name, gpus, labels))
        self.nodes.append(name)
        if status is not None:
            self.publish(name, status)

    def publish(self, name: str, status: dict[str, Any]) -> None:
        """The agent's write of `name`'s status: its KubePublisher, the agent ServiceAccount's
        token bound to Node `name`, the status owned by the Node (as agent.runner passes it)."""
        token = self.cluster.token(AGENT_ACCOUNT, NAMESPACE, node=name)
        with self.cluster.client(token) as api_client:
            publisher = KubePublisher(api_client)
            publisher.apply(name, copy.deepcopy(status), owner=publisher.node_uid(name))

    def set_topology(self, nodes_yaml: str) -> None:
        """ConfigMap gpufabric-topology, key nodes.yaml, as an operator creates it."""
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=TOPOLOGY), data={"nodes.yaml": nodes_yaml}
        )
        try:
            self.core.create_namespaced_config_map(NAMESPACE, body)
        except ApiException as err:
            if err.status != 409:
                raise
            self.core.replace_namespaced_config_map(TOPOLOGY, NAMESPACE, body)
        self._topology = True

    def drop_topology(self) -> None:
        """Delete ConfigMap gpufabric-topology (if this fleet made it)."""
        if self._topology:
            try:
                self.core.delete_namespaced_config_map(TOPOLOGY, NAMESPACE)
            except ApiException as err:
                if err.status != 404:
                    raise
            self._topology = False

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.core.read_node(name).metadata.labels or {})

    def wait_labels(self, expected: dict[str, dict[str, str]], timeout: float = 60) -> None:
        """Until every node named carries (at least) its expected labels."""

        def missing() -> dict[str, dict[str, str]]:
            out = {}
            for name, want in expected.items():
                have = self.labels(name)
                wrong = {k: v for k, v in want.items() if have.get(k) != v}
                if wrong:
                    out[name] = {k: f"{have.get(k)!r} != {v!r}" for k, v in wrong.items()}
            return out

        wait_until(lambda: not missing() or None, timeout, f"node labels {missing()}")

    def cleanup(self) -> None:
        """Delete the topology ConfigMap and the nodes (their statuses with them), and wait until
        the labeler has forgotten them: the next test on this cluster starts from nothing."""
        self.drop_topology()
        for name in self.nodes:
            for delete in (
                lambda n=name: self.custom.delete_cluster_custom_object(
                    "gpufabric.io", "v1alpha1", "gpunodestatuses", n
                ),
                lambda n=name: self.core.delete_node(n),
            ):
                try:
                    delete()
                except ApiException as err:
                    if err.status != 404:
                        raise
        gone = set(self.nodes)
        wait_until(
            lambda: not gone & {n.metadata.name for n in self.core.list_node().items},
            60,
            f"nodes {sorted(gone)} deleted",
        )
        self.nodes.clear()

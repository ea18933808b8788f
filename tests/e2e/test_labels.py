"""Node labels as installed: the agent's statuses (written as the agent, bound to its node) and the
topology ConfigMap turned into gpufabric.io/* labels by the labeler running as the webhook's
ServiceAccount; and the agent's node-bound identity refused another node's status."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agent.kube import KubePublisher
from agent.publish import PublishError
from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet, hgx_status
from tests.e2e.install import AGENT_ACCOUNT, NAMESPACE


def test_labels_from_agent_statuses_and_topology_configmap(cluster_env: Env, fleet: Fleet) -> None:
    layout = fleet.hgx_leaves(leaves=3, per_leaf=2)
    expected = {}
    for i, (leaf, names) in enumerate(layout.items()):
        for name in names:
            expected[name] = {
                "gpufabric.io/gpu-count": "8",
                "gpufabric.io/nvlink-island-size": "8",
                "gpufabric.io/nvlink-bandwidth-gbps": "900",
                "gpufabric.io/rdma": "true",
                "gpufabric.io/rdma-ports": "8",
                "gpufabric.io/fabric-health": "ok",
                "gpufabric.io/leaf": leaf,
                # pairs and quads are named after their first leaf (docs/topology.md)
                "gpufabric.io/leaf-pair": f"leaf-{i & ~1}",
                "gpufabric.io/leaf-quad": "leaf-0",
                "gpufabric.io/spine": "spine",
            }
    fleet.wait_labels(expected)
    # No NVLink domain on an HGX node (no multi-node fabric in its status, no clique label).
    assert all("gpufabric.io/nvlink-domain" not in fleet.labels(n) for n in expected)
    fabric = client.CustomObjectsApi(cluster_env.admin).get_cluster_custom_object(
        "gpufabric.io", "v1alpha1", "gpufabrics", "cluster"
    )
    assert fabric["status"], "the labeler published no GpuFabric status"

    # The agent's next write (a link down: the summary says degraded) relabels that node only.
    first = next(iter(expected))
    degraded = hgx_status()
    degraded["summary"]["fabricHealth"] = "degraded"
    fleet.publish(first, degraded)
    fleet.wait_labels({first: {"gpufabric.io/fabric-health": "degraded"}})
    assert all(
        fleet.labels(n)["gpufabric.io/fabric-health"] == "ok" for n in expected if n != first
    )

    # Deleting the ConfigMap removes the network labels and keeps the others (docs/topology.md).
    fleet.drop_topology()
    network = ("leaf", "leaf-pair", "leaf-quad", "spine")
    pods.wait_for(
        lambda: all(
            not any(f"gpufabric.io/{k}" in fleet.labels(n) for k in network) for n in expected
        ),
        60,
        "network labels removed with the topology ConfigMap",
    )
    assert all(fleet.labels(n).get("gpufabric.io/gpu-count") == "8" for n in expected)


def test_agent_token_of_one_node_cannot_write_another_nodes_status(
    cluster_env: Env, fleet: Fleet
) -> None:
    status = hgx_status()
    fleet.add_node(f"{fleet.prefix}-a", 8, status)
    fleet.add_node(f"{fleet.prefix}-b", 8, None)
    token = cluster_env.cluster.token(AGENT_ACCOUNT, NAMESPACE, node=f"{fleet.prefix}-a")
    with cluster_env.cluster.client(token) as api_client:
        publisher = KubePublisher(api_client)
        other = f"{fleet.prefix}-b"
        with pytest.raises(PublishError) as refused:
            publisher.apply(other, status, owner=publisher.node_uid(other))
    assert f"may only write GpuNodeStatus {fleet.prefix}-a, not {other}" in str(refused.value)
    with pytest.raises(ApiException) as missing:
        client.CustomObjectsApi(cluster_env.admin).get_cluster_custom_object(
            "gpufabric.io", "v1alpha1", "gpunodestatuses", other
        )
    assert missing.value.status == 404

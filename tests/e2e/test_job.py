"""An Indexed Job as installed: the Job controller makes the members, each keeps its completion
index as its rank, and the group is placed whole in one domain with consecutive indexes per leaf."""

from __future__ import annotations

from kubernetes import client

from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.groupcheck import check_group

INDEX = "batch.kubernetes.io/job-completion-index"


def test_indexed_job_ranks_are_completion_indexes(cluster_env: Env, fleet: Fleet, ns: str) -> None:
    layout = fleet.hgx_leaves(leaves=4, per_leaf=2)
    size = 8  # 8 members of 4 GPUs: 4 nodes, a leaf pair
    template = {
        "metadata": {"annotations": pods.group_annotations("trainer", size)},
        "spec": {"restartPolicy": "Never", "containers": [pods.gpu_container(4)]},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trainer"},
        "spec": {
            "completionMode": "Indexed",
            "completions": size,
            "parallelism": size,
            "template": template,
        },
    }
    client.BatchV1Api(cluster_env.admin).create_namespaced_job(ns, job)
    bound = pods.wait_bound(cluster_env.core, ns, size, selector="job-name=trainer")
    for p in bound:
        assert [r.kind for r in p.metadata.owner_references] == ["Job"]
        assert p.metadata.annotations[pods.RANK] == p.metadata.annotations[INDEX], p.metadata.name
    check_group(cluster_env.core, bound, "trainer", size, "leaf-pair", layout)

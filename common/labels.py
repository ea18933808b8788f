"""Pure derivations from a status summary to node labels (the labeler and `probe -o labels`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from common import api
from common.model import Summary


def hca_profile(names: Iterable[str]) -> str:
    """Short stable hash of a set of HCA names; "none" for the empty set.

    A label value must be <= 63 chars and start with an alphanumeric; 10 hex digits keep collisions
    negligible for the handful of HCA layouts a cluster has.
    """
    unique = sorted(set(names))
    if not unique:
        return "none"
    return hashlib.sha256(",".join(unique).encode()).hexdigest()[:10]


def labels_for(summary: Summary) -> dict[str, str]:
    """The exact label set the labeler asserts for a node with this summary.

    numa-gpus-max is absent when it is 0: no GPU, or a GPU whose NUMA node is unknown (a VM's
    numa_node -1), so no same-socket requirement can be met by a guess; nvlink-domain is absent
    when the node has no multi-node NVLink domain."""
    labels = {
        api.LABEL_GPU_COUNT: str(summary.gpu_count),
        api.LABEL_NVLINK_ISLAND_SIZE: str(summary.nvlink_island_size),
        api.LABEL_NVLINK_BANDWIDTH: str(summary.nvlink_bandwidth_gbps),
        api.LABEL_NUMA_GPUS_MAX: str(summary.numa_gpus_max),
        api.LABEL_RDMA: "true" if summary.rdma else "false",
        api.LABEL_RDMA_PORTS: str(summary.rdma_ports),
        api.LABEL_HCA_PROFILE: summary.hca_profile or hca_profile(summary.usable_hcas),
        api.LABEL_CUFILE: summary.cufile,
        api.LABEL_FABRIC_HEALTH: summary.fabric_health,
    }
    if summary.numa_gpus_max <= 0:
        del labels[api.LABEL_NUMA_GPUS_MAX]
    if summary.nvlink_domain:
        labels[api.LABEL_NVLINK_DOMAIN] = summary.nvlink_domain
    return labels

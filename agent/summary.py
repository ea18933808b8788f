"""The status summary: exactly the values the node labels are made from. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from common import nvlink
from common.labels import hca_profile
from common.model import Gpu, Hca, NvLinkIsland, RdmaSupport, StorageSupport, Summary
from common.natural import natural_key


def usable_hcas(hcas: Sequence[Hca]) -> list[str]:
    """Compute-fabric HCAs that can do GPUDirect RDMA now (at least one ACTIVE port)."""
    return sorted(
        (
            h.name
            for h in hcas
            if h.compute_fabric and h.gdr_capable and any(p.state == "ACTIVE" for p in h.ports)
        ),
        key=natural_key,
    )


def summarize(
    gpus: Sequence[Gpu],
    island_list: Sequence[NvLinkIsland],
    hcas: Sequence[Hca],
    rdma: RdmaSupport,
    storage: StorageSupport,
    faults: Sequence[str],
) -> Summary:
    usable = usable_hcas(hcas)
    rdma_ports = sum(1 for h in hcas if h.name in usable for p in h.ports if p.state == "ACTIVE")
    biggest = max(island_list, key=lambda i: (len(i.gpus), i.bandwidth_gbps), default=None)
    # A GPU whose NUMA node is unknown (-1, typical on VMs) makes the count unknown: 0, and
    # common.labels leaves numa-gpus-max off, so no same-socket request is met by a guess.
    numa_known = all(g.numa_node >= 0 for g in gpus)
    numa_counts = Counter(g.numa_node for g in gpus) if numa_known else Counter[int]()
    cufile: Literal["true", "compat", "false"] = (
        "true" if storage.cu_file_enabled else "compat" if storage.compat_mode else "false"
    )
    return Summary(
        gpu_count=len(gpus),
        nvlink_island_size=len(biggest.gpus) if biggest else 0,
        nvlink_bandwidth_gbps=biggest.bandwidth_gbps if biggest else 0,
        numa_gpus_max=max(numa_counts.values(), default=0),
        rdma=rdma.capable and rdma_ports > 0,
        rdma_ports=rdma_ports,
        usable_hcas=tuple(usable),
        hca_profile=hca_profile(usable),
        cufile=cufile,
        fabric_health="degraded" if faults else "ok",
        nvlink_domain=nvlink_domain(gpus).value,
    )


def nvlink_domain(gpus: Sequence[Gpu]) -> nvlink.Domain:
    """The node's multi-node NVLink domain from its GPUs' fabric, or none and why."""
    return nvlink.from_gpus([_fabric_of(g) for g in gpus])


def _fabric_of(gpu: Gpu) -> dict[str, object]:
    """What common.nvlink reads of a GPU, in wire form."""
    f = gpu.fabric
    fabric = None if f is None else {"clusterUuid": f.cluster_uuid, "cliqueId": f.clique_id}
    return {"index": gpu.index, "fabric": fabric}

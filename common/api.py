"""Names the outside world relies on (fixed by DESIGN.md)."""

from typing import Final

GROUP: Final = "gpufabric.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

NODE_STATUS_KIND: Final = "GpuNodeStatus"
NODE_STATUS_PLURAL: Final = "gpunodestatuses"
CLAIM_KIND: Final = "GpuClaim"
CLAIM_PLURAL: Final = "gpuclaims"

AGENT_FIELD_MANAGER: Final = "gpufabric-agent"
LABELER_FIELD_MANAGER: Final = "gpufabric-labeler"
DEFAULT_NAMESPACE: Final = "gpufabric-system"

# Node labels (only the labeler writes them).
LABEL_PREFIX: Final = f"{GROUP}/"
LABEL_GPU_COUNT: Final = f"{GROUP}/gpu-count"
LABEL_NVLINK_ISLAND_SIZE: Final = f"{GROUP}/nvlink-island-size"
LABEL_NVLINK_BANDWIDTH: Final = f"{GROUP}/nvlink-bandwidth-gbps"
LABEL_NUMA_GPUS_MAX: Final = f"{GROUP}/numa-gpus-max"
LABEL_RDMA: Final = f"{GROUP}/rdma"
LABEL_RDMA_PORTS: Final = f"{GROUP}/rdma-ports"
LABEL_HCA_PROFILE: Final = f"{GROUP}/hca-profile"
LABEL_CUFILE: Final = f"{GROUP}/cufile"
LABEL_FABRIC_HEALTH: Final = f"{GROUP}/fabric-health"
# Multi-node NVLink domain (GB200/GB300 NVL72): see common.nvlink.
LABEL_NVLINK_DOMAIN: Final = f"{GROUP}/nvlink-domain"
# NVIDIA GFD / DRA driver: `<clusterUuid>.<cliqueId>`, set once the fabric manager formed it.
LABEL_GPU_CLIQUE: Final = "nvidia.com/gpu.clique"

ALL_LABELS: Final = (
    LABEL_GPU_COUNT,
    LABEL_NVLINK_ISLAND_SIZE,
    LABEL_NVLINK_BANDWIDTH,
    LABEL_NUMA_GPUS_MAX,
    LABEL_RDMA,
    LABEL_RDMA_PORTS,
    LABEL_HCA_PROFILE,
    LABEL_CUFILE,
    LABEL_FABRIC_HEALTH,
)

# Pod annotations (users write them).
ANNOTATION_PREFIX: Final = f"{GROUP}/"
ANN_CLAIM: Final = f"{GROUP}/claim"
ANN_RDMA: Final = f"{GROUP}/rdma"
ANN_RDMA_MIN_PORTS: Final = f"{GROUP}/rdma-min-ports"
ANN_PREFERRED_HCAS: Final = f"{GROUP}/preferred-hcas"
ANN_CUFILE: Final = f"{GROUP}/cufile"
ANN_TOPOLOGY: Final = f"{GROUP}/topology"
ANN_MIN_NVLINK_BW: Final = f"{GROUP}/min-nvlink-bandwidth-gbps"

# Condition types, one per probe plus the overall verdict.
COND_NVML: Final = "NvmlAvailable"
COND_PCIE: Final = "PcieProbed"
COND_RDMA: Final = "RdmaProbed"
COND_GDS: Final = "GdsProbed"
COND_FABRIC: Final = "FabricHealthy"

GPU_RESOURCE: Final = "nvidia.com/gpu"

"""Names fixed by DESIGN.md "IMEX channels" and by NVIDIA's DRA driver (ComputeDomain CRD)."""

from __future__ import annotations

from typing import Final, Literal

from webhook.groups.framework.owned import OwnedKind

ANN_COMPUTE_DOMAIN: Final = "gpufabric.io/compute-domain"
Mode = Literal["required", "preferred"]
MODES: Final[tuple[Mode, ...]] = ("required", "preferred")

CLAIM: Final = "gpufabric-imex-channel"  # the pod's resourceClaims entry the webhook adds

CD_GROUP: Final = "resource.nvidia.com"
CD_VERSION: Final = "v1beta1"
CD_PLURAL: Final = "computedomains"
CD_KIND: Final = "ComputeDomain"
CD_CRD: Final = f"{CD_PLURAL}.{CD_GROUP}"
# The driver's kubelet plugin labels a node with the UID of the ComputeDomain whose channel it
# prepared there; the node's one channel-0 device then belongs to that ComputeDomain.
NODE_LABEL: Final = "resource.nvidia.com/computeDomain"
# The placer's on the ComputeDomains it makes: held until the group's last member is gone.
FINALIZER: Final = "gpufabric.io/group-members"
# NVIDIA's controller labels the channel ResourceClaimTemplate it makes for a ComputeDomain with
# NODE_LABEL=<its UID> and this key = Workload (its daemons' templates: Daemon).
TEMPLATE_TARGET: Final = "resource.nvidia.com/computeDomainTarget"
TEMPLATES: Final = "resourceclaimtemplates.resource.k8s.io"

# The ComputeDomains (framework/owned.py: labels and owner, as on PodGroups): every one watched
# (a user's declares templates its pods claim); numNodes sent only where the CRD requires it
# (v25.3-v25.12: there the IMEX daemons may wait for that many peers, and 0 would never form
# the IMEX domain); the placer's finalizer holds each it made until the last member is gone.
COMPUTE_DOMAINS: Final = OwnedKind(
    CD_GROUP,
    CD_PLURAL,
    CD_KIND,
    (CD_VERSION,),
    only_ours=False,
    finalizer=FINALIZER,
    optional=("numNodes",),
)
# On a pod outside any group that claims a user-made ComputeDomain's channel: the UID of that
# ComputeDomain, which the pod's required pod affinity selects.
LABEL_POD_DOMAIN: Final = "gpufabric.io/compute-domain-uid"


def template_name(group: str) -> str:
    """The ResourceClaimTemplate the group's ComputeDomain declares (and its members claim)."""
    return f"{group}-imex-channel"

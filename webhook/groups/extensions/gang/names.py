"""Names fixed by DESIGN.md "Group placement" (native gang) and by Kubernetes' PodGroup
(scheduling.k8s.io/v1alpha2 on 1.36, v1beta1 from 1.37; field names from kubernetes/api
testdata/HEAD, copied to tests/fixtures/schedulers/)."""

from __future__ import annotations

import re
from typing import Final

from webhook.groups.framework.owned import OwnedKind

PG_GROUP: Final = "scheduling.k8s.io"
# The versions gpufabric writes, newest first: the cluster's is the first it serves (1.37 serves
# v1beta1 and no longer v1alpha2; 1.36 only v1alpha2; both only with GenericWorkload on).
PG_VERSIONS: Final = ("v1beta1", "v1alpha2")
# Where gang.minCount may change (v1alpha2's schedulingPolicy is immutable: HTTP 422).
MUTABLE_MIN_COUNT: Final = frozenset({"v1beta1"})
PG_PLURAL: Final = "podgroups"
PG_KIND: Final = "PodGroup"
# The PodGroups the placer makes (framework/owned.py: labels and owner, as on ComputeDomains):
# watched only ours; one being deleted still serves its group (kube-scheduler goes on using it
# while the podgroup-protection finalizer holds it for the pods that name it).
PODGROUPS: Final = OwnedKind(PG_GROUP, PG_PLURAL, PG_KIND, PG_VERSIONS, serves_deleted=True)

# metadata.name of a PodGroup: a DNS subdomain (lower case, digits, '-', '.'; 253 at most).
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def podgroup_name(group: str) -> str | None:
    """The PodGroup of a group, `gpufabric-<group>`; None where that is not a valid object name
    (a group name may be any label value: upper case, '_'): such a group gets no native gang."""
    name = f"gpufabric-{group}"
    return name if len(name) <= 253 and _SUBDOMAIN.fullmatch(name) else None

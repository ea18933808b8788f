"""Kueue `Topology` objects (kueue.x-k8s.io): `gpufabric` over the network levels, and
`gpufabric-nvlink` with the NVLink level between leaf and hostname when a node has one."""

from __future__ import annotations

from typing import Any

from webhook.export.model import TOPOLOGY, Model
from webhook.export.model import topologies as shared_topologies

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1", "v1alpha1")  # newest first: 0.15+, 0.14, 0.9-0.13
KIND = TOPOLOGY
PLURAL = "topologies"


def topologies(model: Model, version: str = VERSIONS[0]) -> list[dict[str, Any]]:
    return shared_topologies(model, f"{GROUP}/{version}", lambda name, label: {"nodeLabel": label})

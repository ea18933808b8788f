"""KAI Scheduler `Topology` objects (kai.scheduler/v1alpha1): the same levels as Kueue's, each
with its level name as alias, so a workload may say `leaf-pair` instead of the label key."""

from __future__ import annotations

from typing import Any

from webhook.export.model import TOPOLOGY, Model
from webhook.export.model import topologies as shared_topologies

GROUP = "kai.scheduler"
VERSIONS = ("v1alpha1",)
KIND = TOPOLOGY
PLURAL = "topologies"


def topologies(model: Model, version: str = VERSIONS[0]) -> list[dict[str, Any]]:
    return shared_topologies(
        model, f"{GROUP}/{version}", lambda name, label: {"nodeLabel": label, "alias": name}
    )

"""KAI Scheduler `Topology` objects (kai.scheduler/v1alpha1): the same levels as Kueue's, each
with its level name as alias, so a workload may say `leaf-pair` instead of the label key."""

from __future__ import annotations

from typing import Any

from webhook.export.model import NAME, NVLINK_NAME, Model, levels, metadata

GROUP = "kai.scheduler"
VERSIONS = ("v1alpha1",)
KIND = "Topology"
PLURAL = "topologies"


def topologies(model: Model, version: str = VERSIONS[0]) -> list[dict[str, Any]]:
    if not model.placed:
        return []
    names = [(NAME, False)] + ([(NVLINK_NAME, True)] if model.nvlink else [])
    return [
        {
            "apiVersion": f"{GROUP}/{version}",
            "kind": KIND,
            "metadata": metadata(name),
            "spec": {
                "levels": [{"nodeLabel": label, "alias": alias} for alias, label in levels(nvlink)]
            },
        }
        for name, nvlink in names
    ]

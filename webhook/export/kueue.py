"""Kueue `Topology` objects (kueue.x-k8s.io): `gpufabric` over the network levels, and
`gpufabric-nvlink` with the NVLink level between leaf and hostname when a node has one."""

from __future__ import annotations

from typing import Any

from webhook.export.model import NAME, NVLINK_NAME, Model, levels, metadata

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first; v1beta1 where a cluster serves only that
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
            "spec": {"levels": [{"nodeLabel": label} for _, label in levels(nvlink)]},
        }
        for name, nvlink in names
    ]

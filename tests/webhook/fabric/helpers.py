"""Shared test helpers: the reference fabric files and GpuNodeStatus bodies with HCA GUIDs."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.reference import FIXTURES, shared
from webhook.fabric.sources.ib import reader

# Byte-for-byte copies of shared/reference/fabric (see tests/fixtures/fabric/PROVENANCE.md) under a
# licence that fits this repository. The others (NOT_COPIED: GPL, or no licence at all) are read
# from ../shared/reference/fabric, which CI has beside the clone; without it their tests skip.
REF = FIXTURES / "fabric"
NOT_COPIED = {
    "ibnetdiscover/synthetic-k4-n3-fattree-3tier.topo": (
        "GPL-3.0, cyberang3l/InfiniBand-Graphviz-ualization k-4-n-3-Full.topo"
    ),
    "slurm/slurm-topology.conf.5-examples.conf": "GPL-2.0+, SchedMD/slurm doc/man/man5/topology.conf.5",
    "slurm/slurm-topology.yaml.5-example.yaml": "GPL-2.0+, SchedMD/slurm doc/man/man5/topology.yaml.5",
    "slurm/slurm-topology-guide-examples.txt": "GPL-2.0+, SchedMD/slurm doc/html/topology.shtml",
    "slurm/circe-leaves-only-topology.conf": (
        "no licence published, tonystarkiss/slurm-superpod topology.conf"
    ),
}


def ref_path(path: str) -> Path:
    if path in NOT_COPIED:
        return shared(f"fabric/{path}", NOT_COPIED[path])
    return REF / path


def ref(path: str) -> str:
    return ref_path(path).read_text()


def sysfs_guid(value: int) -> str:
    """The form the agent publishes (sysfs node_guid): xxxx:xxxx:xxxx:xxxx."""
    h = f"{value:016x}"
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


def hca(
    name: str, guid: int, *, compute: bool | None = True, state: str = "ACTIVE", port_guid: int = 0
) -> dict[str, Any]:
    port: dict[str, Any] = {
        "port": 1,
        "state": state,
        "physState": "LinkUp",
        "rateGbps": 400,
        "linkLayer": "InfiniBand",
    }
    if port_guid:
        port["guid"] = sysfs_guid(port_guid)
    body: dict[str, Any] = {
        "name": name,
        "nodeGuid": sysfs_guid(guid) if guid else "",
        "ports": [port],
    }
    if compute is not None:
        body["computeFabric"] = compute
    return body


def status(*hcas: dict[str, Any]) -> dict[str, Any]:
    return {"hcas": list(hcas)}


def statuses_from_descriptions(text: str) -> dict[str, dict[str, Any]]:
    """What each host's agent would publish: its HCAs' GUIDs, grouped here by the host word of a
    `host dev` NodeDescription (the test knows the hosts; the code under test never reads names)."""
    hcas: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in reader.parse(text).nodes.values():
        words = node.desc.split()
        if not node.is_switch and len(words) == 2:
            hcas[words[0]].append(hca(words[1], node.guid))
    return {host: status(*h) for host, h in hcas.items()}

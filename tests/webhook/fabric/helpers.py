"""Shared test helpers: the reference fabric files and GpuNodeStatus bodies with HCA GUIDs."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from webhook.fabric import ibnet

# Byte-for-byte copies of shared/reference/fabric (see its PROVENANCE.md) under a licence that fits
# this repository; the GPL-licensed ones (NOT_COPIED) are read from ../shared/reference/fabric,
# which CI and every developer checkout have beside the clone.
REF = Path(__file__).resolve().parents[2] / "fixtures" / "fabric"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "reference" / "fabric"
NOT_COPIED = frozenset(
    {
        "ibnetdiscover/synthetic-k4-n3-fattree-3tier.topo",  # GPL-3.0
        "slurm/slurm-topology.conf.5-examples.conf",  # GPL-2.0+
        "slurm/slurm-topology.yaml.5-example.yaml",  # GPL-2.0+
        "slurm/slurm-topology-guide-examples.txt",  # GPL-2.0+
    }
)


def ref_path(path: str) -> Path:
    if path not in NOT_COPIED:
        return REF / path
    if not (SHARED / path).is_file():
        raise FileNotFoundError(
            f"{path} is read from {SHARED} (GPL, not copied): check it out there"
        )
    return SHARED / path


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
    for node in ibnet.parse(text).nodes.values():
        words = node.desc.split()
        if not node.is_switch and len(words) == 2:
            hcas[words[0]].append(hca(words[1], node.guid))
    return {host: status(*h) for host, h in hcas.items()}

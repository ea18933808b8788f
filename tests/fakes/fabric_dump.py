"""Synthetic fat trees printed as real `ibnetdiscover` output (the printer's format, rdma-core
ibnetdiscover.c), with the GpuNodeStatus HCA GUIDs each node's agent would publish.

Scalable unit `su<k>` has one leaf per rail (`su<k>-rail<r>`); node `su<k>-n<i>` cables HCA r
to the rail-r leaf. Two tiers: every leaf to every spine. Three tiers: `pod_size` SUs share a
pod's spines, and every pod spine goes to every core switch. Every switch carries a SHARP
Aggregation Node, as Quantum-2 switches do.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

_SW, _CA, _AGG = 0x2C5EAB0300000000, 0xE09D730300000000, 0x2C5EAB0400000000


@dataclass
class FatTree:
    sus: int
    nodes_per_su: int
    rails: int = 8
    spines: int = 4
    tiers: int = 2
    pod_size: int = 2
    swap: dict[tuple[str, int], str] = field(
        default_factory=dict
    )  # (node, rail) -> other leaf name

    def node_names(self) -> list[str]:
        return [
            f"su{s}-n{i}" for s in range(1, self.sus + 1) for i in range(1, self.nodes_per_su + 1)
        ]

    def render(self) -> tuple[str, dict[str, dict[str, Any]]]:
        switches: dict[str, int] = {}
        # name -> (peer switch name or CA id, the peer's port, CA guid or 0, CA description);
        # a cable's port on each switch is its place in that switch's list, plus one.
        links: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)

        def sw(name: str) -> str:
            switches.setdefault(name, _SW + len(switches) + 1)
            return name

        def cable(a: str, b: str) -> None:
            links[a].append((b, len(links[b]) + 1, 0, ""))
            links[b].append((a, len(links[a]), 0, ""))

        pods = (self.sus + self.pod_size - 1) // self.pod_size
        for s in range(1, self.sus + 1):
            for r in range(1, self.rails + 1):
                leaf = sw(f"su{s}-rail{r}")
                if self.tiers == 2:
                    for k in range(1, self.spines + 1):
                        cable(leaf, sw(f"spine{k}"))
                else:
                    pod = (s - 1) // self.pod_size + 1
                    for k in range(1, self.spines + 1):
                        cable(leaf, sw(f"pod{pod}-spine{k}"))
        if self.tiers == 3:
            for pod in range(1, pods + 1):
                for k in range(1, self.spines + 1):
                    for c in range(1, self.spines + 1):
                        cable(sw(f"pod{pod}-spine{k}"), sw(f"core{c}"))
        statuses: dict[str, dict[str, Any]] = {}
        cas: list[tuple[int, str, str, int]] = []  # guid, desc, switch, its port
        for idx, node in enumerate(self.node_names()):
            su = node.split("-")[0]
            hcas = []
            for r in range(1, self.rails + 1):
                guid = _CA + idx * self.rails + r
                leaf = self.swap.get((node, r), f"{su}-rail{r}")
                links[leaf].append((f"H-{guid:016x}", 1, guid, f"{node} mlx5_{r - 1}"))
                cas.append((guid, f"{node} mlx5_{r - 1}", leaf, len(links[leaf])))
                h = f"{guid:016x}"
                hcas.append(
                    {
                        "name": f"mlx5_{r - 1}",
                        "nodeGuid": ":".join(h[i : i + 4] for i in range(0, 16, 4)),
                        "computeFabric": True,
                        "ports": [{"port": 1, "state": "ACTIVE", "linkLayer": "InfiniBand"}],
                    }
                )
            statuses[node] = {"hcas": hcas}
        out = ["#", "# Topology file: generated on Sat Nov 21 12:00:00 2026", "#", ""]
        aggs: list[tuple[int, str, int]] = []  # guid, switch, its port
        for name, guid in switches.items():
            desc = f"MF0;{name}:MQM9700/U1"
            agg_port = max(65, len(links[name]) + 1)  # the SHARP port: 65 on a Quantum-2
            out += [
                "vendid=0x2c9",
                "devid=0xd2f2",
                f"sysimgguid=0x{guid:x}",
                f"switchguid=0x{guid:x}({guid:x})",
            ]
            out.append(
                f'Switch\t{agg_port} "S-{guid:016x}"\t\t# "{desc}" enhanced port 0 lid 1 lmc 0'
            )
            for port, (peer, peer_port, peer_guid, peer_desc) in enumerate(links[name], 1):
                if peer_guid:
                    out.append(
                        f'[{port}]\t"{peer}"[1]({peer_guid:x}) \t\t# "{peer_desc}" lid 2 4xNDR'
                    )
                else:
                    pdesc = f"MF0;{peer}:MQM9700/U1"
                    out.append(
                        f'[{port}]\t"S-{switches[peer]:016x}"[{peer_port}]\t\t# "{pdesc}" lid 3 4xNDR'
                    )
            agg = _AGG + guid - _SW
            aggs.append((agg, name, agg_port))
            out.append(
                f'[{agg_port}]\t"H-{agg:016x}"[1]({agg:x}) \t\t# "Mellanox Technologies Aggregation Node" lid 4 4xNDR'
            )
            out.append("")
        cas += [
            (agg, "Mellanox Technologies Aggregation Node", name, port) for agg, name, port in aggs
        ]
        for guid, desc, leaf, port in cas:
            out += ["vendid=0x2c9", "devid=0x1021", f"caguid=0x{guid:x}"]
            out.append(f'Ca\t1 "H-{guid:016x}"\t\t# "{desc}"')
            out.append(
                f'[1]({guid:x}) \t"S-{switches[leaf]:016x}"[{port}]\t\t# lid 2 lmc 0 "MF0;{leaf}:MQM9700/U1" lid 1 4xNDR'
            )
            out.append("")
        return "\n".join(out), statuses

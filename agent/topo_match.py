"""Whether an NCCL topology file describes this node. Pure: the caller says what the node has.

A vendor file is trusted for locality only when its devices are this node's: the NDv5 file on an
NDv4 VM shares the NICs' bus ids but not all the GPUs', and used anyway it put three rails "not
compute fabric" (NCCL_IB_HCA lost them). The file must name only devices the node has, and when it
names GPUs at all (the AWS p5 file names none), every GPU of the node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from agent.probes.nccl_topo import NcclTopo, merged_nic_id

SHOWN = 4  # bus ids listed per kind of mismatch; the count says the rest


def _ids(bus_ids: Collection[str]) -> str:
    ordered = sorted(bus_ids)
    more = f" and {len(ordered) - SHOWN} more" if len(ordered) > SHOWN else ""
    return ", ".join(ordered[:SHOWN]) + more


def mismatch(
    topo: NcclTopo,
    gpus: Collection[str],
    nics: Collection[str],
    present: Callable[[str], bool],
) -> str:
    """Why `topo` is not this node's file ("" when it is). `gpus`: the node's GPU bus ids; `nics`:
    its RDMA devices' bus ids (a file names a NIC at NCCL's merged id); `present(bus)`: whether
    the node has that PCI function. Bridges are not compared: VM files invent them (ffff:ff:01.0).
    """
    merged = {merged_nic_id(n) for n in nics} | set(nics)
    problems = []
    absent_gpus = [b for b in topo.gpu_ids if b not in gpus]
    if absent_gpus:
        problems.append(f"its GPUs {_ids(absent_gpus)} are not this node's")
    absent = [
        bus
        for bus in topo.endpoints - topo.gpu_ids
        if not bus.startswith("ffff") and bus not in merged and not present(bus)
    ]
    if absent:
        problems.append(f"its devices {_ids(absent)} are not on this node")
    unnamed = [g for g in gpus if g not in topo.gpu_ids]
    if topo.gpu_ids and unnamed:
        problems.append(f"this node's GPUs {_ids(unnamed)} are not in it")
    if not problems:
        return ""
    counts = (
        f" (it names {len(topo.gpu_ids)} GPUs, this node has {len(gpus)})" if topo.gpu_ids else ""
    )
    return f"{topo.path} does not describe this node{counts}: {'; '.join(problems)}"

"""NCCL topology files read the way NCCL reads them (issue 7 items 3 and 4), on published files
copied byte for byte into tests/fixtures/nccl-topo (see its PROVENANCE.md)."""

from __future__ import annotations

import itertools
from pathlib import Path

from agent.assemble import Assembled
from agent.gather import Snapshot
from agent.islands import islands, nvlink_from_topo
from agent.probes import nccl_topo
from agent.topology import Locality, distance
from common.model import Gpu
from tests.conftest import probe_snapshot

REF = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-topo"


def ref(name: str) -> str:
    return (REF / name.rsplit("/", 1)[-1]).read_text()


def matrix(result: Assembled) -> dict[tuple[str, str], str | None]:
    places = result.places
    return {
        (a.label, b.label): distance(a.locality, b.locality)
        if a.locality.root and b.locality.root
        else None
        for a, b in itertools.permutations(places, 2)
    }


def test_second_port_of_a_dual_port_nic_sits_with_the_first(probed: dict[str, Assembled]) -> None:
    # oke-BM.GPU4.8.xml: mlx5_18 (port 1) and mlx5_19 (port 2) are one <pci busid=0000:0c:00.0>
    # under the PEX switch 0000:05:00.0 that also holds GPU 0000:0f:00.0 and GPU 0000:15:00.0.
    gpu0 = probed["oci-bm-gpu4"].status.gpus[0]
    assert gpu0.pci_bus_id == "0000:0f:00.0"
    near = {(h.name, h.distance) for h in gpu0.nearest_hcas}
    assert near == {(n, "PXB") for n in ("mlx5_18", "mlx5_19", "mlx5_26", "mlx5_27")}
    hcas = {h.name: h for h in probed["oci-bm-gpu4"].status.hcas}
    assert hcas["mlx5_19"].pci_bus_id == "0000:0c:00.1"
    assert (hcas["mlx5_19"].numa_node, hcas["mlx5_19"].pcie_switch) == (3, "0000:0a:00.0")


def test_on_bare_metal_the_file_changes_no_distance(snapshots: dict[str, Snapshot]) -> None:
    # The OCI file is a dump of the same tree sysfs shows: with or without it, every distance is
    # the same (the old code computed NODE between an XML root and a sysfs root).
    with_file = probe_snapshot(snapshots["oci-bm-gpu4"])
    without = probe_snapshot(snapshots["oci-bm-gpu4"], use_topo=False)
    assert "NCCL topology" not in without.status.conditions[1].message
    assert matrix(with_file) == matrix(without)


def test_bridges_without_class_keep_their_switch() -> None:
    # p5.48xl-topo.xml: four EFA NICs below each <pci busid="0000:45:00.0"> that has no class.
    topo = nccl_topo.parse(ref("aws-ofi-nccl-topo/p5.48xl-topo.xml"))
    nics = [
        topo.devices[b] for b in ("0000:4f:00.0", "0000:50:00.0", "0000:51:00.0", "0000:52:00.0")
    ]
    assert all(n.switches == ("0000:45:00.0",) for n in nics)
    assert distance(nics[0], nics[3]) == "PIX"
    # GPUs are not in the file: NCCL hangs a GPU under the first sysfs ancestor the file names.
    sysfs = Locality(root="pci0000:44", bridges=("0000:44:01.0", "0000:45:00.0", "0000:46:03.0"))
    gpu = topo.attach("0000:53:00.0", sysfs)
    assert distance(gpu, nics[0]) == "PIX" and gpu.numa_node == 0
    assert topo.attach("0000:99:00.0", Locality(root="pci0000:98")).root == ""  # unknown: no guess


def test_nics_match_at_function_zero_like_nccl() -> None:
    topo = nccl_topo.parse(ref("oci-topo/oke-BM.GPU4.8.xml"))
    assert topo.lookup("0000:0c:00.1", nic=True) == topo.devices["0000:0c:00.0"]
    assert topo.lookup("0000:0c:00.1") is None  # GPUs match exactly
    assert nccl_topo.merged_nic_id("c941:00:02.0") == "c941:00:00.0"  # VFs merge too


def test_two_cpus_with_one_numaid_are_two_host_bridges() -> None:
    # DERIVED from ndv4-topo.xml: the second <cpu> relabelled numaid 0.
    text = ref("azure-nd-topo/ndv4-topo.xml").replace('numaid="1"', 'numaid="0"')
    topo = nccl_topo.parse(text)
    a, b = topo.devices["0003:00:00.0"], topo.devices["0001:00:00.0"]
    assert (a.numa_node, b.numa_node) == (0, 0)
    assert distance(a, b) == "NODE"  # the old code made both "cpu0": PHB
    assert any("numaid 0" in p for p in topo.problems)


def fused_b300(second_hash: str, second_domain: str) -> str:
    # DERIVED from B300MP.xml (one host): a second host appended, as in a multi-node dump.
    text = ref("oci-topo/B300MP.xml")
    body = text[text.index("<cpu") : text.rindex("</system>")]
    other = body.replace("0x513c5d5aedfe149a", second_hash).replace(
        'busid="0000:', f'busid="{second_domain}:'
    )
    return text.replace("</system>", other + "</system>")


def test_multi_host_file_uses_this_nodes_host() -> None:
    one = nccl_topo.parse(ref("oci-topo/B300MP.xml"))
    same = nccl_topo.parse(fused_b300("0x1111", "0000"), present=lambda bus: True)
    assert same.devices == one.devices  # repeated bus ids: the first host, never a mix
    assert any("2 hosts" in p and "first" in p for p in same.problems)
    other = nccl_topo.parse(
        fused_b300("0x2222", "0001"), present=lambda bus: bus.startswith("0001")
    )
    assert all(bus.startswith("0001") for bus in other.devices)
    assert any("0x2222" in p for p in other.problems)


def test_nvlink_from_the_file_when_nvml_is_missing(probed: dict[str, Assembled]) -> None:
    # oke-BM.GPU4.8.xml: each A100 (sm 80) has 6 x 2 NVLinks to NVSwitches (tclass 0x068000).
    status = probed["oci-bm-gpu4"].status
    assert [i.gpus for i in status.nvlink_islands] == [tuple(range(8))]
    assert status.summary.nvlink_bandwidth_gbps == 600
    nvml = status.conditions[0]
    assert nvml.status == "False" and "NVLink from NCCL topology" in nvml.message
    nodriver = probed["hgx-h100-nodriver"].status.conditions[0]
    assert "NVLink unknown" in nodriver.message


def test_nvlink_between_gpus_from_the_file() -> None:
    # oke-BM.GPU4.8.xml read alone: every GPU reaches the six NVSwitches -> one island.
    topo = nccl_topo.parse(ref("oci-topo/oke-BM.GPU4.8.xml"))
    by_bus = {bus: i for i, bus in enumerate(sorted(topo.gpus))}
    gpus = [Gpu(i, b, nvlink=nvlink_from_topo(b, topo.gpus[b], by_bus)) for b, i in by_bus.items()]
    assert [len(i.gpus) for i in islands(gpus)] == [8]
    # ncv4-topo.xml: each PCIe A100 has 12 NVLinks "to" its own bus id: nothing is connected.
    topo = nccl_topo.parse(ref("azure-nd-topo/ncv4-topo.xml"))
    by_bus = {bus: i for i, bus in enumerate(sorted(topo.gpus))}
    assert len(by_bus) == 4
    assert all(nvlink_from_topo(b, topo.gpus[b], by_bus) is None for b in by_bus)


def test_cpu_without_numaid_is_unknown_numa_not_node_0() -> None:
    # DERIVED from ndv4-topo.xml: the first <cpu> loses its numaid.
    text = ref("azure-nd-topo/ndv4-topo.xml").replace(' numaid="0"', "", 1)
    topo = nccl_topo.parse(text)
    assert topo.devices["0003:00:00.0"].numa_node == -1
    assert topo.cpus[0].numa_node == -1
    # so a device of sysfs NUMA node 0 does not land under it
    assert topo.attach("0000:99:00.0", Locality(root="pci0000:98", numa_node=0)).root == ""

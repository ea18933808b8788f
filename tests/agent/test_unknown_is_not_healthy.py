"""Unknown stays unknown: a wrong --host-root and a VM's numa_node -1 never read as healthy facts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.__main__ import main
from agent.assemble import Options
from agent.gather import load
from agent.host import HostReader
from agent.nvml import NullNvml, SnapshotNvml
from agent.output import status_object
from agent.probe import ProbeConfig, probe_node
from common import api
from common.labels import labels_for
from tests.agent.test_host_reader import build_host
from tests.conftest import FIXTURES
from tests.fakes.sysfs import HostBuilder


def _bad_roots(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "empty").mkdir()
    return {
        "does not exist": tmp_path / "missing",
        "is not a directory": tmp_path / "a-file",
        "no /sys/bus/pci/devices": tmp_path / "empty",
    }


@pytest.mark.parametrize("command", ["probe", "gather", "run"])
def test_wrong_host_root_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    for why, root in _bad_roots(tmp_path).items():
        extra = {
            "probe": ["-o", "labels"],
            "gather": ["-o", str(tmp_path / "g.tar.gz")],
            "run": ["--node-name", "n", "--kubeconfig", str(tmp_path / "none")],
        }[command]
        assert main([command, "--host-root", str(root), "--nvml", "none", *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and why in captured.err, captured.err
        assert not (tmp_path / "g.tar.gz").exists()


def test_empty_host_root_in_the_daemon_loop_is_not_a_healthy_empty_node(tmp_path: Path) -> None:
    # What `run` would publish if the mount vanished after start: conditions False, degraded.
    result = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(), Options())
    labels = labels_for(result.status.summary)
    assert labels[api.LABEL_FABRIC_HEALTH] == "degraded"
    conds = {c.type: c for c in result.status.conditions}
    assert conds["PcieProbed"].status == "False"
    assert conds["PcieProbed"].reason == "HostRootInvalid"


def test_vm_numa_node_minus_one_leaves_numa_gpus_max_off() -> None:
    # The Azure ND H100 v5 VM's sysfs says numa_node -1 for every GPU (its real dump); only the
    # vendor NCCL topology file knows the sockets. Without it, the count is unknown.
    snap = load(FIXTURES / "azure-ndv5.tar.gz")
    blind = probe_node(snap.reader(), SnapshotNvml(snap.nvml), ProbeConfig(), Options())
    assert {g.numa_node for g in blind.status.gpus} == {-1}
    assert api.LABEL_NUMA_GPUS_MAX not in labels_for(blind.status.summary)  # was "8"
    told = probe_node(
        snap.reader(),
        SnapshotNvml(snap.nvml),
        ProbeConfig(nccl_topo=snap.options["ncclTopo"]),
        Options(),
    )
    assert labels_for(told.status.summary)[api.LABEL_NUMA_GPUS_MAX] == "4"


def test_one_unknown_numa_gpu_makes_the_count_unknown(tmp_path: Path) -> None:
    b = build_host(tmp_path)
    b.pci(
        "0000:5b:00.0",
        root="pci0000:5a",
        vendor=0x10DE,
        device=0x2330,
        klass=0x030200,
        numa=-1,
    )
    result = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(), Options())
    assert sorted(g.numa_node for g in result.status.gpus) == [-1, 0]
    assert api.LABEL_NUMA_GPUS_MAX not in labels_for(result.status.summary)


def test_same_socket_pod_is_not_placed_on_a_node_whose_numa_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook.__main__ import main as webhook_main

    snap = load(FIXTURES / "azure-ndv5.tar.gz")
    blind = probe_node(snap.reader(), SnapshotNvml(snap.nvml), ProbeConfig(), Options())
    (tmp_path / "vm.yaml").write_text(yaml.safe_dump(status_object("vm", blind)))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "a",
            "annotations": {"gpufabric.io/topology": "same-socket"},
        },
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]},
    }
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    webhook_main(["explain", "--pod", str(tmp_path / "pod.yaml"), "--status", str(tmp_path)])
    out = capsys.readouterr().out
    assert "vm" in out
    assert api.LABEL_NUMA_GPUS_MAX in out
    assert "no node" in out.lower() or "0 of 1" in out or "not eligible" in out.lower(), out


def test_nvml_none_on_purpose_is_not_a_fault(tmp_path: Path) -> None:
    build_host(tmp_path)
    result = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(), Options())
    conds = {c.type: c for c in result.status.conditions}
    assert conds["NvmlAvailable"].reason == "Disabled"
    assert conds["FabricHealthy"].status == "True"
    assert result.status.summary.fabric_health == "ok"


def test_missing_nvml_with_nvlink_from_the_topology_file_is_not_degraded() -> None:
    # OCI BM.GPU4.8 without NVML: its NCCL topology file describes every GPU's NVLinks, so the
    # fabric is known and whole; the node must stay in the group placer's capacity (issue 17).
    from webhook.groups.model.objects import node_info

    snap = load(FIXTURES / "oci-bm-gpu4.tar.gz")
    told = probe_node(
        snap.reader(),
        SnapshotNvml(snap.nvml),
        ProbeConfig(nccl_topo=snap.options["ncclTopo"]),
        Options(),
    )
    conds = {c.type: c for c in told.status.conditions}
    assert conds["NvmlAvailable"].status == "False"
    assert told.status.summary.nvlink_island_size == 8
    assert conds["FabricHealthy"].status == "True", conds["FabricHealthy"].message
    labels = labels_for(told.status.summary)
    node = {
        "metadata": {"name": "oci", "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [
            {"type": "Ready", "status": "True"}]},
    }  # fmt: skip
    assert node_info(node).usable
    # Without the file nobody knows the NVLinks: unknown is not healthy.
    blind = probe_node(snap.reader(), SnapshotNvml(snap.nvml), ProbeConfig(), Options())
    assert blind.status.summary.fabric_health == "degraded"
    assert "NVLink unknown" in {c.type: c for c in blind.status.conditions}["FabricHealthy"].message


def _one_socket_vm(root: Path, online: str | None) -> HostBuilder:
    """Two H100s and a NIC whose sysfs says numa_node -1, as on the real 1-NUMA H100 VM
    (../shared/reference/real-gpu-hosts/h100-sxm-vm-1numa.nvidia-smi.txt: `7 -1`, node0 only)."""
    b = HostBuilder(root)
    for bdf, vendor, klass in (
        ("0000:00:06.0", 0x10DE, 0x030200),
        ("0000:00:07.0", 0x10DE, 0x030200),
        ("0000:00:08.0", 0x15B3, 0x020700),
    ):
        b.pci(bdf, root="pci0000:00", vendor=vendor, device=0x2330, klass=klass, numa=-1)
    if online is not None:
        b.file("/sys/devices/system/node/online", online)
    return b


def test_one_numa_node_online_places_every_device_on_it(tmp_path: Path) -> None:
    _one_socket_vm(tmp_path, "0\n")
    result = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(), Options())
    assert [g.numa_node for g in result.status.gpus] == [0, 0]
    assert labels_for(result.status.summary)[api.LABEL_NUMA_GPUS_MAX] == "2"


@pytest.mark.parametrize("online", [None, "0-1\n", "0,2\n", "zero\n", "\n"])
def test_numa_stays_unknown_unless_exactly_one_node_is_online(
    tmp_path: Path, online: str | None
) -> None:
    _one_socket_vm(tmp_path, online)
    result = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(), Options())
    assert {g.numa_node for g in result.status.gpus} == {-1}
    assert api.LABEL_NUMA_GPUS_MAX not in labels_for(result.status.summary)


def test_gather_keeps_the_online_node_list_so_a_replay_agrees(tmp_path: Path) -> None:
    _one_socket_vm(tmp_path / "host", "0\n")
    out = tmp_path / "g.tar.gz"
    args = ["--host-root", str(tmp_path / "host"), "--nvml", "none"]
    assert main(["gather", *args, "-o", str(out)]) == 0
    snap = load(out)
    replay = probe_node(snap.reader(), NullNvml(), ProbeConfig(), Options())
    assert [g.numa_node for g in replay.status.gpus] == [0, 0]

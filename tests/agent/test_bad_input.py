"""Garbage in sysfs, unreadable files, broken configs: clear conditions, nothing crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import values
from agent.assemble import Options
from agent.host import HostReader
from agent.nvml import NullNvml
from agent.probe import ProbeConfig, probe_node
from agent.probes import gds, nccl_topo, pci, rdma
from common.jsonc import JsoncError, loads
from tests.fakes.sysfs import HostBuilder, Port


def small_host(root: Path) -> HostBuilder:
    b = HostBuilder(root)
    b.pci(
        "0000:3b:00.0",
        root="pci0000:3a",
        bridges=("0000:3a:00.0",),
        vendor=0x10DE,
        device=0x2330,
        klass=0x030200,
        numa=0,
        cpulist="0-7",
    )
    b.pci(
        "0000:3c:00.0",
        root="pci0000:3a",
        bridges=("0000:3a:01.0",),
        vendor=0x15B3,
        device=0x1021,
        klass=0x020700,
        numa=0,
        cpulist="0-7",
    )
    b.hca("mlx5_0", "0000:3c:00.0", hca_type="MT4129", ports=(Port(),))
    b.module("nvidia_peermem")
    return b


def status_of(root: Path) -> object:
    return probe_node(HostReader(root), NullNvml(), ProbeConfig(), Options()).status


def test_garbled_numa_and_class_are_skipped_with_a_problem(tmp_path: Path) -> None:
    b = small_host(tmp_path)
    b.file(b.paths["0000:3b:00.0"] + "/numa_node", "banana\n")
    b.file(b.paths["0000:3c:00.0"] + "/class", "\x00\xff garbage")
    tree = pci.probe(HostReader(tmp_path))
    assert tree.functions["0000:3b:00.0"].locality.numa_node == -1
    assert "0000:3c:00.0" not in tree.functions
    assert any("0000:3c:00.0" in p for p in tree.problems)


def test_odd_entries_in_pci_devices_are_ignored(tmp_path: Path) -> None:
    small_host(tmp_path)
    (tmp_path / "sys/bus/pci/devices/not-a-bdf").mkdir()
    tree = pci.probe(HostReader(tmp_path))
    assert "0000:3b:00.0" in tree.functions
    assert any("not-a-bdf" in p for p in tree.problems)


def test_unreadable_attribute_is_absent_even_as_root(tmp_path: Path) -> None:
    # A directory where a file should be raises IsADirectoryError: the reader must shrug it off.
    b = small_host(tmp_path)
    target = tmp_path / (b.paths["0000:3b:00.0"].lstrip("/") + "/local_cpulist")
    target.unlink()
    target.mkdir()
    assert HostReader(tmp_path).read(b.paths["0000:3b:00.0"] + "/local_cpulist") is None


def test_symlink_escaping_the_root_is_not_followed(tmp_path: Path) -> None:
    small_host(tmp_path)
    evil = tmp_path / "sys/class/infiniband/evil"
    evil.parent.mkdir(parents=True, exist_ok=True)
    evil.symlink_to("/etc")
    reader = HostReader(tmp_path)
    assert reader.read("/sys/class/infiniband/evil/passwd") is None


def test_garbled_rdma_port_files(tmp_path: Path) -> None:
    b = small_host(tmp_path)
    b.hca("mlx5_1", "0000:3c:00.0", ports=(Port(1, "garbage", "", "fast", "InfiniBand"),))
    (tmp_path / "sys/class/infiniband/mlx5_1/ports/notaport").mkdir(parents=True)
    reader = HostReader(tmp_path)
    probe = rdma.probe(reader)
    hca = next(h for h in probe.hcas if h.name == "mlx5_1")
    # Not as the kernel writes it: unknown, and the file is named, never "garbage" as a state.
    assert hca.ports[0].state == "UNKNOWN" and hca.ports[0].rate_gbps == 0.0
    assert any("mlx5_1/ports/1/state" in issue for issue in reader.issues)
    assert any("rate" in p for p in probe.problems)
    assert any("notaport" in p for p in probe.problems)


def test_rate_parsing(tmp_path: Path) -> None:
    reader = HostReader(tmp_path)
    for text, rate in (("400 Gb/sec (4X NDR)", 400), ("2.5 Gb/sec (1X SDR)", 2.5), ("fast", None)):
        (tmp_path / "rate").write_text(text + "\n")
        assert values.rate_gbps(reader, "/rate") == rate


def test_cufile_with_comments_urls_and_trailing_commas() -> None:
    text = '{\n // c\n "a": "http://x//y", /* b */ "l": [1, 2,],\n}'
    assert loads(text) == {"a": "http://x//y", "l": [1, 2]}


def test_broken_cufile_names_line_and_column(tmp_path: Path) -> None:
    b = small_host(tmp_path)
    b.file("/etc/cufile.json", '{\n  "properties": {\n    "allow_compat_mode": tru\n  }\n}\n')
    probe = gds.probe(HostReader(tmp_path))
    assert probe.config_path == "/etc/cufile.json"
    assert "line 3" in probe.config_error
    with pytest.raises(JsoncError):
        loads("/* never closed")


def test_cufile_env_path_wins_over_etc(tmp_path: Path) -> None:
    b = small_host(tmp_path)
    b.file("/etc/cufile.json", '{"properties": {"allow_compat_mode": false}}')
    b.file("/opt/cufile.json", '{"properties": {"force_compat_mode": true}}')
    probe = gds.probe(HostReader(tmp_path), "/opt/cufile.json")
    assert probe.config_path == "/opt/cufile.json" and probe.force_compat


def test_broken_nccl_topo_is_a_condition_not_a_crash(tmp_path: Path) -> None:
    b = small_host(tmp_path)
    b.file("/opt/topo.xml", "<system><cpu numaid='x'>")
    status = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig(nccl_topo="/opt/topo.xml"))
    pcie = next(c for c in status.status.conditions if c.type == "PcieProbed")
    # Issue 17 item 4: it was True ("ignored"), while the locality came from a VM's sysfs.
    assert (pcie.status, pcie.reason) == ("False", "TopologyFileInvalid")
    assert "NCCL topology file refused: /opt/topo.xml: not valid XML" in pcie.message
    with pytest.raises(nccl_topo.NcclTopoError):
        nccl_topo.parse("<system/>")


def test_a_crashing_probe_marks_only_its_own_condition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_host(tmp_path)

    def boom(reader: HostReader) -> object:
        raise RuntimeError("driver returned nonsense")

    monkeypatch.setattr(rdma, "probe", boom)
    status = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig()).status
    conds = {c.type: c for c in status.conditions}
    assert conds["RdmaProbed"].status == "False"
    assert "driver returned nonsense" in conds["RdmaProbed"].message
    assert conds["PcieProbed"].status == "True"
    assert status.summary.gpu_count == 1


def test_empty_root_is_unknown_not_a_healthy_empty_node(tmp_path: Path) -> None:
    status = probe_node(HostReader(tmp_path), NullNvml(), ProbeConfig()).status
    assert status.gpus == () and status.hcas == ()
    conds = {c.type: c for c in status.conditions}
    for probe in ("PcieProbed", "RdmaProbed", "GdsProbed", "FabricHealthy"):
        assert conds[probe].status == "False", probe
    assert conds["PcieProbed"].reason == "HostRootInvalid"
    assert "/sys/bus/pci/devices" in conds["PcieProbed"].message
    assert status.summary.fabric_health == "degraded"


def test_cpulist_from_nccl_affinity_mask() -> None:
    assert nccl_topo.mask_to_cpulist("00000000,0000ffff,ffffffff") == "0-47"
    assert nccl_topo.mask_to_cpulist("000000ff,ffff0000,00ffffff") == "0-23,48-71"
    assert nccl_topo.mask_to_cpulist("zz") == ""

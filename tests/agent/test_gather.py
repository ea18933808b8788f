"""gather captures exactly what the probes read; probe --from reproduces the status."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from agent import gather
from agent.__main__ import main
from agent.output import status_object
from tests.conftest import FIXTURES, probe_snapshot


def test_gather_of_an_unpacked_fixture_reproduces_its_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = gather.open_snapshot(FIXTURES / "azure-ndv5.tar.gz", tmp_path / "a")
    # Re-gather the unpacked host (NVML from the original snapshot) and probe the new archive.
    meta_nvml = tmp_path / "nvml.json"
    meta_nvml.write_text(json.dumps(snap.nvml))
    from agent.host import HostReader
    from agent.nvml import SnapshotNvml
    from agent.probe import ProbeConfig, probe_node

    reader = HostReader(snap.root, record=True)
    probe_node(reader, SnapshotNvml(snap.nvml), ProbeConfig(nccl_topo=snap.options["ncclTopo"]))
    assert reader.recording is not None
    out = tmp_path / "again.tar.gz"
    gather.write(
        out, reader.recording, {"node": "again", "nvml": snap.nvml, "options": snap.options}
    )
    again = gather.open_snapshot(out, tmp_path / "b")
    assert status_object("n", probe_snapshot(again)) == status_object("n", probe_snapshot(snap))
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "host/opt/microsoft/ndv5-topo.xml" in names
    assert any(n.startswith("host/sys/bus/pci/devices/") for n in names)


def test_gather_archives_are_deterministic(tmp_path: Path) -> None:
    snap = gather.open_snapshot(FIXTURES / "cpu-only.tar.gz", tmp_path / "a")
    from agent.host import HostReader
    from agent.nvml import SnapshotNvml
    from agent.probe import ProbeConfig, probe_node

    blobs = []
    for i in range(2):
        reader = HostReader(snap.root, record=True)
        probe_node(reader, SnapshotNvml(snap.nvml), ProbeConfig())
        assert reader.recording is not None
        gather.write(tmp_path / f"{i}.tar.gz", reader.recording, {"node": "x", "nvml": snap.nvml})
        blobs.append((tmp_path / f"{i}.tar.gz").read_bytes())
    assert blobs[0] == blobs[1]


def test_probe_cli_from_snapshot_prints_table_and_labels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["probe", "--from", str(FIXTURES / "hgx-h100.tar.gz"), "-o", "table"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:3] == ["GPU0", "X", "NV18"]
    assert "NIC Legend:" in out and "NVMe Legend:" in out
    assert main(["probe", "--from", str(FIXTURES / "hgx-h100.tar.gz"), "-o", "labels"]) == 0
    labels = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert labels["gpufabric.io/rdma-ports"] == "8"  # eight rails; mlx5_1 is front-end


def test_probe_cli_rejects_a_file_that_is_not_a_gather_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "x.tar.gz"
    bogus.write_bytes(b"not a tarball")
    assert main(["probe", "--from", str(bogus)]) == 2
    assert "cannot read gather archive" in capsys.readouterr().err


def test_gather_cli_on_a_fixture_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = gather.open_snapshot(FIXTURES / "esc8000a-pcie.tar.gz", tmp_path / "a")
    out = tmp_path / "g.tar.gz"
    assert main(["gather", "--host-root", str(snap.root), "--nvml", "none", "-o", str(out)]) == 0
    assert main(["probe", "--from", str(out), "-o", "labels"]) == 0
    assert "gpufabric.io/gpu-count=4" in capsys.readouterr().out


def test_probe_cli_stamps_conditions_with_the_current_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    import yaml

    assert main(["probe", "--from", str(FIXTURES / "cpu-only.tar.gz"), "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    stamp = doc["status"]["conditions"][0]["lastTransitionTime"]
    assert stamp.startswith(time.strftime("%Y-", time.gmtime()))
    assert doc["metadata"]["name"] == "cpu-only"

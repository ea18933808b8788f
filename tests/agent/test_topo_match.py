"""An NCCL topology file is used for locality only when it describes this node (issue 17 item 4);
a file that cannot be read is one line and exit 2 for `probe`, a False condition for `run`; with
`--from`, `--nccl-topo` names a file of this machine to try against the snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.__main__ import main
from agent.gather import Snapshot
from agent.host import HostReader
from agent.nvml import NullNvml
from agent.probe import ProbeConfig, probe_node
from agent.probes import nccl_topo
from agent.topo_match import mismatch
from tests.agent.test_bad_input import small_host
from tests.agent.test_cli import one_line_error
from tests.conftest import FIXTURES, probe_snapshot

REF = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-topo"
NDV4 = str(FIXTURES / "azure-ndv4.tar.gz")


def status_of(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["probe", *args, "-o", "json"]) == 0
    status: dict[str, Any] = json.loads(capsys.readouterr().out)["status"]
    return status


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_another_machines_file_is_refused_and_sysfs_used(
    snapshots: dict[str, Snapshot], capsys: pytest.CaptureFixture[str]
) -> None:
    # The NDv5 file on an NDv4 VM: the NICs' bus ids match, three GPUs' do not. Used anyway, it
    # marked three rails "not compute fabric" (5 usable ports, NCCL_IB_HCA lost three rails).
    ndv5_file = snapshots["azure-ndv5"].root / "opt/microsoft/ndv5-topo.xml"
    status = status_of(capsys, "--from", NDV4, "--nccl-topo", str(ndv5_file))
    pcie = condition(status, "PcieProbed")
    said = pcie["message"]
    assert (pcie["status"], pcie["reason"]) == ("False", "TopologyFileMismatch")
    assert f"NCCL topology file refused: {ndv5_file} does not describe this node" in said
    assert "its GPUs 0008:00:00.0, 0009:00:00.0, 000a:00:00.0 are not this node's" in said
    assert "this node's GPUs 0004:00:00.0, 000d:00:00.0, 000e:00:00.0 are not in it" in said
    assert status["summary"]["rdmaPorts"] == 8
    assert status["summary"]["usableHcas"] == [f"mlx5_ib{i}" for i in range(8)]
    # Locality from sysfs, exactly as with no file at all.
    sysfs = probe_snapshot(snapshots["azure-ndv4"], use_topo=False).status.to_dict()
    assert status["gpus"] == sysfs["gpus"] and status["hcas"] == sysfs["hcas"]


def test_a_file_of_this_machine_tried_against_a_snapshot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    own = status_of(capsys, "--from", NDV4)  # the snapshot's own /opt/microsoft/ndv4-topo.xml
    outside = REF / "ndv4-topo.xml"  # not in the snapshot: read from this machine
    tried = status_of(capsys, "--from", NDV4, "--nccl-topo", str(outside))
    pcie = condition(tried, "PcieProbed")
    assert pcie["status"] == "True"
    assert f"locality from NCCL topology {outside}" in pcie["message"]
    assert tried["gpus"] == own["gpus"] and tried["hcas"] == own["hcas"]


@pytest.mark.parametrize("kind", ["missing", "directory", "garbage", "empty"])
def test_an_unusable_file_is_one_line_for_probe_and_a_condition_for_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    host = tmp_path / "host"
    b = small_host(host)
    b.file("/opt/garbage.xml", "\x00\x01 not xml")
    b.file("/opt/empty.xml", "")
    (host / "opt" / "directory.xml").mkdir()
    path = f"/opt/{kind}.xml"
    why = {
        "missing": "no such file",
        "directory": "a directory where a file should be",
        "garbage": "not valid XML",
        "empty": "not valid XML",
    }[kind]
    assert main(["probe", "--host-root", str(host), "--nvml", "none", "--nccl-topo", path]) == 2
    one_line_error(capsys, f"--nccl-topo {path}: {why}")
    # --from: the path is this machine's; the same file read from outside the snapshot.
    outside = str(host) + path
    assert main(["probe", "--from", NDV4, "--nccl-topo", outside]) == 2
    one_line_error(capsys, f"--nccl-topo {outside}: ")
    # run: the daemon keeps going on sysfs and says why in a False condition.
    result = probe_node(HostReader(host), NullNvml(), ProbeConfig(nccl_topo=path))
    pcie = next(c for c in result.status.conditions if c.type == "PcieProbed")
    assert (pcie.status, pcie.reason) == ("False", "TopologyFileInvalid")
    assert f"NCCL topology file refused: {path}: {why}" in pcie.message


def test_what_a_file_must_share_with_the_node() -> None:
    # p5.48xl-topo.xml names no GPU: only its NICs (and their switches) are compared.
    p5 = nccl_topo.parse((REF / "p5.48xl-topo.xml").read_text())
    assert not p5.gpu_ids and "0000:4f:00.0" in p5.endpoints
    nics = sorted(p5.endpoints)
    assert mismatch(p5, ["0000:53:00.0"], nics, lambda bus: False) == ""
    missing = mismatch(p5, [], nics[1:], lambda bus: False)
    assert missing.endswith(f"its devices {nics[0]} are not on this node")
    assert "GPUs" not in missing  # nothing to say about GPUs the file leaves out
    # oke-BM.GPU4.8.xml names each dual-port NIC once, at function 0 (NCCL's merged id): a node
    # whose RDMA devices are the second ports (0000:0c:00.1) has them.
    oke = nccl_topo.parse((REF / "oke-BM.GPU4.8.xml").read_text())
    gpus = sorted(oke.gpu_ids)
    second_ports = [bus[:-1] + "1" for bus in oke.endpoints - oke.gpu_ids]
    assert len(second_ports) == 8
    assert mismatch(oke, gpus, second_ports, lambda bus: False) == ""
    assert "this node's GPUs 0000:ff:00.0 are not in it" in mismatch(
        oke, [*gpus, "0000:ff:00.0"], second_ports, lambda bus: False
    )


def test_the_condition_names_the_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # DERIVED from ndv4-topo.xml: its second <cpu> relabelled numaid 0 (two host bridges).
    topo = tmp_path / "ndv4-two-bridges.xml"
    topo.write_text((REF / "ndv4-topo.xml").read_text().replace('numaid="1"', 'numaid="0"'))
    pcie = condition(status_of(capsys, "--from", NDV4, "--nccl-topo", str(topo)), "PcieProbed")
    assert pcie["status"] == "True"
    assert "several <cpu> with numaid 0 (host bridges)" in pcie["message"]
    assert pcie["message"].count(str(topo)) == 1  # was "(locality from ... FILE); FILE: ..."

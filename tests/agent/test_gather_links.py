"""gather then probe --from on an ordinary CUDA host: absolute links, links out of the root, loops."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from agent import gather
from agent.__main__ import main
from agent.gather import portable_target
from tests.agent.test_host_reader import build_host


def _gather_and_replay(
    root: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, object], dict[str, object]]:
    assert main(["probe", "--host-root", str(root), "--nvml", "none", "-o", "json"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert main(["gather", "--host-root", str(root), "--nvml", "none", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["probe", "--from", str(out), "-o", "json", "--nvml", "none"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    return live, replayed


def _strip_times(doc: dict[str, object]) -> object:
    status = doc["status"]
    assert isinstance(status, dict)
    for cond in status["conditions"]:
        cond.pop("lastTransitionTime", None)
    return status


def test_absolute_cuda_link_replays_and_extracts_safely(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /usr/local/cuda -> /usr/local/cuda-12.4 (absolute) as the CUDA installer makes it.
    build_host(tmp_path / "host")
    out = tmp_path / "g.tar.gz"
    live, replayed = _gather_and_replay(tmp_path / "host", out, capsys)
    assert _strip_times(replayed) == _strip_times(live)
    storage = replayed["status"]["gpudirect"]["storage"]  # type: ignore[index]
    assert storage["configPath"] == "/usr/local/cuda/gds/cufile.json"
    with tarfile.open(out) as tar:
        link = tar.getmember("host/usr/local/cuda")
        assert link.issym() and link.linkname == "cuda-12.4"
        meta = json.load(tar.extractfile("gather.json"))  # type: ignore[arg-type]
        tar.extractall(tmp_path / "x", filter="data")  # refused before: absolute link
    assert meta["links"]["/usr/local/cuda"] == "/usr/local/cuda-12.4"
    assert (tmp_path / "x/host/usr/local/cuda/gds/cufile.json").is_file()


def test_link_escaping_the_root_is_kept_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_host(tmp_path / "host")
    escape = tmp_path / "host/etc/cufile.json"
    escape.parent.mkdir(parents=True)
    escape.symlink_to("../../../../../../../outside/cufile.json")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/cufile.json").write_text("{}")  # must never be read
    out = tmp_path / "g.tar.gz"
    live, replayed = _gather_and_replay(tmp_path / "host", out, capsys)
    assert _strip_times(replayed) == _strip_times(live)
    with tarfile.open(out) as tar:
        meta = json.load(tar.extractfile("gather.json"))  # type: ignore[arg-type]
        assert tar.getmember("host/etc/cufile.json").linkname == "../outside/cufile.json"
        tar.extractall(tmp_path / "x", filter="data")
    assert meta["links"]["/etc/cufile.json"] == "../../../../../../../outside/cufile.json"


def test_link_loop_survives_gather_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_host(tmp_path / "host")
    cuda = tmp_path / "host/usr/local/cuda"
    cuda.unlink()
    cuda.symlink_to("/usr/local/cuda-loop")
    (tmp_path / "host/usr/local/cuda-loop").symlink_to("cuda")
    out = tmp_path / "g.tar.gz"
    live, replayed = _gather_and_replay(tmp_path / "host", out, capsys)
    assert _strip_times(replayed) == _strip_times(live)
    with tarfile.open(out) as tar:
        assert tar.getmember("host/usr/local/cuda").linkname == "cuda-loop"
        assert tar.getmember("host/usr/local/cuda-loop").linkname == "cuda"
        tar.extractall(tmp_path / "x", filter="data")


@pytest.mark.parametrize(
    ("link", "target", "portable"),
    [
        ("/usr/local/cuda", "/usr/local/cuda-12.4", "cuda-12.4"),
        (
            "/sys/bus/pci/devices/0000:3b:00.0",
            "../../../devices/pci0000:3a/0000:3b:00.0",
            "../../../devices/pci0000:3a/0000:3b:00.0",
        ),
        ("/etc/x", "../../../../secret", "../secret"),
        ("/a/b", "/", ".."),
        ("/loop", "loop", "loop"),
    ],
)
def test_portable_target(link: str, target: str, portable: str) -> None:
    assert portable_target(link, target) == portable


def test_snapshot_in_memory_equals_the_unpacked_one(tmp_path: Path) -> None:
    from tests.conftest import FIXTURES, HOSTS, probe_snapshot

    for host in HOSTS:
        archive = FIXTURES / f"{host}.tar.gz"
        on_disk = gather.open_snapshot(archive, tmp_path / host)
        in_memory = gather.load(archive)
        assert in_memory.tree is not None
        from agent.assemble import Options
        from agent.nvml import SnapshotNvml
        from agent.probe import ProbeConfig, probe_node

        cfg = ProbeConfig(nccl_topo=in_memory.options.get("ncclTopo"))
        memory = probe_node(in_memory.reader(), SnapshotNvml(in_memory.nvml), cfg, Options())
        disk = probe_node(on_disk.reader(), SnapshotNvml(on_disk.nvml), cfg, Options())
        assert yaml.safe_dump(memory.status.to_dict()) == yaml.safe_dump(disk.status.to_dict())
        assert probe_snapshot(on_disk).status.summary == memory.status.summary


def test_archive_written_with_an_absolute_link_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Archives gathered before links were rewritten hold /usr/local/cuda -> /usr/local/cuda-12.4
    # as is; tar's safe extraction refused them. Read in memory, the link resolves in the root.
    build_host(tmp_path / "host")
    out = tmp_path / "g.tar.gz"
    gather_args = ["--host-root", str(tmp_path / "host"), "--nvml", "none", "-o", str(out)]
    assert main(["gather", *gather_args]) == 0
    old = tmp_path / "old.tar.gz"
    with tarfile.open(out) as src, tarfile.open(old, "w:gz") as dst:
        for member in src.getmembers():
            if member.name == "host/usr/local/cuda":
                member.linkname = "/usr/local/cuda-12.4"
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    with tarfile.open(old) as tar, pytest.raises(tarfile.AbsoluteLinkError):
        tar.extractall(tmp_path / "refused", filter="data")
    capsys.readouterr()
    assert main(["probe", "--from", str(old), "-o", "json", "--nvml", "none"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"]["gpudirect"]["storage"]["configPath"] == "/usr/local/cuda/gds/cufile.json"

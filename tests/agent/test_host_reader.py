"""Hostile host trees: the reader never blocks, never reads outside --host-root, never raises, and
host data that is not as the kernel writes it shows in the section's condition."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import threading
from pathlib import Path

import pytest

from agent.assemble import Options
from agent.host import DiskTree, HostReader
from agent.nvml import NullNvml
from agent.output import status_object
from agent.probe import ProbeConfig, probe_node
from tests.fakes.sysfs import HostBuilder, Port

SECRET = "MT4129SECRET"  # would pass as an hca_type: a leak cannot hide behind validation
GPU = "0000:3b:00.0"
NIC = "0000:3c:00.0"
NVME = "0000:3d:00.0"


def build_host(root: Path) -> HostBuilder:
    b = HostBuilder(root)
    for bdf, vendor, device, klass in (
        (GPU, 0x10DE, 0x2330, 0x030200),
        (NIC, 0x15B3, 0x1021, 0x020700),
        (NVME, 0x144D, 0xA80A, 0x010802),
    ):
        b.pci(
            bdf,
            root="pci0000:3a",
            bridges=("0000:3a:00.0",),
            vendor=vendor,
            device=device,
            klass=klass,
            numa=0,
            cpulist="0-7",
        )
    b.hca(
        "mlx5_0",
        NIC,
        hca_type="MT4129",
        board_id="MT_0000000838",
        fw="28.39.1002",
        node_guid="946d:ae03:00cd:e72c",
        ports=(Port(),),
        netdevs=("ibp60s0",),
    )
    b.nvme("nvme0", NVME)
    b.module("nvidia_peermem")
    b.module("nvidia_fs", "2.17.5")
    b.file("/usr/local/cuda-12.4/gds/cufile.json", '{"properties": {"use_pci_p2pdma": true}}')
    (root / "usr/local/cuda").symlink_to("/usr/local/cuda-12.4")
    b.file("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module  550\n")
    b.file("/proc/sys/kernel/osrelease", "6.5.0-1018-nvidia\n")
    return b


class WatchedTree(DiskTree):
    """The real disk tree, remembering every byte it handed out."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.handed_out: list[bytes] = []

    def read(self, path: str, limit: int) -> bytes:
        data = super().read(path, limit)
        self.handed_out.append(data)
        return data


def probe_json(reader: HostReader) -> dict[str, object]:
    result = probe_node(reader, NullNvml(), ProbeConfig(), Options())
    return status_object("n", result)


def conditions_of(doc: dict[str, object]) -> dict[str, tuple[str, str]]:
    status = doc["status"]
    assert isinstance(status, dict)
    return {c["type"]: (c["status"], c["message"]) for c in status["conditions"]}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file and directory next to (outside) the host root."""
    secret_dir = tmp_path / "outside"
    (secret_dir / "ports/1").mkdir(parents=True)
    for name in ("secret", "hca_type", "ports/1/state", "ports/1/rate"):
        (secret_dir / name).write_text(SECRET + "\n")
    return secret_dir


def test_fifo_where_an_attribute_should_be_is_noted_not_waited_on(tmp_path: Path) -> None:
    b = build_host(tmp_path / "host")
    numa = tmp_path / "host" / b.paths[GPU].lstrip("/") / "numa_node"
    numa.unlink()
    os.mkfifo(numa)
    result: dict[str, object] = {}
    worker = threading.Thread(
        target=lambda: result.update(probe_json(HostReader(tmp_path / "host"))), daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the probe blocked on a FIFO"
    status, message = conditions_of(result)["PcieProbed"]
    assert status == "False"
    assert f"/sys/bus/pci/devices/{GPU}/numa_node: not a regular file" in message


@pytest.mark.parametrize(
    "link",
    ["absolute", "relative"],
)
def test_symlink_in_the_last_component_stays_inside_the_root(
    tmp_path: Path, outside: Path, link: str
) -> None:
    b = build_host(tmp_path / "host")
    hca = tmp_path / "host" / b.paths[NIC].lstrip("/") / "infiniband/mlx5_0"
    target = hca / "hca_type"
    target.unlink()
    depth = len(target.relative_to(tmp_path).parts) - 1
    target.symlink_to(
        outside / "secret" if link == "absolute" else "../" * depth + "outside/secret"
    )
    tree = WatchedTree(tmp_path / "host")
    doc = probe_json(HostReader(tree=tree))
    assert SECRET not in json.dumps(doc)
    assert all(SECRET.encode() not in data for data in tree.handed_out)
    status, message = conditions_of(doc)["RdmaProbed"]
    assert status == "False" and "hca_type: link leads nowhere inside the host root" in message


def _components(host_path: str) -> list[str]:
    parts = host_path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


# Every position on the way to a port's state file, replaced by a link out of the root.
PORT_STATE = "/sys/class/infiniband/mlx5_0/ports/1/state"


@pytest.mark.parametrize("position", range(len(PORT_STATE.strip("/").split("/"))))
@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_links_out_of_the_root_at_every_position_are_never_followed(
    tmp_path: Path, outside: Path, position: int, kind: str
) -> None:
    build_host(tmp_path / "host")
    reader = HostReader(tmp_path / "host")
    canonical = reader.resolve(PORT_STATE)
    assert canonical is not None
    for swap in (_components(PORT_STATE)[position], _components(canonical)[position]):
        real = tmp_path / "host" / swap.lstrip("/")
        if not (real.exists() or real.is_symlink()):
            continue
        if real.is_dir() and not real.is_symlink():
            shutil.rmtree(real)
        else:
            real.unlink()
        rest = "/".join(PORT_STATE.split("/")[position + 2 :])
        aim = outside if rest.startswith("ports") or not rest else outside / "secret"
        depth = len(real.relative_to(tmp_path).parts) - 1
        real.symlink_to(aim if kind == "absolute" else Path("../" * depth + "outside"))
        tree = WatchedTree(tmp_path / "host")
        doc = probe_json(HostReader(tree=tree))
        assert SECRET not in json.dumps(doc), swap
        assert all(SECRET.encode() not in data for data in tree.handed_out), swap
        build_host(tmp_path / "fresh")
        shutil.rmtree(tmp_path / "host")
        (tmp_path / "fresh").rename(tmp_path / "host")


class DeniedTree(DiskTree):
    """chmod 000 on a directory, as a non-root agent sees it (tests run as root, where chmod
    does not deny anything): every access below it fails with EACCES."""

    def __init__(self, root: Path, denied: str) -> None:
        super().__init__(root)
        self.denied = denied

    def _check(self, path: str) -> None:
        if path.startswith(self.denied + "/"):
            raise PermissionError(errno.EACCES, "Permission denied", path)

    def kind(self, path: str) -> str | None:
        self._check(path)
        return super().kind(path)

    def read(self, path: str, limit: int) -> bytes:
        self._check(path)
        return super().read(path, limit)

    def listdir(self, path: str) -> dict[str, str]:
        if path == self.denied:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        self._check(path)
        return super().listdir(path)


@pytest.mark.parametrize(
    ("denied", "condition"),
    [
        ("/sys/module/nvidia_fs", "GdsProbed"),
        ("/sys/class/infiniband", "RdmaProbed"),
        ("/sys/module", "RdmaProbed"),
    ],
)
def test_unreadable_directory_is_a_condition_not_an_exception(
    tmp_path: Path, denied: str, condition: str
) -> None:
    build_host(tmp_path)
    doc = probe_json(HostReader(tree=DeniedTree(tmp_path, denied)))
    status, message = conditions_of(doc)[condition]
    assert status == "False"
    assert denied in message and "Permission denied" in message


def test_chmod_000_directory_on_disk(tmp_path: Path) -> None:
    # The real thing; as root the kernel ignores the mode, so only the absence of a crash counts.
    build_host(tmp_path)
    (tmp_path / "sys/module").chmod(0)
    try:
        doc = probe_json(HostReader(tmp_path))
    finally:
        (tmp_path / "sys/module").chmod(0o755)
    assert conditions_of(doc)["PcieProbed"][0] == "True"


@pytest.mark.parametrize(
    ("attribute", "garbage", "condition"),
    [
        ("/sys/class/infiniband/mlx5_0/hca_type", "\x00\xff\x10garbage", "RdmaProbed"),
        ("/sys/class/infiniband/mlx5_0/ports/1/link_layer", "Infiniband?", "RdmaProbed"),
        ("/sys/class/infiniband/mlx5_0/node_guid", "946dae0300cde72c", "RdmaProbed"),
        ("/sys/class/infiniband/mlx5_0/ports/1/state", "ACTIVE", "RdmaProbed"),
        (f"/sys/bus/pci/devices/{GPU}/numa_node", "zero", "PcieProbed"),
        (f"/sys/bus/pci/devices/{GPU}/current_link_speed", "fast", "PcieProbed"),
        (f"/sys/bus/pci/devices/{GPU}/local_cpulist", "0-7\x00x", "PcieProbed"),
    ],
)
def test_values_not_as_the_kernel_writes_them_mark_the_condition(
    tmp_path: Path, attribute: str, garbage: str, condition: str
) -> None:
    build_host(tmp_path)
    pristine = probe_json(HostReader(tmp_path))
    canonical = HostReader(tmp_path).resolve(attribute)
    assert canonical is not None
    (tmp_path / canonical.lstrip("/")).write_text(garbage + "\n")
    doc = probe_json(HostReader(tmp_path))
    assert doc != pristine
    status, message = conditions_of(doc)[condition]
    assert status == "False" and f"{attribute}: not" in message, message


MUTATIONS = ("garbage", "fifo", "device", "abs-link", "rel-link", "loop", "dir", "delete")


def _entries(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        out.extend(Path(dirpath) / n for n in dirnames + filenames)
    return sorted(out)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _restore(path: Path, pristine: Path, live: Path) -> None:
    source = pristine / path.relative_to(live)
    _remove(path)
    if source.is_symlink():
        path.symlink_to(os.readlink(source))
    elif source.is_dir():
        shutil.copytree(source, path, symlinks=True)
    else:
        shutil.copy2(source, path)


def _mutate(rng: random.Random, path: Path, kind: str, live: Path, outside: Path) -> None:
    _remove(path)
    depth = len(path.relative_to(live.parent).parts) - 1
    if kind == "garbage":
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        try:
            os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero: endless
        except PermissionError:
            os.mkfifo(path)
    elif kind == "abs-link":
        path.symlink_to(rng.choice([outside, outside / "secret", Path("/etc/passwd")]))
    elif kind == "rel-link":
        path.symlink_to(
            "../" * (depth + rng.randrange(0, 3)) + rng.choice(["outside", "outside/secret"])
        )
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dir":
        path.mkdir()


def _data(doc: dict[str, object]) -> dict[str, object]:
    status = doc["status"]
    assert isinstance(status, dict)
    return {k: v for k, v in status.items() if k != "conditions"}


def test_a_thousand_garbled_trees(tmp_path: Path, outside: Path) -> None:
    """0 hangs, 0 reads outside the root, 0 exceptions; a garbled value never passes silently.

    Each case swaps one entry of a small real-layout host for garbage bytes, a FIFO, a device
    node, an absolute or `../` link out of the root, a link loop, a directory, or nothing."""
    pristine_root = tmp_path / "pristine"
    build_host(pristine_root)
    live = tmp_path / "host"
    shutil.copytree(pristine_root, live, symlinks=True)
    baseline = probe_json(HostReader(live))
    entries = _entries(live)
    files = {p for p in entries if p.is_file() and not p.is_symlink()}
    rng = random.Random(11)
    silent: list[str] = []
    failures: list[str] = []

    def run() -> None:
        for case in range(1000):
            path = rng.choice(entries)
            kind = MUTATIONS[case % len(MUTATIONS)]
            _mutate(rng, path, kind, live, outside)
            try:
                tree = WatchedTree(live)
                doc = probe_json(HostReader(tree=tree))
                if SECRET in json.dumps(doc) or any(SECRET.encode() in d for d in tree.handed_out):
                    failures.append(f"{kind} {path}: read outside the root")
                # A value file made unreadable or garbled must show in a condition; a deleted
                # file or a whole directory gone is a host that lacks the thing.
                if (
                    kind != "delete"
                    and path in files
                    and _data(doc) != _data(baseline)
                    and conditions_of(doc) == conditions_of(baseline)
                ):
                    silent.append(f"{kind} {path.relative_to(live)}")
            except Exception as err:  # noqa: BLE001 - collected and reported below
                failures.append(f"{kind} {path}: {type(err).__name__}: {err}")
            finally:
                _restore(path, pristine_root, live)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=600)
    assert not worker.is_alive(), "a garbled tree made the probe hang"
    assert failures == []
    assert silent == [], sorted(set(silent))


def test_every_read_is_bounded(tmp_path: Path) -> None:
    from agent.host import MAX_READ

    build_host(tmp_path)
    numa = f"/sys/bus/pci/devices/{GPU}/numa_node"
    canonical = HostReader(tmp_path).resolve(numa)
    assert canonical is not None
    (tmp_path / canonical.lstrip("/")).write_bytes(b"0" * (MAX_READ + 10))
    reader = HostReader(tmp_path)
    assert reader.read(numa) is None
    assert reader.issues == [f"{numa}: larger than {MAX_READ} bytes"]

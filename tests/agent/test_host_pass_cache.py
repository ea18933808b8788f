"""The reader's per-pass cache: within one probe pass every host entry is checked and every link
read once, however many paths cross it; the next pass forgets all of it and sees the host anew."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from agent.assemble import Options
from agent.gather import Snapshot
from agent.host import DiskTree, HostReader
from agent.nvml import SnapshotNvml
from agent.probe import ProbeConfig, probe_node
from tests.agent.test_host_reader import GPU, build_host, probe_json
from tests.conftest import FIXED_NOW


class CountingTree(DiskTree):
    """The real disk tree, counting the lstat and readlink calls per host path."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.kinds: Counter[str] = Counter()
        self.links: Counter[str] = Counter()

    def kind(self, path: str) -> str | None:
        self.kinds[path] += 1
        return super().kind(path)

    def readlink(self, path: str) -> str:
        self.links[path] += 1
        return super().readlink(path)


def test_one_pass_checks_each_entry_and_reads_each_link_once(
    snapshots: dict[str, Snapshot],
) -> None:
    snap = snapshots["hgx-h100"]
    tree = CountingTree(snap.root)
    reader = HostReader(tree=tree)
    nvml, cfg = SnapshotNvml(snap.nvml), ProbeConfig()
    # One clock for both passes: the default (now) differs when they straddle a second.
    opts = Options(now=FIXED_NOW)
    first = probe_node(reader, nvml, cfg, opts)
    # 80 PCI functions, 12 HCAs, 8 NVMe: the links are crossed by many paths (class, vendor,
    # device/net, ...), the directories of their targets by more.
    assert len(tree.links) >= 100
    assert max(tree.kinds.values()) == 1, tree.kinds.most_common(3)
    assert max(tree.links.values()) == 1, tree.links.most_common(3)
    second = probe_node(reader, nvml, cfg, opts)
    assert second == first
    # Nothing carried over: the second pass looked at every entry and link again.
    assert set(tree.kinds.values()) == {2}
    assert set(tree.links.values()) == {2}


def test_a_link_swapped_between_passes_is_seen_by_the_next_pass(tmp_path: Path) -> None:
    host = tmp_path / "host"
    b = build_host(host)
    reader = HostReader(host)  # one reader for both passes, as the daemon keeps it
    before = probe_json(reader)["status"]
    assert isinstance(before, dict)
    assert (before["gpus"][0]["pcieRoot"], before["gpus"][0]["numaNode"]) == ("pci0000:3a", 0)
    # The GPU moves to another root complex and NUMA node: same bus id, another sysfs place.
    moved = "/sys/devices/pci0000:99/0000:99:00.0/" + GPU
    shutil.copytree(host / b.paths[GPU].lstrip("/"), host / moved.lstrip("/"))
    (host / moved.lstrip("/") / "numa_node").write_text("1\n")
    b.link(f"/sys/bus/pci/devices/{GPU}", moved)
    after = probe_json(reader)["status"]
    assert isinstance(after, dict)
    assert (after["gpus"][0]["pcieRoot"], after["gpus"][0]["numaNode"]) == ("pci0000:99", 1)

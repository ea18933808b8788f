"""The agent's host mounts never write to the host, and still show the agent what it reads.

kubelet creates a missing hostPath of type FileOrCreate (an empty file), DirectoryOrCreate or ""
(an empty directory; the container runtime makes untyped bind sources), and refuses to start the
pod when a Directory/File/Socket/CharDevice/BlockDevice path is missing
(kubernetes.io/docs/concepts/storage/volumes/#hostpath-volume-types). `mount_like_kubelet` applies
exactly those rules to a node tree, then copies each mount into a container tree, so the agent can
be probed as it runs in the pod.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.assemble import Options
from agent.gather import open_snapshot
from agent.host import HostReader
from agent.nvml import SnapshotNvml
from agent.probe import ProbeConfig, probe_node
from tests.conftest import FIXED_NOW, FIXTURES
from tests.manifests import INSTALLS, find, render

MUST_EXIST = {"Directory", "File", "Socket", "CharDevice", "BlockDevice"}
# Present on every Linux node a GPU agent runs on (systemd-udevd included).
ALWAYS_ON_A_NODE = ("sys", "proc/driver", "proc/sys/kernel", "etc", "usr", "run/udev")


def pod_templates(docs: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for d in docs:
        spec = d.get("spec") or {}
        if d["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            out.append((f"{d['kind']}/{d['metadata']['name']}", spec["template"]["spec"]))
    return out


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "default")
def test_no_host_mount_can_create_or_write_anything(components: tuple[str, ...]) -> None:
    for where, pod in pod_templates(render(*components)):
        host = {v["name"]: v["hostPath"] for v in pod.get("volumes", []) if "hostPath" in v}
        for name, source in host.items():
            assert source.get("type") in MUST_EXIST, (where, name, source)
        for c in pod.get("initContainers", []) + pod["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] in host:
                    assert m.get("readOnly") is True, (where, m)
                    # submounts too (cgroupfs, debugfs under /sys) where the runtime can
                    assert m.get("recursiveReadOnly") in ("IfPossible", "Enabled"), (where, m)
                    assert "subPath" not in m and "subPathExpr" not in m, (where, m)  # created
                    assert m.get("mountPropagation", "None") != "Bidirectional", (where, m)


def tree(root: Path) -> dict[str, str]:
    """Every path under root with its type and content (or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = "file:" + hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def mount_like_kubelet(node: Path, pod: dict[str, Any], container: Path) -> None:
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in pod["containers"][0]["volumeMounts"]:
        source = volumes[m["name"]].get("hostPath")
        if source is None:
            continue
        # The host resolves its own symlinks (/usr/local/cuda -> /etc/alternatives/cuda -> ...).
        canonical = HostReader(node).resolve(source["path"])
        assert canonical is not None, source
        path = node / canonical.lstrip("/")
        kind = source.get("type", "")
        if not path.exists():
            if kind in MUST_EXIST:
                raise AssertionError(f"{source['path']} is missing: the pod would not start")
            if kind == "FileOrCreate":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch(mode=0o644)
            else:  # DirectoryOrCreate, or untyped
                path.mkdir(parents=True)
        target = container / m["mountPath"].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, target, symlinks=True)
        else:
            shutil.copy2(path, target)


def ubuntu_cuda_layout(node: Path) -> None:
    """/usr/local/cuda -> /etc/alternatives/cuda -> /usr/local/cuda-12.4, as the CUDA packages
    install it on Ubuntu (absolute links); the fixture has the directory in place."""
    local = node / "usr" / "local"
    (local / "cuda").rename(local / "cuda-12.4")
    (node / "etc" / "alternatives").mkdir(parents=True)
    (node / "etc" / "alternatives" / "cuda").symlink_to("/usr/local/cuda-12.4")
    (local / "cuda").symlink_to("/etc/alternatives/cuda")


def test_agent_pod_sees_the_nodes_cufile_config_and_leaves_the_node_untouched(
    tmp_path: Path,
) -> None:
    # esc8000a-pcie: a valid /usr/local/cuda/gds/cufile.json, no /etc/cufile.json -> compat.
    snap = open_snapshot(FIXTURES / "esc8000a-pcie.tar.gz", tmp_path / "snap")
    node = snap.root
    ubuntu_cuda_layout(node)
    for d in ALWAYS_ON_A_NODE:
        (node / d).mkdir(parents=True, exist_ok=True)
    (node / "etc" / "hostname").write_text("gpu-1\n")  # /etc is never empty on a node

    def cufile(root: Path) -> str:
        out = probe_node(
            HostReader(root),
            SnapshotNvml(snap.nvml),
            ProbeConfig(),
            Options(now=FIXED_NOW),
        )
        return out.status.summary.cufile

    on_the_node = cufile(node)
    assert on_the_node == "compat"
    before = tree(node)
    ds = find(render(), "DaemonSet", "gpufabric-agent")
    pod = ds["spec"]["template"]["spec"]
    mount_like_kubelet(node, pod, tmp_path / "container")
    assert tree(node) == before, "starting the agent pod changed the node"
    assert not (node / "etc" / "cufile.json").exists()
    args = pod["containers"][0]["args"]
    assert "--host-root=/host" in args
    assert cufile(tmp_path / "container" / "host") == on_the_node

from __future__ import annotations

from pathlib import Path

import pytest

from agent.assemble import Assembled, Options
from agent.gather import Snapshot, open_snapshot
from agent.host import HostReader
from agent.nvml import SnapshotNvml
from agent.probe import ProbeConfig, probe_node

FIXTURES = Path(__file__).parent / "fixtures" / "hosts"
HOSTS = sorted(p.name.removesuffix(".tar.gz") for p in FIXTURES.glob("*.tar.gz"))
FIXED_NOW = "2026-01-01T00:00:00Z"


def probe_snapshot(snap: Snapshot, *, use_topo: bool = True, **config: object) -> Assembled:
    opts = snap.options
    cfg = ProbeConfig(
        nccl_topo=opts.get("ncclTopo") if use_topo else None,
        cufile_env_path=opts.get("cufileEnvPath"),
        **config,  # type: ignore[arg-type]
    )
    return probe_node(
        HostReader(snap.root),
        SnapshotNvml(snap.nvml),
        cfg,
        Options(now=FIXED_NOW, hca_exclude=cfg.hca_exclude, hca_include=cfg.hca_include),
    )


@pytest.fixture(scope="session")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Snapshot]:
    out = {}
    for host in HOSTS:
        out[host] = open_snapshot(FIXTURES / f"{host}.tar.gz", tmp_path_factory.mktemp(host))
    return out


@pytest.fixture(scope="session")
def probed(snapshots: dict[str, Snapshot]) -> dict[str, Assembled]:
    return {host: probe_snapshot(snap) for host, snap in snapshots.items()}

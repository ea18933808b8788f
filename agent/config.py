"""The daemon's frozen configuration, built from the command line (agent/cli.py)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.cli import FORMATS, METRICS_PORT, build_parser, parse_duration

__all__ = ["FORMATS", "RunConfig", "build_parser", "parse_duration"]


@dataclass(frozen=True, slots=True)
class RunConfig:
    node_name: str
    host_root: str = "/"
    nvml: str = "auto"
    resync_seconds: float = 300.0
    debounce_seconds: float = 2.0
    metrics_port: int = METRICS_PORT  # 0: no metrics endpoint
    kubeconfig: str | None = None
    nccl_topo: str | None = None
    cufile_env_path: str | None = None
    hca_exclude: tuple[str, ...] = ()
    hca_include: tuple[str, ...] = ()
    udev: bool = True

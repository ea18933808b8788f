"""gpufabric-agent: argv -> configuration -> wired dependencies -> the chosen command."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path

from agent import gather
from agent.config import RunConfig, build_parser
from agent.hca_select import split_patterns
from agent.host import HostReader
from agent.nvml import NullNvml, NvmlBackend, NvmlUnavailable, SnapshotNvml, snapshot_of
from agent.output import render_as
from agent.probe import ProbeConfig, probe_node
from common.logs import configure

log = logging.getLogger("agent")


class _MissingPynvml:
    def __init__(self, message: str) -> None:
        self.message = message

    def inventory(self) -> object:
        raise NvmlUnavailable("LibraryNotFound", self.message)


def nvml_backend(mode: str) -> NvmlBackend:
    if mode == "none":
        return NullNvml()
    try:
        from agent.nvml.pynvml_backend import PynvmlBackend

        return PynvmlBackend()
    except ImportError as err:  # the agent extra is not installed
        return _MissingPynvml(f"nvidia-ml-py is not installed: {err}")  # type: ignore[return-value]


def probe_config(
    args: argparse.Namespace, meta_options: dict[str, object] | None = None
) -> ProbeConfig:
    meta_options = meta_options or {}
    topo = args.nccl_topo or meta_options.get("ncclTopo")
    cufile = args.cufile_env_path or meta_options.get("cufileEnvPath")
    return ProbeConfig(
        nccl_topo=str(topo) if topo else None,
        cufile_env_path=str(cufile) if cufile else None,
        hca_exclude=split_patterns(args.hca_exclude or meta_options.get("hcaExclude") or ()),  # type: ignore[arg-type]
        hca_include=split_patterns(args.hca_include or meta_options.get("hcaInclude") or ()),  # type: ignore[arg-type]
    )


def cmd_probe(args: argparse.Namespace) -> int:
    snap = gather.open_snapshot(Path(args.snapshot)) if args.snapshot else None
    try:
        if snap is not None:
            reader = HostReader(snap.root)
            backend: NvmlBackend = NullNvml() if args.nvml == "none" else SnapshotNvml(snap.nvml)
            config = probe_config(args, snap.options)
            node = str(snap.meta.get("node") or args.node_name)
        else:
            reader = HostReader(args.host_root)
            backend = nvml_backend(args.nvml)
            config = probe_config(args)
            node = args.node_name
        started = time.perf_counter()
        result = probe_node(reader, backend, config)
        log.debug("probe done", extra={"ms": round((time.perf_counter() - started) * 1000, 2)})
    finally:
        if snap is not None:
            snap.close()
    sys.stdout.write(render_as(args.output, node, result))
    return 0


def cmd_gather(args: argparse.Namespace) -> int:
    reader = HostReader(args.host_root, record=True)
    backend = nvml_backend(args.nvml)
    nvml = snapshot_of(backend)
    config = probe_config(args)
    result = probe_node(reader, SnapshotNvml(nvml), config)
    assert reader.recording is not None  # noqa: S101 - set by record=True above
    meta = {
        "node": args.node_name,
        "nvml": nvml,
        "options": {
            "ncclTopo": config.nccl_topo,
            "cufileEnvPath": config.cufile_env_path,
            "hcaExclude": list(config.hca_exclude),
            "hcaInclude": list(config.hca_include),
        },
        "provenance": args.note or f"gathered on {args.node_name} by gpufabric-agent gather",
    }
    count = gather.write(Path(args.output), reader.recording, meta)
    s = result.status.summary
    print(
        f"wrote {args.output}: {count} host entries, {s.gpu_count} GPUs, "
        f"{len(result.status.hcas)} RDMA devices; check it with "
        f"`gpufabric-agent probe --from {args.output} -o table`",
        file=sys.stderr,
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from agent.runner import run_forever

    config = RunConfig(
        node_name=args.node_name,
        host_root=args.host_root,
        nvml=args.nvml,
        resync_seconds=args.resync,
        debounce_seconds=args.debounce,
        metrics_port=args.metrics_port,
        kubeconfig=args.kubeconfig,
        nccl_topo=args.nccl_topo,
        cufile_env_path=args.cufile_env_path,
        hca_exclude=split_patterns(args.hca_exclude),
        hca_include=split_patterns(args.hca_include),
        udev=not args.no_udev,
    )
    return asyncio.run(run_forever(config, nvml_backend(args.nvml)))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_level, args.log_json)
    try:
        return {"probe": cmd_probe, "gather": cmd_gather, "run": cmd_run}[args.command](args)
    except gather.GatherError as err:
        print(f"gpufabric-agent: {err}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as err:
        print(f"gpufabric-agent: bad JSON: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

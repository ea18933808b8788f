"""gpufabric-agent: argv -> configuration -> wired dependencies -> the chosen command.

Only argparse and the parser are imported up front (`--help` stays fast); each command imports
what it needs. Every failure a user can cause ends as one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from typing import TYPE_CHECKING

from agent.cli import build_parser
from common.logs import configure

if TYPE_CHECKING:
    from agent.host import HostReader
    from agent.nvml import NvmlBackend
    from agent.probe import ProbeConfig

PROG = "gpufabric-agent"
EXTRA_HINT = "pip install 'gpufabric[agent]'"
OURS = ("agent", "common", "webhook")  # an ImportError of these is a bug, not a missing extra


class _MissingPynvml:
    def __init__(self, message: str) -> None:
        self.message = message

    def inventory(self) -> object:
        from agent.nvml import NvmlUnavailable

        raise NvmlUnavailable("LibraryNotFound", self.message)


def nvml_backend(mode: str) -> NvmlBackend:
    from agent.nvml import NullNvml

    if mode == "none":
        return NullNvml()
    try:
        from agent.nvml.pynvml_backend import PynvmlBackend

        return PynvmlBackend()
    except ImportError as err:  # the agent extra is not installed
        return _MissingPynvml(  # type: ignore[return-value]
            f"nvidia-ml-py is not installed ({err}); {EXTRA_HINT}"
        )


def probe_config(
    args: argparse.Namespace, meta_options: dict[str, object] | None = None
) -> ProbeConfig:
    from agent.hca_select import split_patterns
    from agent.probe import ProbeConfig

    meta_options = meta_options or {}
    topo = args.nccl_topo or meta_options.get("ncclTopo")
    cufile = args.cufile_env_path or meta_options.get("cufileEnvPath")
    return ProbeConfig(
        nccl_topo=str(topo) if topo else None,
        cufile_env_path=str(cufile) if cufile else None,
        hca_exclude=split_patterns(args.hca_exclude or meta_options.get("hcaExclude") or ()),  # type: ignore[arg-type]
        hca_include=split_patterns(args.hca_include or meta_options.get("hcaInclude") or ()),  # type: ignore[arg-type]
    )


def host_reader(root: str, *, record: bool = False) -> HostReader:
    """A reader for --host-root, or UsageError when the directory cannot be a host's root."""
    from agent.host import HostReader
    from agent.probe import host_root_problem
    from common.cli import UsageError

    reader = HostReader(root, record=record)
    problem = host_root_problem(reader)
    if problem:
        raise UsageError(problem)
    return reader


def usable_topology(reader: HostReader, config: ProbeConfig) -> None:
    """UsageError when the --nccl-topo file named on the command line cannot be read as one (a
    typo there would otherwise only show as a condition in the output)."""
    from agent.probes import nccl_topo
    from common.cli import UsageError

    if config.nccl_topo:
        try:
            nccl_topo.load(reader, config.nccl_topo, local=config.nccl_topo_local)
        except nccl_topo.NcclTopoError as err:
            raise UsageError(f"--nccl-topo {err}") from None


def cmd_probe(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from agent import gather
    from agent.nvml import NullNvml, SnapshotNvml
    from agent.output import render_as
    from agent.probe import probe_node

    if args.snapshot:
        from pathlib import Path

        snap = gather.load(Path(args.snapshot))
        reader = snap.reader()
        backend: NvmlBackend = NullNvml() if args.nvml == "none" else SnapshotNvml(snap.nvml)
        # --nccl-topo with --from is a file of this machine, to try against the snapshot.
        config = replace(probe_config(args, snap.options), nccl_topo_local=bool(args.nccl_topo))
        node = str(snap.meta.get("node") or args.node_name)
    else:
        reader = host_reader(args.host_root)
        backend = nvml_backend(args.nvml)
        config = probe_config(args)
        node = args.node_name
    if args.nccl_topo:
        usable_topology(reader, config)
    result = probe_node(reader, backend, config)
    sys.stdout.write(render_as(args.output, node, result))
    return 0


def cmd_gather(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agent import gather
    from agent.nvml import SnapshotNvml, snapshot_of
    from agent.probe import probe_node

    reader = host_reader(args.host_root, record=True)
    config = probe_config(args)
    usable_topology(reader, config)
    nvml = snapshot_of(nvml_backend(args.nvml))
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
    import asyncio

    from agent.config import RunConfig
    from agent.hca_select import split_patterns
    from agent.runner import run_forever
    from common.cli import UsageError
    from common.kube import load_api_client

    host_reader(args.host_root)
    load_api_client(args.kubeconfig)  # before anything starts: a missing config is one line
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
    try:
        return asyncio.run(run_forever(config, nvml_backend(args.nvml)))
    except OSError as err:
        if err.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise UsageError(
                f"cannot listen on --metrics-port {args.metrics_port}: {err.strerror}"
            ) from None
        raise


def _error_line(err: BaseException) -> str | None:
    """The one line to print for an error a user can cause; None for a bug."""
    from agent.gather import GatherError
    from common import cli

    if isinstance(err, cli.UsageError | GatherError):
        return str(err)
    if isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] not in OURS:
        return cli.missing_module(err)
    if isinstance(err, UnicodeError):
        return f"input is not UTF-8: {err}"
    if isinstance(err, OSError):
        return cli.os_error(err)
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure(args.log_level, args.log_json)
    command = {"probe": cmd_probe, "gather": cmd_gather, "run": cmd_run}[args.command]
    try:
        return command(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        from common import cli

        return cli.reader_left()
    except Exception as err:  # a person reads this: one line, never a traceback
        line = _error_line(err)
        if line is None:
            logging.getLogger("agent").debug("internal error", exc_info=True)
            print(
                f"{PROG}: internal error: {type(err).__name__}: {err} "
                "(--log-level debug shows where)",
                file=sys.stderr,
            )
            return 1
        print(f"{PROG}: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

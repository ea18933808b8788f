"""The agent's command line: subcommands, flags, their help and defaults.

Imports only argparse and the logging flags, so `gpufabric-agent --help` starts fast."""

from __future__ import annotations

import argparse
import os
import re

from common import cli, logs

FORMATS = ("json", "yaml", "table", "labels")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


def parse_duration(text: str) -> float:
    """'300', '30s', '5m', '1h', '250ms' -> seconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (use e.g. 30s, 5m, 1h)")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    seconds = value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise argparse.ArgumentTypeError("duration must be positive")
    return seconds


class _Version(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata is slow)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kwargs)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from common.cli import version

        print(f"{parser.prog} {version()}")
        parser.exit()


METRICS_PORT = 9410  # not 9400: dcgm-exporter's port on the same host network


def _metrics_port(text: str) -> int:
    """A TCP port, or 0: no metrics endpoint."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}") from None
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(
            f"port {value} is outside 1-65535 (0: no metrics endpoint)"
        )
    return value


def default_node_name() -> str:
    return os.environ.get("NODE_NAME") or os.uname().nodename  # gethostname(), without socket


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufabric-agent",
        description="Discover this node's GPU fabric (NVLink, PCIe/NUMA, RDMA, GPUDirect Storage) "
        "and publish it as a GpuNodeStatus.",
    )
    parser.add_argument(
        "-V", "--version", action=_Version, help="print the gpufabric version and exit"
    )
    logs.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def host_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--host-root",
            default="/",
            metavar="DIR",
            help="where the host's /sys, /proc and /etc are mounted (default: /)",
        )
        p.add_argument(
            "--nvml",
            choices=["auto", "none"],
            default="auto",
            help="auto: use NVML if the driver is there; none: PCI only, on purpose "
            "(default: auto)",
        )
        p.add_argument(
            "--nccl-topo",
            metavar="FILE",
            help="vendor NCCL topology XML (host path) for VMs whose PCI tree is virtual "
            "(default: none)",
        )
        p.add_argument(
            "--cufile-env-path",
            metavar="FILE",
            default=os.environ.get("CUFILE_ENV_PATH_JSON"),
            help="cufile.json the workloads use, searched before the default paths "
            "(default: $CUFILE_ENV_PATH_JSON, else /etc/cufile.json, "
            "/usr/local/cuda/gds/cufile.json)",
        )
        p.add_argument(
            "--hca-exclude",
            action="append",
            default=[],
            metavar="GLOB,...",
            help="HCAs that are never compute fabric, e.g. a front-end NIC the rule missed "
            "(comma list of names or globs, repeatable; default: none; see docs/install.md)",
        )
        p.add_argument(
            "--hca-include",
            action="append",
            default=[],
            metavar="GLOB,...",
            help="when given, exactly these HCAs are compute fabric and the automatic rule is "
            "off (comma list of names or globs, repeatable; default: the rule decides)",
        )
        p.add_argument(
            "--node-name",
            default=default_node_name(),
            help="node name (default: $NODE_NAME or the hostname)",
        )

    probe = sub.add_parser(
        "probe",
        help="probe once and print the status",
        description="Probe this node (or a gathered snapshot) once and print it.",
    )
    host_options(probe)
    probe.add_argument(
        "--from",
        dest="snapshot",
        metavar="SNAPSHOT",
        help="a `gather` archive to probe instead of this host (default: probe this host)",
    )
    probe.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="yaml",
        help="yaml|json: the GpuNodeStatus; table: topology matrix; labels: node labels "
        "(default: yaml)",
    )

    gather = sub.add_parser(
        "gather",
        help="capture what the probes read into an archive",
        description="Capture exactly the host files the probes read, plus an "
        "NVML snapshot, so `probe --from FILE` reproduces this node anywhere.",
    )
    host_options(gather)
    gather.add_argument(
        "-o", "--output", required=True, metavar="FILE.tar.gz", help="archive to write (required)"
    )
    gather.add_argument(
        "--note",
        default="",
        help="free text stored as the archive's provenance (default: 'gathered on NODE')",
    )

    run = sub.add_parser(
        "run",
        help="the node daemon: probe, watch, publish",
        description="Probe at start, on udev events and every --resync; "
        "server-side apply the GpuNodeStatus when it changed.",
    )
    host_options(run)
    run.add_argument(
        "--resync",
        type=parse_duration,
        default=300.0,
        metavar="DURATION",
        help="full re-probe period (default 5m)",
    )
    run.add_argument(
        "--debounce",
        type=parse_duration,
        default=2.0,
        metavar="DURATION",
        help="quiet time after udev events before re-probing (default 2s)",
    )
    run.add_argument(
        "--metrics-port",
        type=_metrics_port,
        default=METRICS_PORT,
        metavar="PORT",
        help=f"/metrics and /healthz port; 0: no metrics endpoint (default: {METRICS_PORT})",
    )
    cli.add_kubeconfig(run)
    run.add_argument(
        "--no-udev",
        action="store_true",
        help="do not watch udev events; re-probe on --resync only (default: watch)",
    )
    for command in (probe, gather, run):
        logs.add_arguments(command, repeat=True)
    return parser

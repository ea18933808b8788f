"""Run every probe on one host and assemble the status; a failing probe never stops the rest."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent import assemble as asm
from agent.hca_select import unmatched
from agent.host import DiskTree, HostReader
from agent.nvml import NvmlBackend, NvmlInventory, NvmlUnavailable
from agent.probes import gds, nccl_topo, pci, rdma
from agent.probes.pci import PCI_DEVICES
from agent.topo_match import mismatch
from common.model import NetworkPosition

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    nccl_topo: str | None = None  # host path of a vendor NCCL topology file
    cufile_env_path: str | None = None  # CUFILE_ENV_PATH_JSON as the node's workloads see it
    hca_exclude: tuple[str, ...] = ()
    hca_include: tuple[str, ...] = ()
    nccl_topo_local: bool = False  # nccl_topo is a file of this machine, not under the host root
    network: NetworkPosition = field(default_factory=NetworkPosition)


def host_root_problem(reader: HostReader) -> str:
    """Why this reader's root cannot be a host's root ("" when it looks like one).

    A wrong --host-root (missing, a file, an empty directory) must not read as a healthy node
    with nothing in it."""
    if isinstance(reader.tree, DiskTree):
        root = reader.root
        if not root.exists():
            return f"host root {root} does not exist"
        if not root.is_dir():
            return f"host root {root} is not a directory"
    if not reader.exists(PCI_DEVICES):
        return f"no {PCI_DEVICES} under host root {reader.root}: is the host's /sys mounted there?"
    return ""


def _guard(reader: HostReader, name: str, fn: Callable[[], T]) -> asm.Outcome[T]:
    """Run one probe; what it could not read or parse goes into its outcome's `invalid`."""
    mark = len(reader.issues)
    try:
        value = fn()
    except Exception as err:  # one probe's bug must not hide the others' results
        log.exception("probe failed", extra={"probe": name})
        return asm.Outcome(None, "ProbeFailed", f"{name} probe failed: {type(err).__name__}: {err}")
    invalid = tuple(reader.issues[mark:])
    for text in invalid:
        log.warning("odd host data", extra={"probe": name, "problem": text})
    return asm.Outcome(value, invalid=invalid)


def _nvml(backend: NvmlBackend) -> asm.Outcome[NvmlInventory]:
    try:
        return asm.Outcome(backend.inventory())
    except NvmlUnavailable as err:
        return asm.Outcome(None, err.reason, err.message)
    except Exception as err:  # a driver bug is a condition, not a crash
        log.exception("nvml backend failed")
        return asm.Outcome(None, "ProbeFailed", f"NVML backend failed: {type(err).__name__}: {err}")


def run_probes(reader: HostReader, nvml: NvmlBackend, config: ProbeConfig) -> asm.ProbeResults:
    reader.reset()
    problem = host_root_problem(reader)
    if problem:
        missing: asm.Outcome[Any] = asm.Outcome(None, "HostRootInvalid", problem)
        return asm.ProbeResults(
            pci=missing, nvml=_nvml(nvml), rdma=missing, gds=missing, network=config.network
        )
    topo: asm.Outcome[nccl_topo.NcclTopo] = asm.Outcome(None, "NotConfigured")
    if config.nccl_topo:
        try:
            topo = asm.Outcome(
                nccl_topo.load(reader, config.nccl_topo, local=config.nccl_topo_local)
            )
        except nccl_topo.NcclTopoError as err:
            topo = asm.Outcome(None, "TopologyFileInvalid", str(err))
    wanted = set(topo.value.devices) if topo.value else None
    pci_tree = _guard(reader, "pcie", lambda: pci.probe(reader, wanted))
    nvml_inv = _nvml(nvml)
    rdma_found = _guard(reader, "rdma", lambda: rdma.probe(reader))
    return asm.ProbeResults(
        pci=pci_tree,
        nvml=nvml_inv,
        rdma=rdma_found,
        gds=_guard(reader, "gds", lambda: gds.probe(reader, config.cufile_env_path)),
        topo=_describes_node(reader, topo, pci_tree.value, rdma_found.value),
        network=config.network,
    )


def _describes_node(
    reader: HostReader,
    topo: asm.Outcome[nccl_topo.NcclTopo],
    tree: pci.PciTree | None,
    hcas: rdma.RdmaProbe | None,
) -> asm.Outcome[nccl_topo.NcclTopo]:
    """The topology file, or refused when its devices are not this node's (sysfs then)."""
    if topo.value is None or tree is None:
        return topo  # nothing to check, or no sysfs to check against (PcieProbed says so)
    nics = [h.pci_bus_id for h in hcas.hcas if h.pci_bus_id] if hcas is not None else []
    problem = mismatch(
        topo.value,
        [f.bus_id for f in tree.gpus()],
        nics,
        lambda bus: reader.exists(f"{PCI_DEVICES}/{bus}"),
    )
    return asm.Outcome(None, "TopologyFileMismatch", problem) if problem else topo


def utc_now() -> str:
    """Condition timestamps: RFC 3339, seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def probe_node(
    reader: HostReader,
    nvml: NvmlBackend,
    config: ProbeConfig,
    options: asm.Options | None = None,
) -> asm.Assembled:
    started = time.perf_counter()
    results = run_probes(reader, nvml, config)
    out = asm.assemble(
        results,
        options
        or asm.Options(
            now=utc_now(), hca_exclude=config.hca_exclude, hca_include=config.hca_include
        ),
    )
    log.debug("probed", extra={"seconds": round(time.perf_counter() - started, 4)})
    names = [h.name for h in out.status.hcas]
    for flag, pattern in unmatched(names, config.hca_include, config.hca_exclude):
        log.warning("hca pattern matches no rdma device", extra={"flag": flag, "pattern": pattern})
    return out

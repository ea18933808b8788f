"""Fabric faults and the per-probe conditions of a status. Pure: the caller passes the time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from agent.hca_select import unmatched
from agent.nvml import NvmlInventory
from agent.results import Options, ProbeResults
from common import api
from common.model import Condition, Gpu, Hca, HcaPort, StorageSupport

FABRIC_STATE_COMPLETED = 3


def port_faulty(port: HcaPort) -> bool:
    # An administratively disabled port is a choice, not a fault; a port that is cabled but not
    # ACTIVE (Polling, LinkErrorRecovery, INIT/ARMED without an SM) is.
    return port.state != "ACTIVE" and port.phys_state != "Disabled"


def find_faults(results: ProbeResults, gpus: Sequence[Gpu], hcas: Sequence[Hca]) -> list[str]:
    """What makes the fabric degraded, for people: something broken (a cabled port not ACTIVE, a
    partial NVLink, a failed NVLink fabric registration) or a part nobody could describe (no PCIe
    tree; NVLink neither from NVML nor from an NCCL topology file that lists every GPU). A missing
    source whose facts came from another is not a fault (docs/usage.md)."""
    out: list[str] = []
    if results.pci.value is None:  # nothing is known about this node's devices
        out.append(f"PCIe not probed ({results.pci.reason})")
    inv: NvmlInventory | None = results.nvml.value
    topo = results.topo.value
    described = topo is not None and all(g.pci_bus_id in topo.gpus for g in gpus)
    # --nvml none is a choice, not a fault
    if inv is None and gpus and results.nvml.reason != "Disabled" and not described:
        out.append(f"NVLink unknown: NVML unavailable ({results.nvml.reason}), no NCCL topology")
    for g in gpus:
        if g.nvlink and 0 < g.nvlink.active_links < g.nvlink.total_links:
            out.append(
                f"GPU {g.index} NVLink partial: {g.nvlink.active_links}/{g.nvlink.total_links}"
            )
    if inv is not None:
        for ng in inv.gpus:
            if ng.fabric and ng.fabric.state == FABRIC_STATE_COMPLETED and ng.fabric.status != 0:
                out.append(f"GPU {ng.index} NVLink fabric registration failed")
    for h in hcas:
        for p in h.ports:
            if port_faulty(p):
                out.append(f"{h.name} port {p.port} {p.state}/{p.phys_state}")
    return out


def _condition(ctype: str, ok: bool, reason: str, message: str, opts: Options) -> Condition:
    status: Literal["True", "False"] = "True" if ok else "False"
    previous = opts.previous.get(ctype)
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status
        else opts.now
    )
    return Condition(
        type=ctype, status=status, reason=reason, message=message, last_transition_time=since
    )


def conditions(
    results: ProbeResults,
    gpus: list[Gpu],
    hcas: list[Hca],
    storage: StorageSupport,
    faults: list[str],
    opts: Options,
) -> tuple[Condition, ...]:
    conds = []
    nvml = results.nvml
    if nvml.value is not None:
        errs = [f"GPU {g.index}: {e}" for g in nvml.value.gpus for e in g.errors]
        msg = f"driver {nvml.value.driver_version}, {len(nvml.value.gpus)} GPUs"
        if errs:
            msg += "; field errors: " + "; ".join(errs[:5])
        conds.append(_condition(api.COND_NVML, True, "Initialized", msg, opts))
    else:
        found = f"; {len(gpus)} NVIDIA GPUs found on PCI" if gpus else ""
        if results.topo.value is not None and any(g.nvlink for g in gpus):
            found += f"; NVLink from NCCL topology {results.topo.value.path}"
        elif gpus:
            found += "; NVLink unknown"
        conds.append(_condition(api.COND_NVML, False, nvml.reason, nvml.message + found, opts))

    pci, topo = results.pci, results.topo
    if pci.value is not None:
        where = f" (locality from NCCL topology {topo.value.path})" if topo.value else ""
        # A configured file that is unusable or another machine's is not a locality source: the
        # distances come from sysfs, which on a VM hides them, so the condition is False.
        refused = topo.value is None and topo.reason not in ("", "NotConfigured")
        if refused:
            where = f"; locality from sysfs, NCCL topology file refused: {topo.message}"
        topo_problems = topo.value.problems if topo.value else ()
        probs = "; ".join([*topo_problems, *pci.value.problems][:5])
        msg = f"{len(pci.value.functions)} PCI functions of interest{where}"
        conds.append(
            _condition(
                api.COND_PCIE,
                not refused,
                topo.reason if refused else "Probed",
                msg + (f"; {probs}" if probs else ""),
                opts,
            )
        )
    else:
        conds.append(_condition(api.COND_PCIE, False, pci.reason, pci.message, opts))

    rdma = results.rdma
    names = [h.name for h in hcas]
    missed = unmatched(names, opts.hca_include, opts.hca_exclude)
    if rdma.value is not None and missed:
        have = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "") if names else "none"
        said = "; ".join(f"{flag} {pattern} matches no RDMA device" for flag, pattern in missed)
        msg = f"{said} (devices: {have})"
        conds.append(_condition(api.COND_RDMA, False, "HcaPatternUnmatched", msg, opts))
    elif rdma.value is not None:
        probs = "; ".join(rdma.value.problems[:5])
        reason = "Probed" if hcas else "NoRdmaDevices"
        msg = f"{len(hcas)} RDMA devices" + (f"; {probs}" if probs else "")
        conds.append(_condition(api.COND_RDMA, True, reason, msg, opts))
    else:
        conds.append(_condition(api.COND_RDMA, False, rdma.reason, rdma.message, opts))

    gds = results.gds
    if gds.value is None:
        conds.append(_condition(api.COND_GDS, False, gds.reason, gds.message, opts))
    elif gds.value.config_error:
        conds.append(
            _condition(
                api.COND_GDS,
                False,
                "ConfigInvalid",
                f"{gds.value.config_path}: {gds.value.config_error}",
                opts,
            )
        )
    else:
        mode = (
            "GPUDirect"
            if storage.cu_file_enabled
            else "compatibility mode"
            if storage.compat_mode
            else "unavailable"
        )
        where = storage.config_path or "no cufile.json found"
        fs = (
            f"nvidia-fs {storage.nvidia_fs_version}"
            if storage.nvidia_fs_version
            else "nvidia-fs not loaded"
        )
        reason = "Probed" if storage.config_path else "NoConfig"
        conds.append(_condition(api.COND_GDS, True, reason, f"cuFile {mode}; {where}; {fs}", opts))

    invalid = {
        api.COND_PCIE: results.pci.invalid,
        api.COND_RDMA: results.rdma.invalid,
        api.COND_GDS: results.gds.invalid,
    }
    conds = [_mark_invalid(c, invalid.get(c.type, ()), opts) for c in conds]
    conds.append(
        _condition(
            api.COND_FABRIC,
            not faults,
            "Healthy" if not faults else "Degraded",
            "; ".join(faults[:8]) if faults else "all NVLinks and cabled RDMA ports up",
            opts,
        )
    )
    return tuple(conds)


def _mark_invalid(cond: Condition, invalid: tuple[str, ...], opts: Options) -> Condition:
    """Host data that did not read as the kernel writes it turns its section's condition False."""
    if not invalid or cond.status == "False":
        return cond
    shown = "; ".join(invalid[:5]) + (f"; {len(invalid) - 5} more" if len(invalid) > 5 else "")
    return _condition(cond.type, False, "InvalidHostData", f"{cond.message}; {shown}", opts)

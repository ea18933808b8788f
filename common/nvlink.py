"""A node's multi-node NVLink domain (GB200/GB300 NVL72): one stable label value per
(clusterUuid, cliqueId) pair, from the status's `gpus[].fabric` or NVIDIA's `nvidia.com/gpu.clique`
node label. Pure.

The value is `<clusterUuid>.<cliqueId>` with the UUID in lowercase: the same spelling as the clique
label (so both sources give one value for one domain), and at most 36 + 1 + 10 characters, a valid
label value. An all-zero clusterUuid means the GPU is not in a multi-node fabric.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common import api

_MAX_CLIQUE = 2**32 - 1  # cliqueId is an unsigned int in NVML


@dataclass(frozen=True, slots=True)
class Domain:
    """The node's domain, or None with the reason a person reads (empty when there is simply no
    multi-node NVLink, e.g. an HGX H100)."""

    value: str | None
    reason: str = ""


NONE = Domain(None)


def domain_value(cluster_uuid: object, clique_id: object) -> str | None:
    """The label value of one (clusterUuid, cliqueId) pair; None for no fabric or a bad one."""
    if not isinstance(cluster_uuid, str) or isinstance(clique_id, bool):
        return None
    if not isinstance(clique_id, int) or not 0 <= clique_id <= _MAX_CLIQUE:
        return None
    try:
        parsed = uuid.UUID(cluster_uuid)
    except ValueError:
        return None
    if parsed.int == 0:
        return None
    return f"{parsed}.{clique_id}"


def from_clique_label(value: str | None) -> str | None:
    """`nvidia.com/gpu.clique` (`<clusterUuid>.<cliqueId>`) -> our value; None when absent or
    not of that form."""
    if not value or "." not in value:
        return None
    cluster, _, clique = value.rpartition(".")
    if not clique.isdigit():
        return None
    return domain_value(cluster, int(clique))


def from_gpus(gpus: Sequence[Mapping[str, Any]]) -> Domain:
    """The domain every GPU of the node reports in `fabric`, or None and why.

    The agent fills `fabric` only once the fabric manager has formed it, so a node where some GPUs
    have one and others not is still forming; GPUs that name different domains disagree."""
    values: dict[str, list[str]] = {}
    without: list[str] = []
    for gpu in gpus:
        index = str(gpu.get("index", "?"))
        fabric = gpu.get("fabric")
        value = (
            domain_value(fabric.get("clusterUuid"), fabric.get("cliqueId"))
            if isinstance(fabric, Mapping)
            else None
        )
        if value is None:
            without.append(index)
        else:
            values.setdefault(value, []).append(index)
    if not values:
        return NONE
    if len(values) > 1:
        parts = "; ".join(f"GPUs {','.join(ix)} in {v}" for v, ix in sorted(values.items()))
        return Domain(None, f"GPUs disagree on their NVLink domain: {parts}")
    (value,) = values
    if without:
        return Domain(
            None, f"NVLink fabric still forming: GPUs {','.join(without)} have no fabric yet"
        )
    return Domain(value)


def status_domain(status: Mapping[str, Any] | None) -> Domain:
    """What the status's own GPUs say (NONE for a status without a gpus list)."""
    gpus = status.get("gpus") if isinstance(status, Mapping) else None
    return from_gpus(gpus) if isinstance(gpus, list) else NONE


def resolve(own: Domain, clique_label: str | None) -> Domain:
    """The status wins when it names a domain; else the clique label; a status that disagrees or
    is still forming gives none (the clique label cannot settle what the GPUs dispute)."""
    if own.value is not None or own.reason:
        return own
    return Domain(from_clique_label(clique_label))


def node_domain(status: Mapping[str, Any] | None, node_labels: Mapping[str, str]) -> Domain:
    return resolve(status_domain(status), node_labels.get(api.LABEL_GPU_CLIQUE))

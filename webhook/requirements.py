"""Pod (annotations + optional GpuClaim) -> Requirements. Pure; bad values raise Invalid."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from common import api
from webhook.groups.names import GROUP_ANNOTATIONS

Level = Literal["required", "preferred"]
Topology = Literal["any", "same-socket", "nvlink"]
ClaimLookup = Callable[[str, str], Mapping[str, Any] | None]  # (namespace, name) -> spec


class Invalid(ValueError):
    """A request the webhook must deny; the message names the field and the accepted values."""


@dataclass(frozen=True, slots=True)
class Requirements:
    gpus: int = 0
    rdma: Level | None = None
    rdma_min_ports: int | None = None
    preferred_hcas: tuple[str, ...] = ()
    cufile: Level | None = None
    topology: Topology = "any"
    min_nvlink_bandwidth: int | None = None
    claim: str | None = None


def has_fabric_annotations(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return any(str(k).startswith(api.ANNOTATION_PREFIX) for k in annotations)


def gpu_count(pod: Mapping[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limits = ((c or {}).get("resources") or {}).get("limits") or {}
        value = limits.get(api.GPU_RESOURCE)
        try:
            total += int(str(value)) if value is not None else 0
        except ValueError:
            raise Invalid(
                f"container {c.get('name')!r}: {api.GPU_RESOURCE} limit {value!r} is not an integer"
            ) from None
    return total


def _level(where: str, value: object) -> Level:
    text = str(value).strip().lower()
    if text not in ("required", "preferred"):
        raise Invalid(f"{where}: {value!r} is not valid; accepted values: required, preferred")
    return text  # type: ignore[return-value]


def _int(where: str, value: object, minimum: int) -> int:
    if isinstance(value, bool):
        raise Invalid(f"{where}: {value!r} is not an integer >= {minimum}")
    try:
        number = int(str(value).strip(), 10)
    except ValueError:
        raise Invalid(f"{where}: {value!r} is not an integer >= {minimum}") from None
    if number < minimum:
        raise Invalid(f"{where}: {number} is below the minimum {minimum}")
    return number


def _topology(where: str, value: object) -> Topology:
    text = str(value).strip()
    if text not in ("any", "same-socket", "nvlink"):
        raise Invalid(f"{where}: {value!r} is not valid; accepted values: any, same-socket, nvlink")
    return text  # type: ignore[return-value]


def _hcas(where: str, value: object) -> tuple[str, ...]:
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(str(n).strip() for n in items if str(n).strip())
    for n in names:
        if not n.replace("_", "").replace("-", "").isalnum() or len(n) > 64:
            raise Invalid(f"{where}: {n!r} is not an HCA name (like mlx5_0)")
    return names


def _from_claim(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    where = f"GpuClaim {name}: spec"
    if not isinstance(spec, Mapping):
        raise Invalid(f"{where} is not an object")
    topo = spec.get("topology") or {}
    net = spec.get("network") or {}
    storage = spec.get("storage") or {}
    for section, value in (("topology", topo), ("network", net), ("storage", storage)):
        if not isinstance(value, Mapping):
            raise Invalid(f"{where}.{section} is not an object")
    if "mode" in topo:
        out["topology"] = _topology(f"{where}.topology.mode", topo["mode"])
    if "minBandwidthGBps" in topo:
        out["min_nvlink_bandwidth"] = _int(
            f"{where}.topology.minBandwidthGBps", topo["minBandwidthGBps"], 0
        )
    if "rdmaRequired" in net:
        if not isinstance(net["rdmaRequired"], bool):
            raise Invalid(
                f"{where}.network.rdmaRequired: {net['rdmaRequired']!r} is not true or false"
            )
        out["rdma"] = "required" if net["rdmaRequired"] else None
    if "minPorts" in net:
        out["rdma_min_ports"] = _int(f"{where}.network.minPorts", net["minPorts"], 1)
    if "preferredHcas" in net:
        out["preferred_hcas"] = _hcas(f"{where}.network.preferredHcas", net["preferredHcas"])
    if "cuFile" in storage:
        value = storage["cuFile"]
        if value not in ("Required", "Preferred"):
            raise Invalid(
                f"{where}.storage.cuFile: {value!r} is not valid; "
                "accepted values: Required, Preferred"
            )
        out["cufile"] = str(value).lower()
    return out


def requirements(pod: Mapping[str, Any], namespace: str, claims: ClaimLookup) -> Requirements:
    annotations: Mapping[str, Any] = (pod.get("metadata") or {}).get("annotations") or {}
    fields: dict[str, Any] = {}
    claim = annotations.get(api.ANN_CLAIM)
    if claim is not None:
        spec = claims(namespace, str(claim))
        if spec is None:
            raise Invalid(
                f"{api.ANN_CLAIM}: GpuClaim {claim!r} not found in namespace {namespace!r}"
            )
        fields.update(_from_claim(spec, str(claim)))
    # Inline annotations override the claim field by field.
    parsers: dict[str, tuple[str, Callable[[str, object], object]]] = {
        api.ANN_RDMA: ("rdma", _level),
        api.ANN_RDMA_MIN_PORTS: ("rdma_min_ports", lambda w, v: _int(w, v, 1)),
        api.ANN_PREFERRED_HCAS: ("preferred_hcas", _hcas),
        api.ANN_CUFILE: ("cufile", _level),
        api.ANN_TOPOLOGY: ("topology", _topology),
        api.ANN_MIN_NVLINK_BW: ("min_nvlink_bandwidth", lambda w, v: _int(w, v, 0)),
    }
    known = set(parsers) | {api.ANN_CLAIM} | set(GROUP_ANNOTATIONS)  # groups: webhook/groups
    for key in annotations:
        if str(key).startswith(api.ANNOTATION_PREFIX) and key not in known:
            raise Invalid(
                f"unknown annotation {key!r}; "
                f"gpufabric.io annotations are: {', '.join(sorted(known))}"
            )
    for key, (name, parse) in parsers.items():
        if key in annotations:
            fields[name] = parse(key, annotations[key])
    if fields.get("rdma") is None and (
        fields.get("rdma_min_ports") is not None or fields.get("preferred_hcas")
    ):
        fields["rdma"] = "required"  # asking for ports or HCAs implies RDMA
    fields = {k: v for k, v in fields.items() if v is not None or k == "rdma"}
    return Requirements(gpus=gpu_count(pod), claim=str(claim) if claim else None, **fields)

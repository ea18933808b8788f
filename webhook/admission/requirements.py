"""Pod (annotations + optional GpuClaim) -> Requirements. Pure; every problem found is collected
and raised together as Invalid, so a denial lists all bad annotations at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any, Literal

from common import api
from webhook.admission.review import MAPPING, annotations_of, pod_problems
from webhook.groups.extensions.imex.names import ANN_COMPUTE_DOMAIN
from webhook.groups.model.names import GROUP_ANNOTATIONS, choice
from webhook.kube.nodeselector import INT64_MAX, parse_int64

Level = Literal["required", "preferred"]
Topology = Literal["any", "same-socket", "nvlink"]
ClaimLookup = Callable[[str, str], Mapping[str, Any] | None]  # (namespace, name) -> spec
_DIGITS = re.compile(r"[+-]?[0-9]+")
_HCA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class Invalid(ValueError):
    """A request the webhook must deny. `problems` holds every one found, each naming its field
    and the accepted values; the message lists them all, so one denial tells the whole story."""

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        super().__init__("; ".join(self.problems))


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


def gpu_count(pod: Mapping[str, Any], problems: list[str] | None = None) -> int:
    """The pod's nvidia.com/gpu limits summed over its containers; a limit that is not a whole
    number is a problem (added to `problems`, or raised as Invalid when none is given)."""
    found: list[str] = []
    total = 0
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, MAPPING) else None
    for c in containers if isinstance(containers, list) else ():
        res = c.get("resources") if isinstance(c, MAPPING) else None
        if res is None:  # a container without resources: no check through abc for None
            continue
        limits = res.get("limits") if isinstance(res, MAPPING) else None
        if limits is None:
            continue
        value = limits.get(api.GPU_RESOURCE) if isinstance(limits, MAPPING) else None
        if value is None:
            continue
        if type(value) is int:
            number: int | None = value
        elif type(value) is str and len(value) < 19 and value.isascii() and value.isdigit():
            number = int(value)  # the usual "8": parse_int64's answer without its regex
        else:
            number = parse_int64(str(value))
        if number is None or number < 0 or total + number > INT64_MAX:
            found.append(
                f"container {c.get('name')!r}: {api.GPU_RESOURCE} limit {_show(value)} "
                "is not an integer >= 0"
            )
        else:
            total += number
    if problems is None and found:
        raise Invalid(found)
    if problems is not None:
        problems.extend(found)
    return total


def _show(value: object, limit: int = 80) -> str:
    """A user's value, quoted and cut short for a denial message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "…" + text[-4:]


def _level(where: str, value: object) -> Level:
    text = choice(value, ("required", "preferred"))
    if text is None:
        raise Invalid(f"{where}: {_show(value)} is not valid; accepted values: required, preferred")
    return text  # type: ignore[return-value]


def _int(where: str, value: object, minimum: int) -> int:
    accepted = f"accepted values: integers from {minimum} to {INT64_MAX}"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise Invalid(f"{where}: {_show(value)} is not an integer >= {minimum}; {accepted}")
    number = value if isinstance(value, int) else parse_int64(value.strip())
    if number is None:
        if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
            raise Invalid(
                f"{where}: {_show(value)} is beyond the Kubernetes int64 range; {accepted}"
            )
        raise Invalid(f"{where}: {_show(value)} is not an integer >= {minimum}; {accepted}")
    if number > INT64_MAX:
        raise Invalid(f"{where}: {number} is beyond the Kubernetes int64 range; {accepted}")
    if number < minimum:
        raise Invalid(f"{where}: {number} is below the minimum {minimum}; {accepted}")
    return number


def _topology(where: str, value: object) -> Topology:
    text = choice(value, ("any", "same-socket", "nvlink"))
    if text is None:
        raise Invalid(
            f"{where}: {_show(value)} is not valid; accepted values: any, same-socket, nvlink"
        )
    return text  # type: ignore[return-value]


def _hcas(where: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list):
        items = list(value)
    else:
        raise Invalid(f"{where}: {_show(value)} is not a comma list of HCA names (like mlx5_0)")
    names = tuple(n.strip() if isinstance(n, str) else n for n in items)
    names = tuple(n for n in names if n != "")
    bad = [n for n in names if not isinstance(n, str) or not _HCA.fullmatch(n)]
    if bad:
        raise Invalid(
            f"{where}: " + ", ".join(_show(n) for n in bad) + " is not an HCA name (like mlx5_0)"
        )
    return tuple(n for n in names if isinstance(n, str))


def _collect(
    problems: list[str], out: dict[str, Any], name: str, parse: Callable[[], object]
) -> None:
    try:
        out[name] = parse()
    except Invalid as err:
        problems.extend(err.problems)


def _from_claim(spec: object, name: str, problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    where = f"GpuClaim {name}: spec"
    if not isinstance(spec, Mapping):
        problems.append(f"{where} is not an object")
        return out
    sections: dict[str, Mapping[str, Any]] = {}
    for section in ("topology", "network", "storage"):
        value = spec.get(section) or {}
        if not isinstance(value, Mapping):
            problems.append(f"{where}.{section} is not an object")
            value = {}
        sections[section] = value
    topo, net, storage = sections["topology"], sections["network"], sections["storage"]
    if "mode" in topo:
        _collect(
            problems, out, "topology", lambda: _topology(f"{where}.topology.mode", topo["mode"])
        )
    if "minBandwidthGBps" in topo:
        _collect(
            problems,
            out,
            "min_nvlink_bandwidth",
            lambda: _int(f"{where}.topology.minBandwidthGBps", topo["minBandwidthGBps"], 0),
        )
    if "rdmaRequired" in net:
        if isinstance(net["rdmaRequired"], bool):
            out["rdma"] = "required" if net["rdmaRequired"] else None
        else:
            problems.append(
                f"{where}.network.rdmaRequired: {_show(net['rdmaRequired'])} is not true or false"
            )
    if "minPorts" in net:
        _collect(
            problems,
            out,
            "rdma_min_ports",
            lambda: _int(f"{where}.network.minPorts", net["minPorts"], 1),
        )
    if "preferredHcas" in net:
        _collect(
            problems,
            out,
            "preferred_hcas",
            lambda: _hcas(f"{where}.network.preferredHcas", net["preferredHcas"]),
        )
    if "cuFile" in storage:
        value = storage["cuFile"]
        if value in ("Required", "Preferred"):
            out["cufile"] = str(value).lower()
        else:
            problems.append(
                f"{where}.storage.cuFile: {_show(value)} is not valid; "
                "accepted values: Required, Preferred"
            )
    return out


# Inline annotations, each with the Requirements field it sets and its parser.
_PARSERS: dict[str, tuple[str, Callable[[str, object], object]]] = {
    api.ANN_RDMA: ("rdma", _level),
    api.ANN_RDMA_MIN_PORTS: ("rdma_min_ports", lambda w, v: _int(w, v, 1)),
    api.ANN_PREFERRED_HCAS: ("preferred_hcas", _hcas),
    api.ANN_CUFILE: ("cufile", _level),
    api.ANN_TOPOLOGY: ("topology", _topology),
    api.ANN_MIN_NVLINK_BW: ("min_nvlink_bandwidth", lambda w, v: _int(w, v, 0)),
}
# Group placement's annotations are checked by webhook.groups (its problems join these in the same
# denial); here they only count as known.
KNOWN_ANNOTATIONS = frozenset({*_PARSERS, api.ANN_CLAIM, *GROUP_ANNOTATIONS, ANN_COMPUTE_DOMAIN})


# The inline memo: at most INLINE_READINGS entries, each of annotations of at most _MEMO_CHARS
# characters together (longer ones are read each time, not kept): a few MB when full.
INLINE_READINGS = 512
_MEMO_CHARS = 1024


def _settled(fields: dict[str, Any]) -> dict[str, Any]:
    """The Requirements fields from those the claim and the annotations set."""
    if fields.get("rdma") is None and (
        fields.get("rdma_min_ports") is not None or fields.get("preferred_hcas")
    ):
        fields["rdma"] = "required"  # asking for ports or HCAs implies RDMA
    return {k: v for k, v in fields.items() if v is not None or k == "rdma"}


@dataclass(frozen=True, slots=True)
class _Inline:
    """What a pod's gpufabric.io annotations say by themselves: problems with the keys (unknown,
    not a string), the Requirements fields set inline, problems with their values, and the
    fields settled for a pod that names no claim (read only: kept in the memo)."""

    key_problems: tuple[str, ...]
    fields: tuple[tuple[str, object], ...]
    value_problems: tuple[str, ...]
    alone: Mapping[str, Any]
    by_gpus: dict[int, Requirements] = field(default_factory=dict)

    def requirements(self, gpus: int) -> Requirements:
        """The Requirements of a valid pod with these annotations, no claim and `gpus` GPUs. The
        memo hands this reading to pod after pod, so the value (immutable) is kept for the first
        few GPU counts: alike pods get the same object, which later lookups keyed on it (the
        placement plan) find by identity."""
        req = self.by_gpus.get(gpus)
        if req is None:
            req = Requirements(gpus=gpus, **self.alone)
            if len(self.by_gpus) < 8:
                self.by_gpus[gpus] = req
        return req


def _read_inline(ours: tuple[tuple[str, object], ...]) -> _Inline:
    key_problems = []
    for key, value in sorted(ours, key=itemgetter(0)):  # keys are unique: values never compared
        if key not in KNOWN_ANNOTATIONS:
            key_problems.append(
                f"unknown annotation {_show(key)}; gpufabric.io annotations are: "
                + ", ".join(sorted(KNOWN_ANNOTATIONS))
            )
        elif not isinstance(value, str):
            key_problems.append(f"{key}: {_show(value)} is not a string")
    given = dict(ours)
    fields: dict[str, object] = {}
    value_problems: list[str] = []
    for key, (name, parse) in _PARSERS.items():
        value = given.get(key)
        if isinstance(value, str):
            try:
                fields[name] = parse(key, value)
            except Invalid as err:
                value_problems.extend(err.problems)
    return _Inline(
        tuple(key_problems), tuple(fields.items()), tuple(value_problems), _settled(dict(fields))
    )


# The same few annotation values arrive on pod after pod (a job's replicas, a team's template):
# their reading, a pure function of the strings, is kept. Only all-string, short ones, so a key
# is hashable and equal keys read the same (True == 1 would not), and a full memo stays small.
_memo_inline = lru_cache(maxsize=INLINE_READINGS)(_read_inline)


def _inline(annotations: Mapping[str, Any]) -> _Inline:
    ours: list[tuple[str, object]] = []
    size, plain = 0, True  # plain: every key and value exactly a str
    for k, v in annotations.items():
        if isinstance(k, str) and k.startswith(api.ANNOTATION_PREFIX):
            ours.append((k, v))
            if type(k) is str and type(v) is str:
                size += len(k) + len(v)
            else:
                plain = False
    given = tuple(ours)
    return _memo_inline(given) if plain and size <= _MEMO_CHARS else _read_inline(given)


def check(
    pod: Mapping[str, Any], namespace: str, claims: ClaimLookup
) -> tuple[Requirements | None, list[str]]:
    """Requirements and every problem found (pod shape, annotations, claim, GPU count): the
    Requirements are None when any problem was found. Callers with more checks of their own (group
    placement) add their problems to the list and deny once with all of them."""
    problems = pod_problems(pod)
    if problems:  # the annotations' own type is annotations_of's to handle
        problems = [p for p in problems if not p.startswith("metadata.annotations ")]
    annotations = annotations_of(pod)
    inline = _inline(annotations)
    problems += inline.key_problems
    fields: dict[str, Any] = {}
    claim = annotations.get(api.ANN_CLAIM)
    if isinstance(claim, str):
        spec = claims(namespace, claim)
        if spec is None:
            problems.append(
                f"{api.ANN_CLAIM}: GpuClaim {_show(claim)} not found in namespace {namespace!r}"
            )
        else:  # inline annotations override the claim field by field
            fields = _settled({**_from_claim(spec, claim, problems), **dict(inline.fields)})
    problems += inline.value_problems
    gpus = gpu_count(pod, problems)
    if problems:
        return None, problems
    if not isinstance(claim, str):
        return inline.requirements(gpus), []
    return Requirements(gpus=gpus, claim=claim, **fields), []


def requirements(pod: Mapping[str, Any], namespace: str, claims: ClaimLookup) -> Requirements:
    """Requirements of a pod; raises Invalid listing every problem at once."""
    req, problems = check(pod, namespace, claims)
    if req is None:
        raise Invalid(problems)
    return req

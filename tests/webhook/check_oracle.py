"""Test oracle: the admission checks as they read before they were made fast.

webhook/admission/review.py pod_problems and webhook/admission/requirements.py check now skip calls for absent fields,
read the gpufabric.io annotations once (memoized) and test dicts before the Mapping ABC; this is
the plain version they replaced, one readable pass per question, unchanged but for names. The
property tests hold the two together: the same Requirements and the same problems, in the same
order, byte for byte. The value parsers (_PARSERS, _from_claim) did not change and are shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from typing import Any

from common import api
from webhook.admission.requirements import (
    _PARSERS,
    KNOWN_ANNOTATIONS,
    ClaimLookup,
    Invalid,
    Requirements,
    _from_claim,
    _show,
)
from webhook.admission.review import annotations_of
from webhook.kube.nodeselector import INT64_MAX, parse_int64


def _is_map(value: object, of_str: bool = False) -> bool:
    if not isinstance(value, dict):
        return False
    return not of_str or all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _list_of_maps(value: object) -> bool:
    return isinstance(value, list) and all(map(isinstance, value, repeat(dict)))


def _is_requirement(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    values = value.get("values")
    return (
        isinstance(value.get("key"), str)
        and isinstance(value.get("operator"), str)
        and (
            values is None or (isinstance(values, list) and all(isinstance(v, str) for v in values))
        )
    )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else "a string"


_ABSENT: Any = object()  # a key not in the object (an explicit null is a wrong type)
_OBJECT, _STRINGS, _LIST = "an object", "a map of strings", "a list of objects"
_PREF = "preferredDuringSchedulingIgnoredDuringExecution"
_REQ = "requiredDuringSchedulingIgnoredDuringExecution"
_AFF = "spec.affinity.nodeAffinity."
_TERMS = _AFF + _REQ + ".nodeSelectorTerms"


def _wrong(out: list[str], where: str, value: object, what: str) -> None:
    if value is not _ABSENT:
        out.append(f"{where} is {_json_type(value)}, not {what}")


def pod_problems(pod: dict[str, Any]) -> list[str]:
    """Fields the webhook reads or extends that do not have their Kubernetes type, named by path.

    The API server decodes a pod into its typed struct before admission, so a real review never
    has these (nor an explicit null: empty fields are left out); checking them once here lets every
    later step index and extend the pod without guarding. One pass, inline: it runs on every
    fabric review.
    """
    out: list[str] = []
    get = pod.get
    meta = get("metadata", _ABSENT)
    if isinstance(meta, dict):
        if not isinstance(v := meta.get("annotations", _ABSENT), dict):
            _wrong(out, "metadata.annotations", v, _OBJECT)
        if not _is_map(v := meta.get("labels", _ABSENT), True):
            _wrong(out, "metadata.labels", v, _STRINGS)
        if not isinstance(v := meta.get("namespace", _ABSENT), str):
            _wrong(out, "metadata.namespace", v, "a string")
    else:
        _wrong(out, "metadata", meta, _OBJECT)
    spec = get("spec", _ABSENT)
    if not isinstance(spec, dict):
        _wrong(out, "spec", spec, _OBJECT)
        return out
    if not _is_map(v := spec.get("nodeSelector", _ABSENT), True):
        _wrong(out, "spec.nodeSelector", v, _STRINGS)
    containers = spec.get("containers", _ABSENT)
    if not _list_of_maps(containers):
        _wrong(out, "spec.containers", containers, _LIST)
        containers = ()
    for key in ("volumes", "schedulingGates"):
        if not _list_of_maps(v := spec.get(key, _ABSENT)):
            _wrong(out, f"spec.{key}", v, _LIST)
    for i, c in enumerate(containers):
        res = c.get("resources", _ABSENT)
        if isinstance(res, dict):
            if not isinstance(v := res.get("limits", _ABSENT), dict):
                _wrong(out, f"spec.containers[{i}].resources.limits", v, _OBJECT)
        else:
            _wrong(out, f"spec.containers[{i}].resources", res, _OBJECT)
        if not _list_of_maps(v := c.get("env", _ABSENT)):
            _wrong(out, f"spec.containers[{i}].env", v, _LIST)
        if not _list_of_maps(v := c.get("volumeMounts", _ABSENT)):
            _wrong(out, f"spec.containers[{i}].volumeMounts", v, _LIST)
    aff = spec.get("affinity", _ABSENT)
    if not isinstance(aff, dict):
        _wrong(out, "spec.affinity", aff, _OBJECT)
        return out
    node_aff = aff.get("nodeAffinity", _ABSENT)
    if not isinstance(node_aff, dict):
        _wrong(out, "spec.affinity.nodeAffinity", node_aff, _OBJECT)
        return out
    if not _list_of_maps(v := node_aff.get(_PREF, _ABSENT)):
        _wrong(out, _AFF + _PREF, v, _LIST)
    req = node_aff.get(_REQ, _ABSENT)
    if not isinstance(req, dict):
        _wrong(out, _AFF + _REQ, req, _OBJECT)
        return out
    terms = req.get("nodeSelectorTerms", _ABSENT)
    if not _list_of_maps(terms):
        _wrong(out, _TERMS, terms, _LIST)
        return out
    for i, term in enumerate(terms):
        exprs = term.get("matchExpressions", _ABSENT)
        if not _list_of_maps(exprs):
            _wrong(out, f"{_TERMS}[{i}].matchExpressions", exprs, _LIST)
            continue
        for j, e in enumerate(exprs):
            if not _is_requirement(e):
                at = f"{_TERMS}[{i}].matchExpressions[{j}]"
                out.append(f"{at} is not a requirement {{key, operator, values}}")
    return out


def gpu_count(pod: Mapping[str, Any], problems: list[str] | None = None) -> int:
    """The pod's nvidia.com/gpu limits summed over its containers; a limit that is not a whole
    number is a problem (added to `problems`, or raised as Invalid when none is given)."""
    found: list[str] = []
    total = 0
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    for c in containers if isinstance(containers, list) else []:
        res = c.get("resources") if isinstance(c, Mapping) else None
        limits = res.get("limits") if isinstance(res, Mapping) else None
        value = limits.get(api.GPU_RESOURCE) if isinstance(limits, Mapping) else None
        if value is None:
            continue
        number = value if type(value) is int else parse_int64(str(value))
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


def check(
    pod: Mapping[str, Any], namespace: str, claims: ClaimLookup
) -> tuple[Requirements | None, list[str]]:
    """Requirements and every problem found (pod shape, annotations, claim, GPU count): the
    Requirements are None when any problem was found. Callers with more checks of their own (group
    placement) add their problems to the list and deny once with all of them."""
    problems = [p for p in pod_problems(dict(pod)) if not p.startswith("metadata.annotations ")]
    annotations = annotations_of(pod)
    for key in sorted(k for k in annotations if isinstance(k, str)):
        value = annotations[key]
        if not key.startswith(api.ANNOTATION_PREFIX):
            continue
        if key not in KNOWN_ANNOTATIONS:
            problems.append(
                f"unknown annotation {_show(key)}; gpufabric.io annotations are: "
                + ", ".join(sorted(KNOWN_ANNOTATIONS))
            )
        elif not isinstance(value, str):
            problems.append(f"{key}: {_show(value)} is not a string")
    fields: dict[str, Any] = {}
    claim = annotations.get(api.ANN_CLAIM)
    if isinstance(claim, str):
        spec = claims(namespace, claim)
        if spec is None:
            problems.append(
                f"{api.ANN_CLAIM}: GpuClaim {_show(claim)} not found in namespace {namespace!r}"
            )
        else:
            fields.update(_from_claim(spec, claim, problems))
    # Inline annotations override the claim field by field.
    for key, (name, parse) in _PARSERS.items():
        value = annotations.get(key)
        if isinstance(value, str):
            try:
                fields[name] = parse(key, value)
            except Invalid as err:
                problems.extend(err.problems)
    gpus = gpu_count(pod, problems)
    if problems:
        return None, problems
    if fields.get("rdma") is None and (
        fields.get("rdma_min_ports") is not None or fields.get("preferred_hcas")
    ):
        fields["rdma"] = "required"  # asking for ports or HCAs implies RDMA
    fields = {k: v for k, v in fields.items() if v is not None or k == "rdma"}
    return Requirements(gpus=gpus, claim=claim if isinstance(claim, str) else None, **fields), []

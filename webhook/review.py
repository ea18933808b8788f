"""AdmissionReview v1 wire types and parsing. A body that is not a review raises BadReview (400)."""

from __future__ import annotations

import base64
import json
from typing import Any, Literal, NotRequired, TypedDict

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class BadReview(ValueError):
    """The HTTP body is not an AdmissionReview v1 for a pod: answered with HTTP 400."""


class Request(TypedDict):
    uid: str
    kind: dict[str, str]
    namespace: NotRequired[str]
    operation: Operation
    object: dict[str, Any]


class Status(TypedDict, total=False):
    code: int
    message: str
    reason: str


class Response(TypedDict, total=False):
    uid: str
    allowed: bool
    patchType: str
    patch: str
    warnings: list[str]
    status: Status


class Review(TypedDict):
    apiVersion: str
    kind: str
    response: Response


MAX_DEPTH = 64  # real reviews nest 13-17 levels (reference/k8s-wire/admission); the pod schema
# cannot go much deeper, and a bound keeps every later walk of the object far from RecursionError.


def too_deep(data: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether data nests deeper than limit, without recursion (one level at a time: a
    comprehension per container costs a fraction of a stack entry per value)."""
    level, depth = [data], 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                below += [v for v in item.values() if isinstance(v, dict | list)]
            elif isinstance(item, list):
                below += [v for v in item if isinstance(v, dict | list)]
        level, depth = below, depth + 1
    return False


def _ours(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return isinstance(annotations, dict) and any(
        isinstance(k, str) and k.startswith("gpufabric.io/") for k in annotations
    )


def parse(body: bytes) -> Request:
    """Check the envelope and return it with every field of the declared type.

    Only the envelope decides 400: a well-formed review whose pod has odd field types is answered
    by the admission rules (pod_problems names the field in the denial). The depth bound is
    checked only for pods the webhook reads (a gpufabric.io annotation): nothing walks any other
    pod, and walking every body would cost an unannotated pod's review a fifth more.
    """
    try:
        data = json.loads(body)
    except RecursionError:
        raise BadReview(f"body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError is a ValueError
        raise BadReview(f"body is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise BadReview("body is not a JSON object")
    if data.get("apiVersion") != "admission.k8s.io/v1" or data.get("kind") != "AdmissionReview":
        raise BadReview("expected apiVersion admission.k8s.io/v1, kind AdmissionReview")
    req = data.get("request")
    if not isinstance(req, dict):
        raise BadReview("AdmissionReview has no request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid missing")
    kind = req.get("kind")
    if (
        not isinstance(kind, dict)
        or kind.get("kind") != "Pod"
        or kind.get("group", "") != ""
        or not all(isinstance(v, str) for v in kind.values())
    ):
        raise BadReview("only core/v1 Pod reviews are handled")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadReview("request.operation invalid")
    obj = req.get("object")
    if operation in ("CREATE", "UPDATE") and not isinstance(obj, dict):
        raise BadReview("request.object is not a pod object")
    if not isinstance(obj, dict):
        obj = {}
    if _ours(obj) and too_deep(data):
        raise BadReview(f"body nests deeper than {MAX_DEPTH} levels")
    namespace = req.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise BadReview("request.namespace is not a string")
    out = Request(uid=uid, kind=dict(kind), operation=operation, object=obj)
    if namespace:
        out["namespace"] = namespace
    return out


def _is_map(value: object, of_str: bool = False) -> bool:
    if not isinstance(value, dict):
        return False
    return not of_str or all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _list_of_maps(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


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


def pod_problems(pod: dict[str, Any]) -> list[str]:
    """Fields the webhook reads or extends that do not have their Kubernetes type, named by path.

    The API server decodes a pod into its typed struct before admission, so a real review never
    has these; checking them once here lets every later step index the pod without guarding.
    """
    out: list[str] = []

    def check(where: str, value: object, ok: bool, what: str) -> None:
        if value is not None and not ok:
            out.append(f"{where} is not {what}")

    meta = pod.get("metadata")
    check("metadata", meta, _is_map(meta), "an object")
    if isinstance(meta, dict):
        ann = meta.get("annotations")
        check("metadata.annotations", ann, _is_map(ann, True), "a map of strings")
        ns = meta.get("namespace")
        check("metadata.namespace", ns, isinstance(ns, str), "a string")
    spec = pod.get("spec")
    check("spec", spec, _is_map(spec), "an object")
    if not isinstance(spec, dict):
        return out
    sel = spec.get("nodeSelector")
    check("spec.nodeSelector", sel, _is_map(sel, True), "a map of strings")
    for key in ("containers", "volumes"):
        check(f"spec.{key}", spec.get(key), _list_of_maps(spec.get(key)), "a list of objects")
    for i, c in enumerate(spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        where = f"spec.containers[{i}]"
        res = c.get("resources")
        check(f"{where}.resources", res, _is_map(res), "an object")
        limits = res.get("limits") if isinstance(res, dict) else None
        check(f"{where}.resources.limits", limits, _is_map(limits), "an object")
        for key in ("env", "volumeMounts"):
            check(f"{where}.{key}", c.get(key), _list_of_maps(c.get(key)), "a list of objects")
    aff = spec.get("affinity")
    check("spec.affinity", aff, _is_map(aff), "an object")
    node_aff = aff.get("nodeAffinity") if isinstance(aff, dict) else None
    check("spec.affinity.nodeAffinity", node_aff, _is_map(node_aff), "an object")
    if not isinstance(node_aff, dict):
        return out
    where = "spec.affinity.nodeAffinity."
    pref = node_aff.get("preferredDuringSchedulingIgnoredDuringExecution")
    check(where + "preferred…", pref, _list_of_maps(pref), "a list of objects")
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    check(where + "required…", req, _is_map(req), "an object")
    terms = req.get("nodeSelectorTerms") if isinstance(req, dict) else None
    check(where + "required….nodeSelectorTerms", terms, _list_of_maps(terms), "a list of objects")
    for i, term in enumerate(terms if isinstance(terms, list) else []):
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        at = f"{where}required….nodeSelectorTerms[{i}].matchExpressions"
        check(at, exprs, _list_of_maps(exprs), "a list of objects")
        for j, e in enumerate(exprs if isinstance(exprs, list) else []):
            check(f"{at}[{j}]", e, _is_requirement(e), "a requirement {key, operator, values}")
    return out


def review(response: Response) -> Review:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def allowed(uid: str, patch: list[dict[str, Any]] | None, warnings: list[str]) -> Response:
    out: Response = {"uid": uid, "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warnings:
        out["warnings"] = warnings
    return out


def denied(uid: str, message: str, code: int = 400) -> Response:
    reason = "BadRequest" if code == 400 else "ServiceUnavailable" if code == 503 else "Forbidden"
    return {
        "uid": uid,
        "allowed": False,
        "status": {"code": code, "message": message, "reason": reason},
    }

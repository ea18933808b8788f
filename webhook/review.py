"""AdmissionReview v1 wire types and parsing. A body that is not a review raises BadReview (400)."""

from __future__ import annotations

import base64
import json
from itertools import repeat
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


_NOT_STRUCTURE = bytes(range(256)).translate(None, b'"[]{}')
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # depth does not care which kind of bracket


def text_too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """too_deep for the JSON text that json.loads has just accepted, with bytes operations only
    (about half the cost of walking the decoded value, which is a fifth of a review).

    Escaped backslashes and quotes go first (outside strings there are none, and inside a string
    removing pairs left to right is how JSON reads them); then only quotes and brackets are kept,
    the string contents (between quote pairs) dropped, and innermost bracket pairs removed one
    level per pass (json.loads accepted the text, so brackets pair up). A key that appears twice
    counts with both values, the one json.loads drops too: deep text is deep input."""
    skeleton = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = skeleton.translate(_ONE_KIND, _NOT_STRUCTURE)
    # Two adjacent quotes (a string without brackets) go at once: removing them keeps the parity
    # of the quotes before every other byte, so only strings holding brackets need the split.
    skeleton = skeleton.replace(b'""', b"")
    brackets = b"".join(skeleton.split(b'"')[::2]) if b'"' in skeleton else skeleton
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")  # one level: the innermost pairs
    return bool(brackets)


def _deep(body: bytes, data: Any) -> bool:
    # The text check reads UTF-8 with the object's brace first (what the API server sends); any
    # other encoding json.loads accepts (UTF-16/32 put NULs after the brace, or leading
    # whitespace, a BOM) gets the walk of the decoded value.
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return text_too_deep(body)
    return too_deep(data)


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
    if _ours(obj) and _deep(body, data):
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


def pod_problems(pod: dict[str, Any]) -> list[str]:
    """Fields the webhook reads or extends that do not have their Kubernetes type, named by path.

    The API server decodes a pod into its typed struct before admission, so a real review never
    has these (nor an explicit null: empty fields are left out); checking them once here lets every
    later step index and extend the pod without guarding.
    """
    out: list[str] = []

    def check(parent: dict[str, Any], key: str, where: str, ok: Any, what: str) -> Any:
        """parent[key] when present and of the right type, else None (and a problem if present)."""
        if key not in parent:
            return None
        value = parent[key]
        if value is None or not ok(value):
            out.append(f"{where} is {_json_type(value)}, not {what}")
            return None
        return value

    def obj(value: object) -> bool:
        return _is_map(value)

    def strings(value: object) -> bool:
        return _is_map(value, True)

    meta = check(pod, "metadata", "metadata", obj, "an object")
    if meta is not None:
        check(meta, "annotations", "metadata.annotations", obj, "an object")
        check(meta, "labels", "metadata.labels", strings, "a map of strings")
        check(meta, "namespace", "metadata.namespace", lambda v: isinstance(v, str), "a string")
    spec = check(pod, "spec", "spec", obj, "an object")
    if spec is None:
        return out
    check(spec, "nodeSelector", "spec.nodeSelector", strings, "a map of strings")
    for key in ("containers", "volumes", "schedulingGates"):
        check(spec, key, f"spec.{key}", _list_of_maps, "a list of objects")
    containers = spec.get("containers")
    for i, c in enumerate(containers if _list_of_maps(containers) else []):
        where = f"spec.containers[{i}]"
        res = check(c, "resources", f"{where}.resources", obj, "an object")
        if res is not None:
            check(res, "limits", f"{where}.resources.limits", obj, "an object")
        for key in ("env", "volumeMounts"):
            check(c, key, f"{where}.{key}", _list_of_maps, "a list of objects")
    aff = check(spec, "affinity", "spec.affinity", obj, "an object")
    node_aff = check(aff or {}, "nodeAffinity", "spec.affinity.nodeAffinity", obj, "an object")
    if node_aff is None:
        return out
    where = "spec.affinity.nodeAffinity."
    pref_key, req_key = (
        "preferredDuringSchedulingIgnoredDuringExecution",
        "requiredDuringSchedulingIgnoredDuringExecution",
    )
    check(node_aff, pref_key, where + pref_key, _list_of_maps, "a list of objects")
    req = check(node_aff, req_key, where + req_key, obj, "an object")
    where += req_key + ".nodeSelectorTerms"
    terms = check(req or {}, "nodeSelectorTerms", where, _list_of_maps, "a list of objects")
    for i, term in enumerate(terms or []):
        at = f"{where}[{i}].matchExpressions"
        exprs = check(term, "matchExpressions", at, _list_of_maps, "a list of objects")
        for j, e in enumerate(exprs or []):
            if not _is_requirement(e):
                out.append(f"{at}[{j}] is not a requirement {{key, operator, values}}")
    return out


def review(response: Response) -> Review:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


# The patch's ops are a fresh tree (ops and the values they add): no cycle check needed.
_compact = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def allowed(uid: str, patch: list[dict[str, Any]] | None, warnings: list[str]) -> Response:
    out: Response = {"uid": uid, "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(_compact(patch).encode()).decode()
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

"""AdmissionReview v1 wire types and parsing. A body that is not a review raises BadReview (400)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import repeat
from typing import Any, Literal, NotRequired, TypedDict

import pybase64

from common import api
from webhook.admission import jsoncodec
from webhook.kube.nodeselector import PREFERRED, REQUIRED

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
# An escape and the character it escapes, as JSON reads them left to right (outside strings
# there are none): what goes leaves every quote left opening or closing a string. One pass in C
# for any number of escapes; a real pod has a few (managedFields keys like k:{\\"name\\":...}),
# which a loop of finds took 2-4 us for, twice the pass.
_ESCAPE = re.compile(rb"\\.", re.DOTALL)


def skeleton(body: bytes) -> bytes:
    """The body's quotes and brackets (both kinds as [ and ]), escapes left out: what the
    nesting bound reads, and its count of "[" is the body's number of opening brackets (what
    jsoncodec.loads decides by), so one pass over the body serves both."""
    if b"\\" in body:  # a memchr; most bodies have no escape at all
        body = _ESCAPE.sub(b"", body)
    return body.translate(_ONE_KIND, _NOT_STRUCTURE)


def text_too_deep(body: bytes, limit: int = MAX_DEPTH, structure: bytes | None = None) -> bool:
    """too_deep for the JSON text that json.loads has just accepted, with bytes operations only
    (a fraction of the cost of walking the decoded value); `structure` is skeleton(body) when
    the caller has it.

    Escapes go first (_ESCAPE); then only quotes and brackets are kept, the string
    contents (between quote pairs) dropped, and innermost bracket pairs removed one level per
    pass (json.loads accepted the text, so brackets pair up). A key that appears twice counts
    with both values, the one json.loads drops too: deep text is deep input."""
    skeleton_ = skeleton(body) if structure is None else structure
    # A string without brackets leaves two adjacent quotes. Removing those pairs keeps the parity
    # of the quotes before every other byte, so only strings holding brackets are left to split
    # out (none, in a pod without managedFields: the split is then one piece). This costs less
    # than counting the quotes to see whether any string holds a bracket, and a real pod's
    # managedFields keys (k:{"name":...}) always do.
    pairless = skeleton_.replace(b'""', b"")
    brackets = b"".join(pairless.split(b'"')[::2])
    for level in range(limit):
        # After `level` passes the depth is `level` plus that of what is left, which is at most
        # its openings less its leaves ("[]", containers without containers inside) plus one:
        # a chain d deep holds one leaf, and every other leaf opens a container off the chain.
        # Within the limit, the passes can stop (real reviews stop before the first).
        if level + len(brackets) // 2 - brackets.count(b"[]") + 1 <= limit:
            return False
        brackets = brackets.replace(b"[]", b"")  # one level: the innermost pairs
    return bool(brackets)


def _deep(body: bytes, data: Any, structure: bytes) -> bool:
    # The text check reads UTF-8 with the object's brace first (what the API server sends); any
    # other encoding json.loads accepts (UTF-16/32 put NULs after the brace, or leading
    # whitespace, a BOM) gets the walk of the decoded value.
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return text_too_deep(body, MAX_DEPTH, structure)
    return too_deep(data)


# A decoded pod's dicts pass at the exact-type check, where the Mapping ABC alone costs a call
# through abc for each value; a tuple made once, where `dict | Mapping` in the call builds a union
# at every call (60 ns, several times per review).
MAPPING = (dict, Mapping)


def annotations_of(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, MAPPING) else None
    return ann if isinstance(ann, MAPPING) else {}


def has_fabric_annotations(pod: Mapping[str, Any]) -> bool:
    """Whether the pod asks anything of gpufabric: only such pods are read (and depth-checked)."""
    return asks_fabric(annotations_of(pod))


def asks_fabric(annotations: Mapping[str, Any]) -> bool:
    """has_fabric_annotations for the annotations_of a pod the caller has already read."""
    for k in annotations:  # noqa: SIM110 (a loop: any() over a generator costs twice as much)
        if isinstance(k, str) and k.startswith(api.ANNOTATION_PREFIX):
            return True
    return False


def parse(body: bytes) -> Request:
    """Check the envelope and return it with every field of the declared type.

    Only the envelope decides 400: a well-formed review whose pod has odd field types is answered
    by the admission rules (pod_problems names the field in the denial). The depth bound is
    checked only for pods the webhook reads (a gpufabric.io annotation): nothing walks any other
    pod, and walking every body would cost an unannotated pod's review a fifth more.
    """
    try:
        structure = skeleton(body)
        data = jsoncodec.loads(body, structure.count(b"["))  # json.loads's, faster
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
        or not all(map(isinstance, kind.values(), _STRS))
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
    if has_fabric_annotations(obj) and _deep(body, data, structure):
        raise BadReview(f"body nests deeper than {MAX_DEPTH} levels")
    namespace = req.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise BadReview("request.namespace is not a string")
    out: Request = {"uid": uid, "kind": kind, "operation": operation, "object": obj}
    if namespace:
        out["namespace"] = namespace
    return out


# Endless, so one of each serves every all(map(isinstance, values, _DICTS)): a list of objects.
_DICTS, _STRS = repeat(dict), repeat(str)


def _strings(value: dict[Any, Any]) -> bool:
    return all(map(isinstance, value, _STRS)) and all(map(isinstance, value.values(), _STRS))


def _is_requirement(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    values = value.get("values")
    return (
        isinstance(value.get("key"), str)
        and isinstance(value.get("operator"), str)
        and (values is None or (isinstance(values, list) and all(map(isinstance, values, _STRS))))
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
_AFF = "spec.affinity.nodeAffinity."
_TERMS = _AFF + REQUIRED + ".nodeSelectorTerms"


def _wrong(where: str, value: object, what: str) -> str:
    return f"{where} is {_json_type(value)}, not {what}"


def pod_problems(pod: Mapping[str, Any]) -> list[str]:
    """Fields the webhook reads or extends that do not have their Kubernetes type, named by path.

    The API server decodes a pod into its typed struct before admission, so a real review never
    has these (nor an explicit null: empty fields are left out); checking them once here lets every
    later step index and extend the pod without guarding. One pass, inline, each check written
    out (`v is not _ABSENT` after the type test: a missing field costs no call): it runs on every
    fabric review.
    """
    out: list[str] = []
    meta = pod.get("metadata", _ABSENT)
    if isinstance(meta, dict):
        v = meta.get("annotations", _ABSENT)
        if not isinstance(v, dict) and v is not _ABSENT:
            out.append(_wrong("metadata.annotations", v, _OBJECT))
        v = meta.get("labels", _ABSENT)
        if not (isinstance(v, dict) and _strings(v)) and v is not _ABSENT:
            out.append(_wrong("metadata.labels", v, _STRINGS))
        v = meta.get("namespace", _ABSENT)
        if not isinstance(v, str) and v is not _ABSENT:
            out.append(_wrong("metadata.namespace", v, "a string"))
    elif meta is not _ABSENT:
        out.append(_wrong("metadata", meta, _OBJECT))
    spec = pod.get("spec", _ABSENT)
    if not isinstance(spec, dict):
        if spec is not _ABSENT:
            out.append(_wrong("spec", spec, _OBJECT))
        return out
    v = spec.get("nodeSelector", _ABSENT)
    if not (isinstance(v, dict) and _strings(v)) and v is not _ABSENT:
        out.append(_wrong("spec.nodeSelector", v, _STRINGS))
    containers = spec.get("containers", _ABSENT)
    if not (isinstance(containers, list) and all(map(isinstance, containers, _DICTS))):
        if containers is not _ABSENT:
            out.append(_wrong("spec.containers", containers, _LIST))
        containers = ()
    v = spec.get("volumes", _ABSENT)
    if not (isinstance(v, list) and all(map(isinstance, v, _DICTS))) and v is not _ABSENT:
        out.append(_wrong("spec.volumes", v, _LIST))
    v = spec.get("schedulingGates", _ABSENT)
    if not (isinstance(v, list) and all(map(isinstance, v, _DICTS))) and v is not _ABSENT:
        out.append(_wrong("spec.schedulingGates", v, _LIST))
    for i, c in enumerate(containers):
        res = c.get("resources", _ABSENT)
        if isinstance(res, dict):
            v = res.get("limits", _ABSENT)
            if not isinstance(v, dict) and v is not _ABSENT:
                out.append(_wrong(f"spec.containers[{i}].resources.limits", v, _OBJECT))
        elif res is not _ABSENT:
            out.append(_wrong(f"spec.containers[{i}].resources", res, _OBJECT))
        v = c.get("env", _ABSENT)
        if not (isinstance(v, list) and all(map(isinstance, v, _DICTS))) and v is not _ABSENT:
            out.append(_wrong(f"spec.containers[{i}].env", v, _LIST))
        v = c.get("volumeMounts", _ABSENT)
        if not (isinstance(v, list) and all(map(isinstance, v, _DICTS))) and v is not _ABSENT:
            out.append(_wrong(f"spec.containers[{i}].volumeMounts", v, _LIST))
    aff = spec.get("affinity", _ABSENT)
    if not isinstance(aff, dict):
        if aff is not _ABSENT:
            out.append(_wrong("spec.affinity", aff, _OBJECT))
        return out
    node_aff = aff.get("nodeAffinity", _ABSENT)
    if not isinstance(node_aff, dict):
        if node_aff is not _ABSENT:
            out.append(_wrong("spec.affinity.nodeAffinity", node_aff, _OBJECT))
        return out
    v = node_aff.get(PREFERRED, _ABSENT)
    if not (isinstance(v, list) and all(map(isinstance, v, _DICTS))) and v is not _ABSENT:
        out.append(_wrong(_AFF + PREFERRED, v, _LIST))
    req = node_aff.get(REQUIRED, _ABSENT)
    if not isinstance(req, dict):
        if req is not _ABSENT:
            out.append(_wrong(_AFF + REQUIRED, req, _OBJECT))
        return out
    terms = req.get("nodeSelectorTerms", _ABSENT)
    if not (isinstance(terms, list) and all(map(isinstance, terms, _DICTS))):
        if terms is not _ABSENT:
            out.append(_wrong(_TERMS, terms, _LIST))
        return out
    for i, term in enumerate(terms):
        exprs = term.get("matchExpressions", _ABSENT)
        if isinstance(exprs, list) and all(map(_is_requirement, exprs)):
            continue  # the usual term (each expression a requirement, so an object)
        if not (isinstance(exprs, list) and all(map(isinstance, exprs, _DICTS))):
            if exprs is not _ABSENT:
                out.append(_wrong(f"{_TERMS}[{i}].matchExpressions", exprs, _LIST))
            continue
        for j, e in enumerate(exprs):
            if not _is_requirement(e):
                at = f"{_TERMS}[{i}].matchExpressions[{j}]"
                out.append(f"{at} is not a requirement {{key, operator, values}}")
    return out


def review(response: Response) -> Review:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def allowed(uid: str, patch: list[dict[str, Any]] | None, warnings: list[str]) -> Response:
    out: Response = {"uid": uid, "allowed": True}
    if patch:
        out["patchType"] = "JSONPatch"
        # Compact JSON, the bytes json.dumps(patch, separators=(",", ":")) has always sent.
        # pybase64: binascii's encoder is a byte loop (2 us for a 3 KiB patch), pybase64's SIMD
        out["patch"] = pybase64.b64encode_as_string(jsoncodec.dumps(patch))
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

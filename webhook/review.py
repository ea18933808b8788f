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


def parse(body: bytes) -> Request:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadReview(f"body is not JSON: {err}") from err
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
    if not isinstance(kind, dict) or kind.get("kind") != "Pod" or kind.get("group", "") != "":
        raise BadReview("only core/v1 Pod reviews are handled")
    if req.get("operation") not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadReview("request.operation invalid")
    obj = req.get("object")
    if req.get("operation") in ("CREATE", "UPDATE") and not isinstance(obj, dict):
        raise BadReview("request.object is not a pod object")
    if obj is not None and not isinstance(obj.get("spec", {}), dict):
        raise BadReview("pod spec is not an object")
    namespace = req.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise BadReview("request.namespace is not a string")
    return Request(
        uid=uid,
        kind={str(k): str(v) for k, v in kind.items()},
        operation=req["operation"],
        object=obj or {},
        **({"namespace": namespace} if namespace else {}),  # type: ignore[typeddict-item]
    )


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

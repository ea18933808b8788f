"""CustomObjectsApi as kube-apiserver answers it for the namespaced objects groups own, with
the Status bodies of ../shared/reference/k8s-wire/ (errors/404-missing-gpunodestatus.json,
errors/403-rbac-forbidden-list.json, leases/05-create-exists-409.json, errors/422-*.json): a
create of a name that exists is 409 AlreadyExists; a merge patch naming another metadata.uid and
a delete whose UID precondition fails are 409 Conflict; a JSON patch whose `test` fails is 422;
an object with finalizers is only marked deleted. `refuse` makes the next call of a verb answer
one code, as RBAC (403), a namespace gone (404) or a ValidatingAdmissionPolicy (422) would."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from kubernetes.client.exceptions import ApiException

from tests.webhook.groups.burst_world import merged

REASONS = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid", 500: "InternalError"}


def status(code: int, message: str, reason: str = "") -> ApiException:
    """The ApiException the kubernetes client raises for a Status answer of `code`."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS[code],
        "code": code,
    }
    err = ApiException(status=code, reason=reason or REASONS[code])
    err.body = json.dumps(body)
    return err


class OwnedServer:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural, ns, name)
        self.calls: list[tuple[str, str]] = []  # (verb, name)
        self.refuse: dict[str, tuple[int, str]] = {}  # verb -> (code, message), answered once
        self.serial = 0

    def _refused(self, verb: str) -> None:
        if verb in self.refuse:
            code, message = self.refuse.pop(verb)
            raise status(code, message)

    def _have(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        have = self.objects.get((plural, namespace, name))
        if have is None:
            raise status(404, f'{plural} "{name}" not found')
        return have

    def create_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, body: Any, **kw: Any
    ) -> Any:
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        self._refused("create")
        if (plural, namespace, name) in self.objects:
            raise status(409, f'{plural}.{group} "{name}" already exists', "AlreadyExists")
        self.serial += 1
        obj = copy.deepcopy(body)
        obj["metadata"] |= {"uid": f"uid-{self.serial}", "resourceVersion": str(self.serial)}
        self.objects[(plural, namespace, name)] = obj
        return copy.deepcopy(obj)

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **kw: Any
    ) -> Any:
        self.calls.append(("get", name))
        return copy.deepcopy(self._have(plural, namespace, name))

    def patch_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: Any, **kw: Any
    ) -> Any:
        self.calls.append(("patch", name))
        self._refused("patch")
        have = self._have(plural, namespace, name)
        if kw["_content_type"] == "application/json-patch+json":
            try:
                patched = jsonpatch.JsonPatch(body).apply(copy.deepcopy(have))
            except jsonpatch.JsonPatchException as err:
                raise status(422, str(err)) from err
        else:
            uid = (body.get("metadata") or {}).get("uid")
            if uid not in (None, have["metadata"]["uid"]):
                raise status(409, f"Precondition failed: UID in precondition: {uid}")
            patched = merged(have, body)
        self.objects[(plural, namespace, name)] = patched
        if patched["metadata"].get("deletionTimestamp") and not patched["metadata"].get(
            "finalizers"
        ):
            del self.objects[(plural, namespace, name)]
        return copy.deepcopy(patched)

    def delete_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **kw: Any
    ) -> Any:
        self.calls.append(("delete", name))
        self._refused("delete")
        have = self._have(plural, namespace, name)
        uid = kw["body"].preconditions.uid
        if uid != have["metadata"]["uid"]:
            raise status(409, f"Precondition failed: UID in precondition: {uid}")
        if have["metadata"].get("finalizers"):  # held: marked only
            have["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
        else:
            del self.objects[(plural, namespace, name)]
        return {"kind": "Status", "status": "Success"}

"""An API server stand-in for the exports, with the behaviour the real one shows
(shared/reference/k8s-wire): a kind whose CRD is not installed is 404 on its list path; an apply
with a field the CRD's schema does not declare, or a wrong type, is HTTP 500 ("failed to create
typed patch object"); an apply is an upsert; an identical apply changes nothing (no new
resourceVersion); a Topology's levels are immutable (CEL `self == oldSelf`: HTTP 422); deleting
what is not there is 404. Schemas come from the schedulers' own CRDs (tests/fixtures/schedulers)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml

from tests.webhook.export.fabrics import SCHEDULERS
from webhook.export.controller import ExportError, Obj
from webhook.export.kinds import Kind

CRDS = {
    ("kueue.x-k8s.io", "topologies"): "kueue-topology-crd.yaml",
    ("kai.scheduler", "topologies"): "kai-topology-crd.yaml",
    ("topology.volcano.sh", "hypernodes"): "volcano-hypernode-crd.yaml",
}


def crd_versions(group: str, plural: str, crd_file: str = "") -> dict[str, dict[str, Any]]:
    crd = next(
        d
        for d in yaml.safe_load_all((SCHEDULERS / (crd_file or CRDS[(group, plural)])).read_text())
        if d and d.get("kind") == "CustomResourceDefinition"
    )
    return {
        v["name"]: v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["served"]
    }


def undeclared(obj: Any, schema: Mapping[str, Any], path: str = "") -> str | None:
    """The first field the structural schema does not declare (what SSA answers 500 for)."""
    if isinstance(obj, Mapping) and "properties" in schema:
        for key, value in obj.items():
            if key not in schema["properties"]:
                return f"{path}.{key}"
            found = undeclared(value, schema["properties"][key], f"{path}.{key}")
            if found:
                return found
    if isinstance(obj, list) and "items" in schema:
        for i, item in enumerate(obj):
            found = undeclared(item, schema["items"], f"{path}[{i}]")
            if found:
                return found
    return None


class FakeSchedulerApi:
    def __init__(self, *installed: tuple[str, str, tuple[str, ...]]) -> None:
        self.crds: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.objects: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, str]] = []  # (verb, plural, name) of every write
        self.version = 100
        for group, plural, versions in installed:
            self.install(group, plural, versions)

    def install(
        self, group: str, plural: str, versions: tuple[str, ...] = (), crd_file: str = ""
    ) -> None:
        """Serve the kind at `versions` of its CRD (all served ones when empty); `crd_file`: an
        older release's CRD (e.g. Kueue 0.13's, v1alpha1 only)."""
        schemas = crd_versions(group, plural, crd_file)
        self.crds[(group, plural)] = {v: schemas[v] for v in versions or schemas}

    def put(self, kind: Kind, obj: dict[str, Any]) -> None:
        """An object somebody else created."""
        self.objects.setdefault((kind.group, kind.plural), {})[obj["metadata"]["name"]] = (
            copy.deepcopy(obj)
        )

    def stored(self, kind: Kind) -> dict[str, dict[str, Any]]:
        return self.objects.get((kind.group, kind.plural), {})

    # -- ExportApi -------------------------------------------------------------------------
    def served(self, kind: Kind) -> str | None:
        versions = self.crds.get((kind.group, kind.plural), {})
        return next((v for v in kind.versions if v in versions), None)

    def list(self, kind: Kind, version: str) -> list[Obj]:
        self._schema(kind, version)
        out = []
        for obj in self.stored(kind).values():
            o = copy.deepcopy(obj)
            o["apiVersion"] = f"{kind.group}/{version}"
            out.append(o)
        return out

    def apply(self, kind: Kind, version: str, body: Obj) -> None:
        schema = self._schema(kind, version)
        name = body["metadata"]["name"]
        self.requests.append(("apply", kind.plural, name))
        field = undeclared(body, schema)
        typed = f"failed to create typed patch object (/{name}; {kind.group}/{version}, Kind={kind.kind})"
        if field:
            raise ExportError(500, f"{typed}: {field}: field not declared in schema")
        try:
            jsonschema.validate(dict(body), schema)
        except jsonschema.ValidationError as err:
            raise ExportError(500, f"{typed}: {err.message}") from None
        objs = self.objects.setdefault((kind.group, kind.plural), {})
        old = objs.get(name)
        if old is not None and _levels(old) != _levels(body):
            raise ExportError(
                422,
                f"{kind.kind}.{kind.group} {name!r} is invalid: spec.levels: field is immutable",
            )
        new = copy.deepcopy(dict(body))
        meta = new["metadata"]
        if old is not None:
            merged = {**old, "spec": new["spec"]}
            merged["metadata"] = {
                **old["metadata"],
                "labels": {**old["metadata"].get("labels", {}), **meta.get("labels", {})},
            }
            if merged == old:
                return  # a no-op apply: nothing changes, no new resourceVersion
            new = merged
        self.version += 1
        new["metadata"]["resourceVersion"] = str(self.version)
        new["metadata"].setdefault("uid", f"uid-{self.version}")
        objs[name] = new

    def delete(self, kind: Kind, version: str, name: str) -> None:
        self._schema(kind, version)
        self.requests.append(("delete", kind.plural, name))
        if self.stored(kind).pop(name, None) is None:
            raise ExportError(404, f"{kind.plural}.{kind.group} {name!r} not found")

    def _schema(self, kind: Kind, version: str) -> dict[str, Any]:
        schema = self.crds.get((kind.group, kind.plural), {}).get(version)
        if schema is None:
            raise ExportError(404, "the server could not find the requested resource")
        return schema


def _levels(obj: Obj) -> list[str]:
    return [lv["nodeLabel"] for lv in (obj.get("spec") or {}).get("levels") or []]

"""The pod templates inside a workload object, for the offline commands. Pure.

Users annotate pod templates (README), so `mutate` and `explain` take whatever object holds one: a
Pod itself; Job, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController
(`spec.template`); CronJob (`spec.jobTemplate.spec.template`); JobSet
(`spec.replicatedJobs[].template.spec.template`); Kubeflow training jobs (PyTorchJob, MPIJob, TFJob
and the like: `spec.<kind>ReplicaSpecs.<role>.template`); LeaderWorkerSet
(`spec.leaderWorkerTemplate.leaderTemplate` / `.workerTemplate`); and a List of any of these.
Each template is handed to admission as the Pod it will create (the object's namespace), and
found again by its JSON pointer to write the result back in the object's own shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_SPEC_TEMPLATE = frozenset(
    {"Job", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController"}
)


@dataclass(frozen=True, slots=True)
class Template:
    where: str  # for people: "Job train: spec.template"
    pointer: str  # JSON pointer to the template in the document ("" for a Pod itself)
    pod: dict[str, Any]  # the Pod it creates: the template's metadata and spec


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _found(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(dotted path for people, JSON pointer, template) of every pod template in one object."""
    kind, spec = doc.get("kind"), _map(doc.get("spec"))
    if kind in _SPEC_TEMPLATE:
        yield "spec.template", "/spec/template", spec.get("template")
    elif kind == "CronJob":
        job = _map(_map(spec.get("jobTemplate")).get("spec"))
        path = "spec.jobTemplate.spec.template"
        yield path, "/" + path.replace(".", "/"), job.get("template")
    elif kind == "JobSet":
        jobs = spec.get("replicatedJobs")
        for i, job in enumerate(jobs if isinstance(jobs, list) else []):
            name = _map(job).get("name", i)
            inner = _map(_map(_map(job).get("template")).get("spec")).get("template")
            yield (
                f"spec.replicatedJobs[{name}].template.spec.template",
                f"/spec/replicatedJobs/{i}/template/spec/template",
                inner,
            )
    elif kind == "LeaderWorkerSet":
        lws = _map(spec.get("leaderWorkerTemplate"))
        for key in ("leaderTemplate", "workerTemplate"):
            if key in lws:
                path = f"spec.leaderWorkerTemplate.{key}"
                yield path, "/" + path.replace(".", "/"), lws[key]
    else:  # Kubeflow training jobs: spec.pytorchReplicaSpecs, mpiReplicaSpecs, tfReplicaSpecs...
        for field, roles in spec.items():
            if not (isinstance(field, str) and field.endswith("ReplicaSpecs")):
                continue
            for role, replica in _map(roles).items():
                yield (
                    f"spec.{field}.{role}.template",
                    f"/spec/{_escape(field)}/{_escape(str(role))}/template",
                    _map(replica).get("template"),
                )


def _pod(doc: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(_map(template.get("metadata")))
    namespace = _map(doc.get("metadata")).get("namespace")
    if isinstance(namespace, str) and "namespace" not in meta:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec")}


def _name(doc: Mapping[str, Any]) -> str:
    name = _map(doc.get("metadata")).get("name")
    return f"{doc.get('kind')} {name}" if isinstance(name, str) else str(doc.get("kind"))


def templates(doc: object, where: str) -> list[Template]:
    """Every pod template in the document (a Pod is its own); [] when it holds none."""
    if not isinstance(doc, Mapping):
        return []
    kind = doc.get("kind", "Pod")
    if kind == "Pod":
        return [Template(f"Pod {_map(doc.get('metadata')).get('name', '')}".strip(), "", dict(doc))]
    if isinstance(kind, str) and kind.endswith("List"):
        items = doc.get("items")
        out = []
        for i, item in enumerate(items if isinstance(items, list) else []):
            for t in templates(item, where):
                out.append(Template(t.where, f"/items/{i}{t.pointer}", t.pod))
        return out
    return [
        Template(f"{_name(doc)}: {path}", pointer, _pod(doc, template))
        for path, pointer, template in _found(doc)
        if isinstance(template, Mapping)
    ]

"""A ComputeDomain API stand-in for the placer's IMEX side, checked against the driver's real CRD
(tests/fixtures/schedulers/dra-driver-nvidia-gpu/): every object created must pass the served
version's openAPIV3Schema and CEL rules, as kube-apiserver would check it; an update that changes
spec breaks the CRD's `self == oldSelf` rule. Plus members of an NVL72 group as the webhook leaves
them (annotations, the injected claim, the Job as controller)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from tests.webhook.export.fabrics import cel_failures, crd_schema
from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.extensions.imex.names import (
    ANN_COMPUTE_DOMAIN,
    CLAIM,
    FINALIZER,
    NODE_LABEL,
    TEMPLATE_TARGET,
    template_name,
)
from webhook.groups.extensions.imex.templates import Templates
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.framework.refusals import Rejected
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer

CRD = "dra-driver-nvidia-gpu/resource.nvidia.com_computedomains.yaml"  # v0.4.0 onwards
CRD_V25 = "dra-driver-nvidia-gpu/resource.nvidia.com_computedomains-v25.8.1.yaml"  # numNodes
JOB = ("batch/v1", "Job", "train", "uid-job-train")


def schema(crd: str = CRD) -> dict[str, Any]:
    return crd_schema(crd, "v1beta1")


def problems(obj: Mapping[str, Any], crd: str = CRD) -> list[str]:
    """Why kube-apiserver would refuse to create this ComputeDomain (schema, then CEL)."""
    s = schema(crd)
    found = [e.message for e in jsonschema.Draft7Validator(s).iter_errors(obj)]
    return found + cel_failures(obj, s)


def update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The CRD's transition rules on spec (`self == oldSelf`), evaluated with cel-python."""
    import celpy
    from celpy.adapter import json_to_cel

    rules = schema()["properties"]["spec"].get("x-kubernetes-validations") or []
    env, out = celpy.Environment(), []
    for rule in rules:
        program = env.program(env.compile(rule["rule"]))
        args = {"self": json_to_cel(new["spec"]), "oldSelf": json_to_cel(old["spec"])}
        if not bool(program.evaluate(args)):
            out.append(str(rule["message"]))
    return out


class FakeDomains:
    """computedomains.resource.nvidia.com in a fake API server; `pods` is the pod API, to tell
    what had been ungated when a ComputeDomain was made or deleted."""

    def __init__(self, pods: FakeApi) -> None:
        self.pods = pods
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.log: list[tuple[str, str, int]] = []  # (verb, name, patches so far)
        self.serial = 0
        self.refuse_delete = False  # the API server fails the delete (HTTP 500)
        self.refuse_create = 0  # the API server refuses creates with this code (e.g. RBAC's 403)
        self.nodes: dict[str, int] = {}  # the node count each create was given
        # NVIDIA's controller: makes a ComputeDomain's channel template into `templates` as it
        # is created, unless `lag` (then `controller()` makes the ones missing)
        self.templates: Templates | None = None
        self.lag = False
        # what the template watch does as a template comes: the placer's retry_all
        self.changed: Callable[[], None] = lambda: None

    def create_owned(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """As KubeOwnedApi on the driver from v0.4.0: numNodes left out (the CRD does not
        require it), refused (422) where the CRD would refuse it; one of the name there already
        (409) read back."""
        if self.refuse_create:
            what = f"create of ComputeDomain {namespace}/{body['metadata']['name']}"
            self.log.append(("refused", body["metadata"]["name"], len(self.pods.patches)))
            raise Rejected("computedomains/create", what, self.refuse_create, "forbidden")
        nodes = body["spec"]["numNodes"]
        body = {**body, "spec": {k: v for k, v in body["spec"].items() if k != "numNodes"}}
        wrong = problems(body)
        if wrong:
            what = f"create of ComputeDomain {namespace}/{body['metadata']['name']}"
            raise Rejected("computedomains/create", what, 422, "; ".join(wrong))
        name = body["metadata"]["name"]
        if (namespace, name) in self.objects:
            return copy.deepcopy(self.objects[(namespace, name)])
        self.serial += 1
        obj = copy.deepcopy(dict(body))
        obj["metadata"] |= {"uid": f"cd-uid-{self.serial}", "resourceVersion": str(self.serial)}
        self.objects[(namespace, name)] = obj
        self.nodes[name] = nodes
        self.log.append(("create", name, len(self.pods.patches)))
        if not self.lag:
            self.controller()
        return copy.deepcopy(obj)

    def controller(self) -> list[dict[str, Any]]:
        """The channel templates of the ComputeDomains that have none yet, as NVIDIA's
        controller labels them; fed to `templates`."""
        made = []
        for (namespace, _), cd in self.objects.items():
            meta, spec = cd["metadata"], cd["spec"]
            name = spec["channel"]["resourceClaimTemplate"]["name"]
            if self.templates is None or (namespace, name) in self.templates.of:
                continue
            labels = {NODE_LABEL: meta["uid"], TEMPLATE_TARGET: "Workload"}
            rct = {"metadata": {"namespace": namespace, "name": name, "labels": labels}}
            self.templates.event("ADDED", rct)
            made.append(rct)
        if made:
            self.changed()
        return made

    def delete_owned(self, namespace: str, name: str, uid: str, version: str) -> None:
        if self.refuse_delete:
            raise RuntimeError("HTTP 500")
        have = self.objects.get((namespace, name))
        if have is not None and have["metadata"]["uid"] == uid:
            if have["metadata"].get("finalizers"):  # held: marked only, as kube-apiserver does
                have["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            else:
                del self.objects[(namespace, name)]
            self.log.append(("delete", name, len(self.pods.patches)))

    def patch_owned(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch of metadata (owned.adoption): metadata.uid a precondition (409)."""
        have = self.objects.get((namespace, name))
        meta = patch.get("metadata") or {}
        if have is None or have["metadata"]["uid"] != meta.get("uid"):
            what = f"adoption of ComputeDomain {namespace}/{name}"
            raise Rejected("computedomains/patch", what, 409, "Precondition failed: UID")
        for k, v in meta.items():
            if v is None:
                have["metadata"].pop(k, None)
            else:
                have["metadata"][k] = copy.deepcopy(v)
        self.serial += 1
        have["metadata"]["resourceVersion"] = str(self.serial)
        self.log.append(("patch", name, len(self.pods.patches)))
        return copy.deepcopy(have)

    def release_owned(self, namespace: str, name: str, uid: str, version: str, index: int) -> None:
        have = self.objects.get((namespace, name))
        if have is None or have["metadata"]["uid"] != uid:
            return
        finalizers = have["metadata"].get("finalizers") or []
        if index >= len(finalizers) or finalizers[index] != FINALIZER:
            what = f"finalizer removal from ComputeDomain {namespace}/{name}"
            raise Rejected("computedomains/patch", what, 422, "the JSON patch test failed")
        del finalizers[index]
        self.log.append(("release", name, len(self.pods.patches)))
        if not finalizers and have["metadata"].get("deletionTimestamp"):
            del self.objects[(namespace, name)]

    def user_made(self, namespace: str, name: str, template: str) -> dict[str, Any]:
        self.serial += 1
        obj = {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": namespace, "uid": f"cd-uid-{self.serial}"},
            "spec": {"channel": {"resourceClaimTemplate": {"name": template}}},
        }
        assert problems(obj) == []
        self.objects[(namespace, name)] = obj
        if not self.lag:
            self.controller()
        return copy.deepcopy(obj)


def imex_setup(
    nodes: list[dict[str, Any]], busy: dict[str, int] | None = None, served: bool = True
) -> tuple[FakeApi, FakeDomains, Placer]:
    api = FakeApi()
    domains = FakeDomains(api)
    imex = ImexChannels(domains)
    if served:
        imex.book.listed([])
    else:
        imex.book.unserved()
    imex.templates.listed([])
    domains.templates = imex.templates
    placer = Placer(api, extensions=Extensions(Preemption(api), imex))
    domains.changed = placer.retry_all
    placer.nodes_listed(nodes)
    placer.pods_listed(
        [
            gpu_pod(f"busy-{n}", g, namespace="other", node_name=n, phase="Running")
            for n, g in (busy or {}).items()
        ]
    )
    return api, domains, placer


def member(
    i: int,
    size: int,
    gpus: int = 1,
    *,
    mode: str | None = "required",
    group: str = "moe",
    template: str | None = None,
    owner: tuple[str, str, str, str] | None = JOB,
    **kw: Any,
) -> dict[str, Any]:
    """Member i as the webhook admitted it: gated, its claim of the group's channel (or of
    `template`) in spec.resourceClaims and in its container, the Job as its controller."""
    ann = {ANN_COMPUTE_DOMAIN: mode} if mode else {}
    pod = gpu_pod(f"w-{i:02d}", gpus, group=group, size=size, gated=True, annotations=ann, **kw)
    claimed = template or (template_name(group) if mode else None)
    if claimed:
        pod["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": claimed}]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": CLAIM}]
    if owner is not None:
        api_version, kind, name, uid = owner
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}
        ]
    return pod


def arrive(api: FakeApi, placer: Placer, pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        placer.pod_event("ADDED", api.create(pod))
    settle(placer)


def settle(placer: Placer) -> None:
    """A reconcile, and one more for each watch event its writes bring back that tries the
    groups again (the ComputeDomain asked for, its template made by NVIDIA's controller)."""
    placer.reconcile()
    for _ in range(3):
        if not placer.dirty:
            return
        placer.reconcile()

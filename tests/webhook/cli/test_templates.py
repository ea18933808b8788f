"""`mutate` and `explain` take any object with a pod template, say which template they used, and
`mutate` prints the object back in its own shape (issue 17 item 12)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.webhook.cli.test_cli import run
from tests.webhook.helpers import GOLDEN, SAMPLES

TP8 = yaml.safe_load((SAMPLES / "pods" / "tp8-ib.yaml").read_text())
TEMPLATE = {"metadata": {"annotations": TP8["metadata"]["annotations"]}, "spec": TP8["spec"]}
GROUP = {"gpufabric.io/group": "llama", "gpufabric.io/group-size": "4"}


def _t(**extra: Any) -> dict[str, Any]:
    t = copy.deepcopy(TEMPLATE)
    t["metadata"]["annotations"].update(extra)
    return t


def _obj(api: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "train", "namespace": "team-a"}
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


WORKLOADS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "Job": (_obj("batch/v1", "Job", {"template": _t()}), ["/spec/template"]),
    "CronJob": (
        _obj(
            "batch/v1",
            "CronJob",
            {"schedule": "@daily", "jobTemplate": {"spec": {"template": _t()}}},
        ),
        ["/spec/jobTemplate/spec/template"],
    ),
    "StatefulSet": (
        _obj("apps/v1", "StatefulSet", {"serviceName": "s", "template": _t()}),
        ["/spec/template"],
    ),
    "JobSet": (
        _obj(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            {
                "replicatedJobs": [
                    {"name": "driver", "replicas": 1, "template": {"spec": {"template": _t()}}},
                    {"name": "workers", "replicas": 2, "template": {"spec": {"template": _t()}}},
                ]
            },
        ),
        [
            "/spec/replicatedJobs/0/template/spec/template",
            "/spec/replicatedJobs/1/template/spec/template",
        ],
    ),
    "PyTorchJob": (
        _obj(
            "kubeflow.org/v1",
            "PyTorchJob",
            {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": _t()},
                    "Worker": {"replicas": 3, "template": _t()},
                }
            },
        ),
        ["/spec/pytorchReplicaSpecs/Master/template", "/spec/pytorchReplicaSpecs/Worker/template"],
    ),
    "MPIJob": (
        _obj(
            "kubeflow.org/v2beta1",
            "MPIJob",
            {"mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": _t()}}},
        ),
        ["/spec/mpiReplicaSpecs/Worker/template"],
    ),
    "LeaderWorkerSet": (
        _obj(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            {"leaderWorkerTemplate": {"size": 4, "leaderTemplate": _t(), "workerTemplate": _t()}},
        ),
        ["/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"],
    ),
}


def _resolve(doc: dict[str, Any], pointer: str) -> Any:
    return jsonpatch.JsonPointer(pointer).resolve(doc)


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_mutate_edits_every_template_and_keeps_the_objects_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    obj, pointers = WORKLOADS[kind]
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(obj))
    code, out, _ = run(
        capsys, "mutate", "--pod", str(tmp_path / "w.yaml"), "--status", str(GOLDEN), "-o", "yaml"
    )
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["allowed"] is True and len(doc["templates"]) == len(pointers)
    assert all(w.startswith(f"{kind} train: spec.") for w in doc["templates"])
    patched = doc["object"]
    assert patched["kind"] == kind and patched["metadata"] == obj["metadata"]
    assert jsonpatch.apply_patch(obj, doc["patch"]) == patched
    for pointer in pointers:
        spec = _resolve(patched, pointer)["spec"]
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        assert env["NCCL_IB_HCA"].startswith("=mlx5_")
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        keys = [e["key"] for e in terms["nodeSelectorTerms"][0]["matchExpressions"]]
        assert "topology.kubernetes.io/zone" in keys and "gpufabric.io/rdma" in keys
    # explain says which template each section is about.
    code, out, _ = run(
        capsys, "explain", "--pod", str(tmp_path / "w.yaml"), "--status", str(GOLDEN)
    )
    assert code == 0
    assert out.count("Pod template: ") == len(pointers)
    assert f"Pod template: {doc['templates'][0]}" in out


def test_a_group_template_is_gated_and_labelled_inside_the_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _obj(
        "batch/v1",
        "Job",
        {"template": {"metadata": {"annotations": GROUP}, "spec": copy.deepcopy(TP8["spec"])}},
    )
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    code, out, _ = run(
        capsys, "mutate", "--pod", str(tmp_path / "job.yaml"), "--status", str(GOLDEN), "-o", "yaml"
    )
    assert code == 0
    patched = yaml.safe_load(out)["object"]["spec"]["template"]
    assert patched["metadata"]["labels"] == {"gpufabric.io/group": "llama"}
    assert patched["spec"]["schedulingGates"] == [{"name": "gpufabric.io/group"}]


def test_a_list_of_workloads_and_a_denied_template_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job, _ = WORKLOADS["Job"]
    bad = copy.deepcopy(WORKLOADS["StatefulSet"][0])
    bad["spec"]["template"]["metadata"]["annotations"]["gpufabric.io/rdma"] = "always"
    listing = {"apiVersion": "v1", "kind": "List", "items": [job, bad]}
    (tmp_path / "l.yaml").write_text(yaml.safe_dump(listing))
    code, out, _ = run(capsys, "mutate", "--pod", str(tmp_path / "l.yaml"), "--status", str(GOLDEN))
    assert code == 1
    assert out.startswith("denied: StatefulSet train: spec.template: gpufabric: ")
    assert "gpufabric.io/rdma" in out
    (tmp_path / "l.yaml").write_text(yaml.safe_dump({**listing, "items": [job, job]}))
    code, out, _ = run(capsys, "mutate", "--pod", str(tmp_path / "l.yaml"), "--status", str(GOLDEN))
    assert code == 0
    assert out.splitlines()[:2] == ["# pod template: Job train: spec.template"] * 2
    assert "# patched List" in out


def test_a_plain_pod_reads_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "mutate",
        "--pod",
        str(SAMPLES / "pods" / "tp8-ib.yaml"),
        "--status",
        str(GOLDEN),
        "-o",
        "yaml",
    )
    doc = yaml.safe_load(out)
    assert code == 0 and "pod" in doc and "object" not in doc and "templates" not in doc
    code, out, _ = run(
        capsys, "explain", "--pod", str(SAMPLES / "pods" / "tp8-ib.yaml"), "--status", str(GOLDEN)
    )
    assert "Pod template" not in out

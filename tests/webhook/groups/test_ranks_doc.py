"""The PyTorchJob and MPIJob examples of docs/ranks.md, as their operators would create the pods
(names and labels as the training operator and mpi-operator v2 write them), through the placer:
rank 0 is where each workload's rendezvous is, and the commands read the variables that hold it."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from tests.webhook.groups.fabric import fabric
from tests.webhook.groups.fake_api import FakeApi, setup
from tests.webhook.groups.test_placer import arrive
from webhook.groups.model.names import GATE, LABEL_GROUP

DOC = Path(__file__).resolve().parents[3] / "docs" / "ranks.md"


def example(kind: str) -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    docs = [d for b in blocks for d in yaml.safe_load_all(b) if isinstance(d, dict)]
    return next(d for d in docs if d.get("kind") == kind)


def pod_from(template: dict[str, Any], name: str, labels: dict[str, str]) -> dict[str, Any] | None:
    """The pod an operator creates from a replica template; None when it is not a group member."""
    meta = copy.deepcopy(template.get("metadata") or {})
    annotations = meta.get("annotations") or {}
    if "gpufabric.io/group" not in annotations:
        return None
    annotations |= {"gpufabric.io/group-locality": "required", "gpufabric.io/group-level": "auto"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {**labels, LABEL_GROUP: annotations["gpufabric.io/group"]},
            "annotations": annotations,
        },
        "spec": {**copy.deepcopy(template["spec"]), "schedulingGates": [{"name": GATE}]},
        "status": {"phase": "Pending"},
    }


def ranks(api: FakeApi) -> dict[str, int]:
    return {
        name: int(p["metadata"]["annotations"]["gpufabric.io/rank"])
        for (_, name), p in api.pods.items()
        if not p["spec"]["schedulingGates"]
    }


def test_the_pytorchjob_example_gives_the_master_rank_0_as_the_training_operator_does() -> None:
    job = example("PyTorchJob")
    name, specs = job["metadata"]["name"], job["spec"]["pytorchReplicaSpecs"]
    api, placer = setup(fabric(16))
    pods = []
    for kind, spec in specs.items():
        for i in range(spec["replicas"]):
            labels = {
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": kind.lower(),
                "training.kubeflow.org/replica-index": str(i),
            }
            if kind == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            pod = pod_from(spec["template"], f"{name}-{kind.lower()}-{i}", labels)
            assert pod is not None
            pods.append(pod)
    for pod in reversed(pods):
        arrive(api, placer, pod)
    assert ranks(api) == {"llama-master-0": 0} | {f"llama-worker-{i}": i + 1 for i in range(7)}
    (container,) = specs["Master"]["template"]["spec"]["containers"]
    command = " ".join(container["args"])
    assert "--node-rank=$GPUFABRIC_RANK" in command and "--master-addr=$MASTER_ADDR" in command
    assert container["name"] == "pytorch"  # the container the operator gives MASTER_ADDR


def test_the_mpijob_example_gives_worker_i_rank_i_in_hostfile_order() -> None:
    job = example("MPIJob")
    name, specs = job["metadata"]["name"], job["spec"]["mpiReplicaSpecs"]
    launcher = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/job-role": "launcher",
    }
    assert pod_from(specs["Launcher"]["template"], f"{name}-launcher", launcher) is None
    api, placer = setup(fabric(16))
    for i in reversed(range(specs["Worker"]["replicas"])):
        labels = {
            "training.kubeflow.org/job-name": name,
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": str(i),
        }
        pod = pod_from(specs["Worker"]["template"], f"{name}-worker-{i}", labels)
        assert pod is not None
        arrive(api, placer, pod)
    assert ranks(api) == {f"llama-worker-{i}": i for i in range(8)}
    slots = job["spec"]["slotsPerWorker"]
    args = specs["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["-n", str(slots * specs["Worker"]["replicas"])]

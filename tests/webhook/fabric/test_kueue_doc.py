"""docs/topology.md's Kueue Topology, ResourceFlavor and Job have the shape of Kueue's own samples
(tests/fixtures/fabric/kueue/, from kubernetes-sigs/kueue) and use gpufabric's label keys."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.webhook.fabric.helpers import REF
from webhook.fabric.levels import NETWORK_LABELS

DOC = Path(__file__).resolve().parents[3] / "docs" / "topology.md"


def _kinds(docs: list[Any]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs if isinstance(d, dict) and "kind" in d}


def _doc_yaml() -> dict[str, dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    docs = [d for b in blocks for d in yaml.safe_load_all(b)]
    return _kinds(docs)


def _keys(obj: Any, prefix: str = "") -> set[str]:
    """Paths of mapping keys (lists collapse to [])."""
    if isinstance(obj, dict):
        return {p for k, v in obj.items() for p in {f"{prefix}.{k}"} | _keys(v, f"{prefix}.{k}")}
    if isinstance(obj, list):
        return {p for v in obj for p in _keys(v, f"{prefix}[]")}
    return set()


def test_topology_levels_are_gpufabric_labels_then_hostname() -> None:
    ours = _doc_yaml()
    sample = _kinds(
        list(yaml.safe_load_all((REF / "kueue/tas-sample-gpu-queues.yaml").read_text()))
    )
    topo, their_topo = ours["Topology"], sample["Topology"]
    assert topo["apiVersion"] == their_topo["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert _keys(topo) == _keys(their_topo)
    levels = [lvl["nodeLabel"] for lvl in topo["spec"]["levels"]]
    assert levels == [*NETWORK_LABELS, "kubernetes.io/hostname"]  # hostname only as the lowest
    flavor, their_flavor = ours["ResourceFlavor"], sample["ResourceFlavor"]

    def shape(obj: Any) -> set[str]:  # the label keys under nodeLabels are the cluster's own
        return {k for k in _keys(obj) if not k.startswith(".spec.nodeLabels.")}

    assert shape(flavor) == shape(their_flavor)
    assert flavor["spec"]["topologyName"] == topo["metadata"]["name"]


def test_job_asks_for_one_of_the_levels_like_the_sample() -> None:
    job = _doc_yaml()["Job"]
    sample = yaml.safe_load((REF / "kueue/tas-sample-job-required.yaml").read_text())
    ann = "kueue.x-k8s.io/podset-required-topology"
    assert set(job["spec"]) == set(sample["spec"])
    assert set(job["metadata"]["labels"]) == set(sample["metadata"]["labels"])
    assert set(job["spec"]["template"]["metadata"]["annotations"]) == {ann}
    assert job["spec"]["template"]["metadata"]["annotations"][ann] in NETWORK_LABELS
    assert job["spec"]["parallelism"] == job["spec"]["completions"]

"""docs/exports.md: its outputs are what the command prints for its source, and its objects are
valid under the schedulers' own CRD schemas."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.webhook.export.fabrics import crd_schema
from webhook.__main__ import main

DOC = Path(__file__).resolve().parents[3] / "docs" / "exports.md"
BLOCK = re.compile(r"(?:<!-- (source|output: [a-z-]+) -->\n)?```(\w+)\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str, str]]:
    return [(m.group(1) or "", m.group(2), m.group(3)) for m in BLOCK.finditer(DOC.read_text())]


def _objects() -> list[dict[str, Any]]:
    return [
        d
        for tag, lang, text in _blocks()
        if lang == "yaml"
        for d in yaml.safe_load_all(text)
        if isinstance(d, dict) and "kind" in d
    ]


@pytest.mark.parametrize("output", ["kueue", "kai", "slurm-tree", "slurm-block"])
def test_doc_outputs_are_what_the_command_prints(
    output: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = {tag: text for tag, _, text in _blocks() if tag}
    (tmp_path / "topology.conf").write_text(blocks["source"])
    assert main(["topology", "--source", str(tmp_path / "topology.conf"), "-o", output]) == 0
    assert capsys.readouterr().out == blocks[f"output: {output}"]


SCHEMAS = {
    ("kueue.x-k8s.io/v1beta2", "Topology"): ("kueue-topology-crd.yaml", "v1beta2"),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): ("kueue-resourceflavor-crd.yaml", "v1beta2"),
    ("kai.scheduler/v1alpha1", "Topology"): ("kai-topology-crd.yaml", "v1alpha1"),
    ("topology.volcano.sh/v1alpha1", "HyperNode"): ("volcano-hypernode-crd.yaml", "v1alpha1"),
}


def test_doc_objects_validate_against_the_crds() -> None:
    checked = set()
    for obj in _objects():
        key = (obj["apiVersion"], obj["kind"])
        if key in SCHEMAS:
            jsonschema.validate(obj, crd_schema(*SCHEMAS[key]))
            checked.add(key)
    assert checked == set(SCHEMAS)


def test_doc_workloads_ask_for_our_levels() -> None:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in _objects():
        by_kind.setdefault(f"{obj['apiVersion']} {obj['kind']}", []).append(obj)
    kueue_job, kai_job = by_kind["batch/v1 Job"]
    ann = kueue_job["spec"]["template"]["metadata"]["annotations"]
    assert ann == {"kueue.x-k8s.io/podset-required-topology": "gpufabric.io/leaf-pair"}
    assert kai_job["metadata"]["annotations"] == {
        "kai.scheduler/topology": "gpufabric",
        "kai.scheduler/topology-required-placement": "gpufabric.io/leaf-pair",
    }
    (vc,) = by_kind["batch.volcano.sh/v1alpha1 Job"]
    assert vc["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    (pg,) = by_kind["scheduling.k8s.io/v1alpha2 PodGroup"]
    assert pg["spec"]["schedulingConstraints"] == {"topology": [{"key": "gpufabric.io/leaf-pair"}]}


def test_doc_tier_numbers_are_the_exported_ones() -> None:
    from webhook.export.volcano import tiers

    assert tiers(False)["leaf-pair"] == 2 and tiers(True)["leaf-pair"] == 3
    assert tiers(False)["spine"] == 4 and tiers(True)["spine"] == 5


def _workloads(text: str) -> list[tuple[str, str, int, int]]:
    """(what, node label of the required level, pods, GPUs a pod) of each example workload in a
    doc's YAML: Kueue and KAI Jobs, Volcano Jobs, Kubernetes PodGroups (whole-node pods)."""
    from webhook.export.model import levels
    from webhook.export.volcano import tiers

    alias = dict(levels(True))  # KAI aliases: level name -> node label
    tier_name = {t: name for name, t in tiers(False).items()}
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        for obj in yaml.safe_load_all(block):
            if not isinstance(obj, dict):
                continue
            kind, spec = f"{obj.get('apiVersion')} {obj.get('kind')}", obj.get("spec") or {}
            if kind == "batch/v1 Job":
                template = spec["template"]
                ann = {
                    **(obj["metadata"].get("annotations") or {}),
                    **(template.get("metadata", {}).get("annotations") or {}),
                }
                level = ann.get("kueue.x-k8s.io/podset-required-topology") or ann.get(
                    "kai.scheduler/topology-required-placement", ""
                )
                out.append((kind, alias.get(level, level), spec["parallelism"], _gpus(template)))
            elif kind == "batch.volcano.sh/v1alpha1 Job":
                nt = spec["networkTopology"]
                name = nt.get("highestTierName") or tier_name[nt["highestTierAllowed"]]
                (task,) = spec["tasks"]
                pods = max(spec["minAvailable"], task["replicas"])
                out.append((kind, alias[name], pods, _gpus(task["template"])))
            elif kind == "scheduling.k8s.io/v1alpha2 PodGroup":
                (constraint,) = spec["schedulingConstraints"]["topology"]
                out.append(
                    (kind, constraint["key"], spec["schedulingPolicy"]["gang"]["minCount"], 0)
                )
    return out


def _gpus(template: dict[str, Any]) -> int:
    return sum(
        int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
        for c in template["spec"]["containers"]
    )


def test_every_example_workload_fits_the_docs_fabric(tmp_path: Path) -> None:
    """Kueue left the old 16-pod leaf-pair Job pending on this fabric ("allows to fit only 8 out of
    16 pod(s)"): each required level must have a domain with room for every pod."""
    from collections import Counter

    from webhook.fabric.levels import Positions
    from webhook.fabric.sources.slurm import parse_conf

    text = DOC.read_text()
    stated = re.search(r"(\d+) GPUs per node", text)
    assert stated, "the example fabric says how many GPUs a node has"
    gpus_per_node = int(stated.group(1))
    source = {tag: body for tag, _, body in _blocks() if tag}["source"]
    domains = Counter(
        (key, value)
        for labels in Positions(parse_conf(source)).placed.values()
        for key, value in labels.items()
    )
    largest: dict[str, int] = {}
    for (key, _), count in domains.items():
        largest[key] = max(largest.get(key, 0), count)
    found = {
        doc: _workloads((DOC.parent / doc).read_text()) for doc in ("exports.md", "topology.md")
    }
    assert [len(w) for w in found.values()] == [4, 1]  # Kueue, KAI, Volcano, PodGroup; Kueue
    for doc, workloads in found.items():
        for what, level, pods, gpus in workloads:
            per_node = gpus_per_node // gpus if gpus else 1  # a PodGroup's pods: a node each
            room = largest[level] * per_node
            assert pods <= room, f"{doc}: {what} needs {pods} pods in one {level}: room for {room}"

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

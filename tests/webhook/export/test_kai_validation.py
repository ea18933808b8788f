"""Our KAI `Topology` objects against KAI Scheduler's own checks, not only its CRD's OpenAPI schema
(kai-scheduler/KAI-Scheduler @ d5bc503a146317e51037d89775d77172c6d12f71, 2026-08-07):

- the CRD's CEL rules (pkg/apis/kai/v1alpha1/topology_types.go:58-62, in
  tests/fixtures/schedulers/kai-topology-crd.yaml): 1-16 levels, nodeLabel unique, hostname only
  as the lowest level; nodeLabel and alias qualified names of at most 316 characters (lines 76-91);
- the admission webhook (pkg/admission/webhook/topologyhooks/topology_validator.go
  `validateAliases`, last changed in 86e0aea6): aliases unique within a Topology, and no alias equal
  to any level's nodeLabel;
- the scheduler: `buildAliasMapsByTopology` (pkg/scheduler/cache/cluster_info/cluster_info.go:581)
  maps alias -> nodeLabel, `ResolveAliases` (pkg/scheduler/api/topology_info/topology_info.go:25)
  rewrites a workload's required/preferred level through it (anything else passes unchanged), and
  `calculateRelevantDomainLevels` (pkg/scheduler/plugins/topology/job_filtering.go:389-436) refuses
  a level the Topology does not have ("topology constraint error").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.webhook.export.fabrics import cel_failures, crd_schema, nvlink, positions
from webhook.export import kai
from webhook.export.model import build

DOC = Path(__file__).resolve().parents[3] / "docs" / "exports.md"


def alias_errors(levels: list[dict[str, str]]) -> list[str]:
    """validateAliases: duplicated aliases, aliases that equal a nodeLabel."""
    labels = {lv["nodeLabel"] for lv in levels}
    seen: set[str] = set()
    duplicates, collisions = [], []
    for alias in (lv.get("alias", "") for lv in levels):
        if not alias:
            continue
        if alias in seen:
            duplicates.append(alias)
        seen.add(alias)
        if alias in labels:
            collisions.append(alias)
    out = []
    if duplicates:
        out.append(f"aliases must be unique within the topology; duplicated: {sorted(duplicates)}")
    if collisions:
        out.append(f"an alias must not equal a nodeLabel; conflicting: {sorted(collisions)}")
    return out


def resolve(topology: dict[str, Any], level: str) -> str | None:
    """The node label KAI's scheduler takes `level` for; None: the constraint error."""
    levels = topology["spec"]["levels"]
    aliases = {lv["alias"]: lv["nodeLabel"] for lv in levels if lv.get("alias")}
    label = aliases.get(level, level)
    return label if label in {lv["nodeLabel"] for lv in levels} else None


def _ours() -> list[dict[str, Any]]:
    return kai.topologies(build(positions(), nvlink()))


def test_our_topologies_pass_kais_crd_and_webhook() -> None:
    schema = crd_schema("kai-topology-crd.yaml", "v1alpha1")
    objs = _ours()
    assert [o["metadata"]["name"] for o in objs] == ["gpufabric", "gpufabric-nvlink"]
    for obj in objs:
        jsonschema.validate(obj, schema)
        assert cel_failures(obj, schema) == []
        assert alias_errors(obj["spec"]["levels"]) == []


def test_the_checks_refuse_what_kai_refuses() -> None:
    schema = crd_schema("kai-topology-crd.yaml", "v1alpha1")
    bad = {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a/b"}]}}
    assert cel_failures(bad, schema) == [
        "the kubernetes.io/hostname label can only be used at the lowest level of topology"
    ]
    levels = [
        {"nodeLabel": "gpufabric.io/leaf", "alias": "rack"},
        {"nodeLabel": "rack", "alias": "rack"},
    ]
    assert alias_errors(levels) == [
        "aliases must be unique within the topology; duplicated: ['rack']",
        "an alias must not equal a nodeLabel; conflicting: ['rack', 'rack']",  # as Go lists it
    ]


def test_every_alias_and_label_resolves_to_its_own_level() -> None:
    for obj in _ours():
        for lv in obj["spec"]["levels"]:
            assert resolve(obj, lv["alias"]) == lv["nodeLabel"]
            assert resolve(obj, lv["nodeLabel"]) == lv["nodeLabel"]
    assert resolve(_ours()[0], "gpufabric.io/nvlink-domain") is None  # only in gpufabric-nvlink


@pytest.mark.parametrize("level", ["gpufabric.io/leaf-pair", "leaf-pair"])
def test_the_docs_kai_job_asks_for_a_level_kai_resolves(level: str) -> None:
    jobs = [
        d
        for block in DOC.read_text().split("```yaml\n")[1:]
        for d in yaml.safe_load_all(block.split("```")[0])
        if isinstance(d, dict)
        and "kai.scheduler/topology" in d.get("metadata", {}).get("annotations", {})
    ]
    (job,) = jobs
    ann = job["metadata"]["annotations"]
    (topology,) = [o for o in _ours() if o["metadata"]["name"] == ann["kai.scheduler/topology"]]
    asked = ann["kai.scheduler/topology-required-placement"]
    assert resolve(topology, asked) == resolve(topology, level) == "gpufabric.io/leaf-pair"

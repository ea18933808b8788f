from __future__ import annotations

import copy

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.helpers import golden_statuses
from webhook.admission.requirements import requirements
from webhook.cli.explain import NodeFacts, explain
from webhook.fleet.cache import FabricCache


def test_explain_shows_each_candidate_domain_of_the_groups_level() -> None:
    status = dict(golden_statuses())["hgx-h100"]  # 8 GPUs
    nodes = fabric(40)  # leaves of 4: quad-0, quad-1 complete, quad-2 has 8 nodes
    cache = FabricCache()
    cache.replace_nodes([(n["metadata"]["name"], copy.deepcopy(status)) for n in nodes])
    facts = NodeFacts(node_labels={n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes})
    pod = gpu_pod("w-0", 8, group="llama", size=16)
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    tail = out.split("\n\nGroup ")[1].splitlines()
    assert tail == [
        "llama: 16 pods x 8 GPUs = 128 GPUs, locality required, level auto -> leaf-quad",
        "  [fits] leaf-quad quad-0: 128 free GPUs; fits; 0 GPUs left after placing",
        "  [fits] leaf-quad quad-1: 128 free GPUs; fits; 0 GPUs left after placing",
        "  [no  ] leaf-quad quad-2: 64 free GPUs; too small even when empty for these pods' constraints",
        "  decision: leaf-quad=quad-0",
        "  lowest domains: 4 (leaf leaf-0, leaf leaf-1, leaf leaf-2, leaf leaf-3); "
        "fewest that hold it: 4",
        "  ranks: leaf leaf-0: 0-3; leaf leaf-1: 4-7; leaf leaf-2: 8-11; leaf leaf-3: 12-15",
    ]


def test_explain_of_an_ungrouped_pod_has_no_group_section() -> None:
    cache = FabricCache()
    cache.replace_nodes(golden_statuses())
    pod = gpu_pod("w-0", 8)
    assert "Group " not in explain(pod, requirements(pod, "team-a", cache.claim), cache)

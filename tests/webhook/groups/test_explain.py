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


def test_explain_offline_counts_the_running_pods_and_shows_preemption_and_the_queue() -> None:
    status = dict(golden_statuses())["hgx-h100"]  # 8 GPUs
    nodes = fabric(8)  # leaf-0, leaf-1
    cache = FabricCache()
    cache.replace_nodes([(n["metadata"]["name"], copy.deepcopy(status)) for n in nodes])
    running = [
        gpu_pod(f"run-{i}", 8, namespace="batch", node_name=f"node-{i:04d}", phase="Running")
        for i in range(8)
    ]
    for i, p in enumerate(running):
        p["spec"]["priority"] = 100 if i < 4 else 2_000_000  # leaf-0 may be preempted
    low = gpu_pod("old-0", 8, group="old", size=4, level="leaf", gated=True)
    low["spec"]["priority"] = 100
    low["metadata"]["creationTimestamp"] = "2026-11-26T09:00:00Z"
    facts = NodeFacts(
        node_labels={n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes},
        pods=[*running, low],
    )
    pod = gpu_pod("w-0", 8, group="llama", size=4, level="leaf")
    pod["spec"]["priority"] = 1_000_000
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    tail = out.split("\n\nGroup ")[1].splitlines()
    assert tail[1:] == [
        "  [no  ] leaf leaf-0: 0 free GPUs; 0 usable free GPUs, needs 32",
        "  [no  ] leaf leaf-1: 0 free GPUs; 0 usable free GPUs, needs 32",
        "  decision: wait: no leaf has 32 free GPUs for 4 pods",
        "  preemption: would evict 4 pods (32 GPUs, priority <= 100) in leaf leaf-0: "
        "batch/run-0, batch/run-1, batch/run-2, batch/run-3",
        "  waiting groups, in the order the placer tries them:",
        "    team-a/llama: priority 1000000, first created ?  <- this group",
        "    team-a/old: priority 100, first created 2026-11-26T09:00:00Z",
    ]


def _budget(name: str, labels: dict[str, str], allowed: int) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "batch"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_explain_names_the_budgets_a_preemption_would_consult_and_whether_each_allows_it() -> None:
    status = dict(golden_statuses())["hgx-h100"]
    nodes = fabric(8)  # leaf-0, leaf-1; every pod priority 100
    cache = FabricCache()
    cache.replace_nodes([(n["metadata"]["name"], copy.deepcopy(status)) for n in nodes])
    running = [
        gpu_pod(f"run-{i}", 8, namespace="batch", node_name=f"node-{i:04d}", phase="Running")
        for i in range(8)
    ]
    for i, p in enumerate(running):
        p["spec"]["priority"] = 100
        p["metadata"]["labels"] = {"app": "db" if i == 2 else "web"}
    facts = NodeFacts(
        node_labels={n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes},
        pods=running,
        budgets=[_budget("db", {"app": "db"}, 0), _budget("web", {"app": "web"}, 4)],
    )
    pod = gpu_pod("w-0", 8, group="llama", size=4, level="leaf")
    pod["spec"]["priority"] = 1_000_000
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    tail = out.split("  decision: wait: ")[1].splitlines()
    assert tail[1:] == [
        "  preemption: would evict 4 pods (32 GPUs, priority <= 100) in leaf leaf-1: "
        "batch/run-4, batch/run-5, batch/run-6, batch/run-7",
        "    budget batch/web: allows 4, the plan wants 4: allows it",
        "    budget batch/db (allowed 0, wanted 1) in leaf leaf-0: blocks it",
    ]
    facts.budgets[1]["status"]["disruptionsAllowed"] = 3  # now no leaf can be freed whole
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    tail = out.split("  decision: wait: ")[1].splitlines()
    assert tail[1:] == [
        "  preemption: none: every leaf that pods of priority < 1000000 would free is kept by a "
        "PodDisruptionBudget; nothing would be evicted",
        "    budget batch/db (allowed 0, wanted 1) in leaf leaf-0: blocks it",  # web: 3 of 3
        "    budget batch/web (allowed 3, wanted 4) in leaf leaf-1: blocks it",
    ]

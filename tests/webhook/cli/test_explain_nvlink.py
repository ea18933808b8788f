"""`explain` on NVL72 trays (tests/nvl72.py): each node's NVLink domain or why it has none, and the
group section at the nvlink-domain level from the statuses alone (no Node objects needed)."""

from __future__ import annotations

from typing import Any

from tests.nvl72 import TRAYS, domain, tray_name, tray_status
from tests.webhook.groups.fabric import gpu_pod
from webhook.admission.requirements import requirements
from webhook.cli.explain import NodeFacts, explain
from webhook.fleet.cache import FabricCache

KEY = "gpufabric.io/nvlink-domain"


def facts_and_cache(statuses: list[dict[str, Any]]) -> tuple[FabricCache, NodeFacts]:
    cache = FabricCache()
    cache.replace_nodes([(s["metadata"]["name"], s["status"]) for s in statuses])
    return cache, NodeFacts(statuses={s["metadata"]["name"]: s["status"] for s in statuses})


def test_explain_shows_each_nodes_domain_and_places_the_group_in_one() -> None:
    statuses = [tray_status(0, t) for t in range(TRAYS)] + [
        tray_status(1, t, racks=(1, 1, 1, 0) if t == 0 else None) for t in range(TRAYS)
    ]
    cache, facts = facts_and_cache(statuses)
    pod = gpu_pod("w-0", 4, group="moe", size=4)
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    lines = out.splitlines()
    first = lines.index(f"{tray_name(0, 0)}: ADMITS")
    assert lines[first + 2] == f"  {KEY}: {domain(0)}"
    split = lines.index(f"{tray_name(1, 0)}: ADMITS")
    assert lines[split + 2].startswith(f"  {KEY}: none (GPUs disagree on their NVLink domain: ")
    tail = out.split("\n\nGroup ")[1].splitlines()
    assert (
        tail[0] == "moe: 4 pods x 4 GPUs = 16 GPUs, locality required, level auto -> nvlink-domain"
    )
    # Rack 1 has 17 trays with its domain (68 GPUs); rack 0 all 18 (72): tightest is rack 1.
    assert sorted(tail[1:3]) == sorted(
        [
            f"  [fits] nvlink-domain {domain(0)}: 72 free GPUs; fits; 56 GPUs left after placing",
            f"  [fits] nvlink-domain {domain(1)}: 68 free GPUs; fits; 52 GPUs left after placing",
        ]
    )
    assert tail[3] == f"  decision: nvlink-domain={domain(1)}"


def test_explain_nvlink_level_without_any_domain_says_so() -> None:
    statuses = [tray_status(0, t, cliques=(None,) * 4) for t in range(4)]
    cache, facts = facts_and_cache(statuses)
    pod = gpu_pod("w-0", 4, group="moe", size=2, level="nvlink-domain")
    out = explain(pod, requirements(pod, "team-a", cache.claim), cache, facts)
    assert KEY not in out.split("\n\nGroup ")[0]  # no fabric at all: no per-node line
    assert out.split("\n\nGroup ")[1].splitlines()[1] == (
        "  group-level nvlink-domain: no node carries gpufabric.io/nvlink-domain (no multi-node "
        "NVLink domain is known in this cluster)"
    )

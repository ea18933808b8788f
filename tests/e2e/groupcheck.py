"""What every placed group must show, whatever made its pods (DESIGN.md "Group placement" and
"Ranks"): one placement `<level>=<domain>` on every member, every member's node in that domain,
ranks 0..size-1 consecutive inside each leaf and leaves in fabric order, no gate left, and the
GPUFABRIC_* variables the webhook adds."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.e2e import pods


def check_group(
    core: client.CoreV1Api,
    members: list[Any],
    group: str,
    size: int,
    level: str,
    layout: dict[str, list[str]],
) -> None:
    labels = pods.node_labels(core)
    placements = {p.metadata.annotations.get(pods.PLACEMENT) for p in members}
    assert len(placements) == 1, f"members placed apart: {placements}"
    placed_level, _, domain = str(placements.pop()).partition("=")
    assert placed_level == level, f"placed at {placed_level}={domain}, expected level {level}"
    for p in members:
        node = p.spec.node_name
        assert labels[node].get(f"gpufabric.io/{level}") == domain, f"{p.metadata.name} on {node}"
        assert not p.spec.scheduling_gates, f"{p.metadata.name} still gated"
        assert p.metadata.labels.get("gpufabric.io/group") == group
        gpufabric_env = {k: v for k, v in pods.env_of(p).items() if k.startswith("GPUFABRIC_")}
        assert gpufabric_env == {
            "GPUFABRIC_RANK": "fieldRef:metadata.annotations['gpufabric.io/rank']",
            "GPUFABRIC_GROUP_SIZE": str(size),
            "GPUFABRIC_PLACEMENT": "fieldRef:metadata.annotations['gpufabric.io/placement']",
        }, f"{p.metadata.name}: {gpufabric_env}"
    ranks = sorted(int(p.metadata.annotations[pods.RANK]) for p in members)
    assert ranks == list(range(size)), f"ranks {ranks}"
    leaf_index = {n: i for i, names in enumerate(layout.values()) for n in names}
    by_rank = sorted(members, key=lambda p: int(p.metadata.annotations[pods.RANK]))
    leaves = [leaf_index[p.spec.node_name] for p in by_rank]
    # A ring over the ranks leaves a leaf only where it must: each leaf's ranks are consecutive,
    # and the leaves follow in fabric order.
    assert leaves == sorted(leaves), f"leaves in rank order: {leaves}"

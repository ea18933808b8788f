"""A group at each network level, as installed: admitted by the webhook (gate, label, GPUFABRIC_*
variables), placed by the placer running as the webhook's ServiceAccount (affinity, ranks,
placement), bound by the stock kube-scheduler inside one domain of that level."""

from __future__ import annotations

import json

import pytest

from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.groupcheck import check_group

# 8 leaf domains of 2 HGX nodes in one spine; 8-GPU members, so a group of n takes n nodes and
# `auto` picks the smallest level that holds it.
SIZES = {"leaf": 2, "leaf-pair": 4, "leaf-quad": 8, "spine": 16}


@pytest.mark.parametrize("level", list(SIZES))
def test_group_is_placed_whole_in_one_domain_of_its_level(
    cluster_env: Env, fleet: Fleet, ns: str, level: str
) -> None:
    layout = fleet.hgx_leaves(leaves=8, per_leaf=2)
    size = SIZES[level]
    group = f"g-{level}"
    pods.create(
        cluster_env.core,
        ns,
        (pods.pod(f"{group}-{i}", 8, pods.group_annotations(group, size)) for i in range(size)),
    )
    bound = pods.wait_bound(cluster_env.core, ns, size)
    check_group(cluster_env.core, bound, group, size, level, layout)


def test_group_larger_than_any_spine_is_admitted_with_a_warning(
    cluster_env: Env, fleet: Fleet, ns: str
) -> None:
    """The webhook knows the spine sizes from the GpuFabric object the labeler publishes (read
    back through its own watch); a group no spine holds is admitted, gated, with a warning."""
    fleet.hgx_leaves(leaves=2, per_leaf=2)  # one spine of 4 nodes: 32 GPUs
    size = 5  # 40 GPUs
    manifest = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                pods.pod(f"big-{i}", 8, pods.group_annotations("big", size)) for i in range(size)
            ],
        }
    )
    expected = "gpufabric: group big needs 40 GPUs, more than the largest spine domain (32)"

    def warned() -> str | None:
        pods.delete_all(cluster_env.core, ns)
        made = cluster_env.cluster.kubectl_run("create", "-n", ns, "-f", "-", stdin=manifest)
        assert made.returncode == 0, made.stderr
        return made.stderr if expected in made.stderr else None

    # The GpuFabric object follows the labels by a moment: ask until the webhook has read it.
    pods.wait_for(warned, 30, f"the warning {expected!r} at admission", interval=1)
    admitted = pods.listed(cluster_env.core, ns)  # kubectl prints a repeated warning once
    assert len(admitted) == size and all(p.spec.scheduling_gates for p in admitted)

"""A group at each network level, as installed: admitted by the webhook (gate, label, GPUFABRIC_*
variables), placed by the placer running as the webhook's ServiceAccount (affinity, ranks,
placement), bound by the stock kube-scheduler inside one domain of that level."""

from __future__ import annotations

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

"""The webhook counts only statuses whose Node exists (issue 7 item 7, cache side)."""

from __future__ import annotations

import copy
from typing import Any

from common.labels import hca_profile
from tests.webhook.helpers import golden_statuses, pod
from webhook.admission.placement import Settings, mutate
from webhook.admission.requirements import requirements
from webhook.fleet.cache import FabricCache

# tests/golden/hgx-h100.yaml (from reference hgx-h100 dump): nine usable HCAs.
HGX = dict(golden_statuses())["hgx-h100"]
FULL = list(HGX["summary"]["usableHcas"])


def _without(hca: str) -> dict[str, Any]:
    status = copy.deepcopy(HGX)
    usable = [h for h in FULL if h != hca]
    status["summary"].update(
        usableHcas=usable, rdmaPorts=len(usable), hcaProfile=hca_profile(usable)
    )
    return status


def _nccl_ib_hca(cache: FabricCache) -> str | None:
    p = pod({"gpufabric.io/rdma": "required"})
    out = mutate(p, requirements(p, "team-a", cache.claim), cache.groups(), Settings())
    env = {e["name"]: e["value"] for e in out.pod["spec"]["containers"][0].get("env", [])}
    return env.get("NCCL_IB_HCA")


def _cache() -> FabricCache:
    cache = FabricCache()
    cache.replace_nodes([("live", HGX), ("ghost", _without("mlx5_0"))])
    cache.replace_claims([])
    return cache


def test_before_any_node_information_every_status_counts() -> None:
    cache = _cache()
    assert sorted(cache.nodes) == ["ghost", "live"]
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL[1:])


def test_a_status_whose_node_is_gone_no_longer_narrows_nccl_ib_hca() -> None:
    cache = _cache()
    cache.replace_existing_nodes(["live", "some-cpu-node"])
    assert sorted(cache.nodes) == ["live"]
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL)


def test_nodes_that_come_and_go() -> None:
    cache = _cache()
    cache.node_exists("ghost", False)  # a deletion before the first Node list
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL)
    cache.replace_existing_nodes(["live"])
    cache.put_node("ghost", _without("mlx5_0"))  # its status still arrives: kept, not counted
    assert sorted(cache.nodes) == ["live"] and sorted(cache.absent) == ["ghost"]
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL)
    cache.node_exists("ghost", True)  # the Node (re)appears: its status counts again
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL[1:])
    cache.node_exists("live", False)
    assert sorted(cache.nodes) == ["ghost"]
    assert _nccl_ib_hca(cache) == "=" + ",".join(FULL[1:])
    cache.delete_node("ghost")  # its status deleted too
    assert not cache.nodes and sorted(cache.absent) == ["live"]


def test_the_hca_pin_ignores_nodes_that_do_not_exist() -> None:
    """A ghost with another layout and more nodes would otherwise win the pin."""
    cache = FabricCache()
    other = [h for h in FULL if h != "mlx5_0"]
    odd = _without("mlx5_1")
    odd["summary"]["usableHcas"] = ["mlx5_0"]
    odd["summary"].update(rdmaPorts=1, hcaProfile=hca_profile(["mlx5_0"]))
    cache.replace_nodes(
        [("live", odd), ("ghost-1", _without("mlx5_0")), ("ghost-2", _without("mlx5_0"))]
    )
    cache.replace_claims([])
    assert _nccl_ib_hca(cache) == "=" + ",".join(other)
    cache.replace_existing_nodes(["live"])
    assert _nccl_ib_hca(cache) == "=mlx5_0"

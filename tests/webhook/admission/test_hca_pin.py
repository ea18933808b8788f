"""The hca pin keeps every node on which the chosen HCA list is usable (issue 7, explain section).

Layouts built from tests/golden/hgx-h100.yaml (reference hgx-h100 dump): nine usable HCAs, with
some ports taken down the way a degraded fleet looks.
"""

from __future__ import annotations

from typing import Any

from common import api
from common.labels import hca_profile
from tests.webhook.helpers import golden_statuses, pod, with_usable
from webhook.admission.placement import Decision, Settings, admitted, mutate
from webhook.admission.requirements import requirements
from webhook.fleet.cache import FabricCache

HGX = dict(golden_statuses())["hgx-h100"]
FULL = list(HGX["summary"]["usableHcas"])
MOST = [h for h in FULL if h != "mlx5_11"]  # one rail down


def _status(usable: list[str]) -> dict[str, Any]:
    return with_usable(HGX, usable)


def _cache() -> FabricCache:
    cache = FabricCache()
    cache.replace_nodes(
        [
            ("most-1", _status(MOST)),
            ("most-2", _status(MOST)),
            ("full", _status(FULL)),  # every HCA of MOST is usable here too
            ("one-rail", _status(["mlx5_11"])),  # nothing in common with MOST
        ]
    )
    cache.replace_claims([])
    return cache


def _decide(cache: FabricCache, annotations: dict[str, str]) -> Decision:
    p = pod(annotations)
    return mutate(p, requirements(p, "team-a", cache.claim), cache.groups(), Settings())


def _env(decision: Decision) -> dict[str, str]:
    return {e["name"]: e["value"] for e in decision.pod["spec"]["containers"][0].get("env", [])}


def _pinned(decision: Decision) -> list[str]:
    terms = decision.pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    found = [e for e in terms[0]["matchExpressions"] if e["key"] == api.LABEL_HCA_PROFILE]
    assert len(found) == 1 and found[0]["operator"] == "In"
    return list(found[0]["values"])


def test_pin_keeps_every_node_where_the_chosen_hcas_are_usable() -> None:
    cache = _cache()
    decision = _decide(cache, {"gpufabric.io/rdma": "required"})
    # The list is what the most common layout offers ...
    assert _env(decision)["NCCL_IB_HCA"] == "=" + ",".join(MOST)
    # ... and the pod may run on every node where all of it is usable, not only that layout.
    assert _pinned(decision) == sorted([hca_profile(MOST), hca_profile(FULL)])
    nodes = {n for g in admitted(decision.pod, cache.groups()) for n in g.nodes}
    assert nodes == {"most-1", "most-2", "full"}
    assert any("the 3 nodes on which" in w for w in decision.warnings)


def test_pin_with_preferred_hcas_keeps_every_node_offering_them() -> None:
    cache = _cache()
    decision = _decide(
        cache, {"gpufabric.io/rdma": "required", "gpufabric.io/preferred-hcas": "mlx5_11"}
    )
    assert _env(decision)["NCCL_IB_HCA"] == "=mlx5_11"
    assert _pinned(decision) == sorted([hca_profile(FULL), hca_profile(["mlx5_11"])])
    nodes = {n for g in admitted(decision.pod, cache.groups()) for n in g.nodes}
    assert nodes == {"full", "one-rail"}


def test_pinned_pod_is_stable_when_applied_again() -> None:
    cache = _cache()
    first = _decide(cache, {"gpufabric.io/rdma": "required"})
    again = mutate(
        first.pod, requirements(first.pod, "team-a", cache.claim), cache.groups(), Settings()
    )
    assert again.pod == first.pod


def test_no_pin_when_one_list_fits_every_node() -> None:
    cache = _cache()
    cache.delete_node("one-rail")
    decision = _decide(cache, {"gpufabric.io/rdma": "required"})
    assert _env(decision)["NCCL_IB_HCA"] == "=" + ",".join(MOST)
    assert not any(
        e["key"] == api.LABEL_HCA_PROFILE
        for e in decision.pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchExpressions"]
    )

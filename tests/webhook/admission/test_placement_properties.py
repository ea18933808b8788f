"""Properties of the mutation over generated pods and node statuses (hypothesis)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.labels import hca_profile
from common.model import Summary
from common.wire import to_wire
from tests.webhook.helpers import POLICY, golden_cache, review
from tests.webhook.patch_oracle import diff
from webhook.admission.admit import admit
from webhook.admission.placement import Settings, admitted, mutate
from webhook.admission.requirements import Invalid, requirements
from webhook.fleet.cache import FabricCache

HCAS = [f"mlx5_{i}" for i in range(8)]


@st.composite
def summaries(draw: st.DrawFn) -> Summary:
    usable = tuple(sorted(draw(st.sets(st.sampled_from(HCAS), max_size=8)), key=HCAS.index))
    gpus = draw(st.sampled_from([0, 4, 8]))
    island = draw(st.sampled_from([0, gpus])) if gpus else 0
    return Summary(
        gpu_count=gpus,
        nvlink_island_size=island,
        nvlink_bandwidth_gbps=draw(st.sampled_from([0, 600, 900])) if island else 0,
        numa_gpus_max=gpus // 2,
        rdma=bool(usable),
        rdma_ports=len(usable),
        usable_hcas=usable,
        hca_profile=hca_profile(usable),
        cufile=draw(st.sampled_from(["true", "compat", "false"])),
        fabric_health=draw(st.sampled_from(["ok", "degraded"])),
    )


@st.composite
def caches(draw: st.DrawFn) -> FabricCache:
    cache = FabricCache()
    nodes = draw(st.lists(summaries(), min_size=0, max_size=12))
    cache.replace_nodes((f"n{i}", {"summary": to_wire(s)}) for i, s in enumerate(nodes))
    cache.replace_claims([])
    return cache


EXPR = st.sampled_from(
    [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]},
        {"key": "gpufabric.io/cufile", "operator": "In", "values": ["true"]},
        {"key": "gpufabric.io/rdma-ports", "operator": "Gt", "values": ["2"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "Exists"},
    ]
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        annotations["gpufabric.io/rdma"] = draw(st.sampled_from(["required", "preferred"]))
    if draw(st.booleans()):
        annotations["gpufabric.io/rdma-min-ports"] = str(draw(st.integers(1, 8)))
    if draw(st.booleans()):
        annotations["gpufabric.io/topology"] = draw(
            st.sampled_from(["any", "same-socket", "nvlink"])
        )
    if draw(st.booleans()):
        annotations["gpufabric.io/cufile"] = draw(st.sampled_from(["required", "preferred"]))
    if draw(st.booleans()):
        annotations["gpufabric.io/preferred-hcas"] = ",".join(
            draw(st.sets(st.sampled_from(HCAS), min_size=1, max_size=3))
        )
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": f"c{i}",
                "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": draw(st.sampled_from([0, 1, 4, 8]))}},
                **(
                    {"env": [{"name": "NCCL_IB_HCA", "value": "=mine"}]}
                    if draw(st.booleans())
                    else {}
                ),
            }
            for i in range(draw(st.integers(1, 3)))
        ]
    }
    terms = draw(st.lists(st.lists(EXPR, max_size=2, unique_by=str), max_size=2))
    if terms:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": spec,
    }


def _terms(p: dict[str, Any]) -> list[dict[str, Any]]:
    return (
        ((p["spec"].get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), cache=caches(), tuning=st.booleans())
def test_mutation_properties(pod: dict[str, Any], cache: FabricCache, tuning: bool) -> None:
    try:
        req = requirements(pod, "ns", cache.claim)
    except Invalid:
        return
    s = Settings(cufile_policy=POLICY, inject_nccl_tuning=tuning)
    original = copy.deepcopy(pod)
    decision = mutate(pod, req, cache.groups(), s)
    assert pod == original, "mutate must not touch its input"

    # In place (the server's way: it owns the decoded pod): the same ops and the same pod.
    owned = copy.deepcopy(original)
    in_place = mutate(owned, req, cache.groups(), s, in_place=True)
    assert in_place.pod is owned and owned == decision.pod
    assert json.dumps(in_place.ops) == json.dumps(decision.ops)
    assert in_place.warnings == decision.warnings

    # The JSONPatch applies cleanly and yields the mutated pod.
    ops = diff(pod, decision.pod)
    assert jsonpatch.apply_patch(pod, ops) == decision.pod

    # Applying the webhook twice gives the same pod (reinvocationPolicy IfNeeded is safe).
    again = mutate(decision.pod, requirements(decision.pod, "ns", cache.claim), cache.groups(), s)
    assert again.pod == decision.pod

    # The pod's own affinity is never loosened: same terms, each still holds every original expr.
    before, after = _terms(original), _terms(decision.pod)
    if before:
        assert len(after) == len(before)
        for old, new in zip(before, after, strict=True):
            for expr in old.get("matchExpressions", []):
                assert expr in new["matchExpressions"]

    # An injected NCCL_IB_HCA is usable on every node the final affinity admits.
    groups = admitted(decision.pod, cache.groups())
    for c_old, c_new in zip(
        original["spec"]["containers"], decision.pod["spec"]["containers"], strict=True
    ):
        env_old = {e["name"]: e["value"] for e in c_old.get("env", [])}
        env_new = {e["name"]: e["value"] for e in c_new.get("env", [])}
        assert all(env_new[k] == v for k, v in env_old.items()), "the user's env wins"
        if "NCCL_IB_HCA" in env_new and "NCCL_IB_HCA" not in env_old:
            names = env_new["NCCL_IB_HCA"].removeprefix("=").split(",")
            for g in groups:
                assert set(names) <= set(g.usable_hcas), (names, g)
            if req.preferred_hcas:
                assert set(names) <= set(req.preferred_hcas)


# Built once: admit only reads the cache, and parsing the seven golden statuses for each example
# was 40 s of this test.
GOLDEN = golden_cache()


@settings(max_examples=100, deadline=None)
@given(pod=pods())
def test_pods_without_our_annotations_are_untouched(pod: dict[str, Any]) -> None:
    pod["metadata"]["annotations"] = {"example.com/other": "x"}
    answer = admit(review(pod)["request"], GOLDEN, Settings(POLICY, True))
    assert answer.outcome == "untouched"
    assert "patch" not in answer.response and answer.response["allowed"] is True

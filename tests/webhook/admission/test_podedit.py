"""The JSONPatch mutate records while editing rebuilds exactly the pod it returns."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook.admission.test_placement_properties import caches, pods
from tests.webhook.patch_oracle import diff
from webhook.admission.placement import Settings, mutate, plan, query_of
from webhook.admission.podedit import PREFERRED, REQUIRED
from webhook.admission.requirements import Invalid, requirements
from webhook.fleet.cache import FabricCache


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), cache=caches(), tuning=st.booleans(), bare=st.sampled_from(["", "spec", "env"]))
def test_recorded_ops_rebuild_the_mutated_pod(
    pod: dict[str, Any], cache: FabricCache, tuning: bool, bare: str
) -> None:
    if bare == "spec":  # no affinity and no volumes: whole objects are added
        pod["spec"] = {"containers": pod["spec"]["containers"]}
    elif bare == "env":
        for c in pod["spec"]["containers"]:
            c.pop("env", None)
    try:
        req = requirements(pod, "ns", cache.claim)
    except Invalid:
        return
    original = copy.deepcopy(pod)
    decision = mutate(pod, req, cache.groups(), Settings("cufile", tuning))
    assert pod == original
    assert jsonpatch.apply_patch(pod, decision.ops) == decision.pod
    assert jsonpatch.apply_patch(pod, diff(pod, decision.pod)) == decision.pod
    assert all(op["op"] == "add" for op in decision.ops)
    if not any("pinned" in w for w in decision.warnings):
        # mutate asks the fleet before editing: the question is the edited pod's
        assert query_of(pod, plan(req).conds) == query_of(decision.pod)


def test_a_pod_without_spec_gets_one_added() -> None:
    pod = {"metadata": {"annotations": {"gpufabric.io/rdma": "required"}}}
    cache = FabricCache()
    decision = mutate(pod, requirements(pod, "ns", cache.claim), cache.groups(), Settings())
    assert [op["path"] for op in decision.ops] == ["/spec"]
    assert jsonpatch.apply_patch(pod, decision.ops) == decision.pod


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": {}},
        {"affinity": {"nodeAffinity": {}}},
        {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}},
        {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}]}}}},
        {"affinity": {"nodeAffinity": {PREFERRED: []}}, "volumes": []},
    ],
)
def test_partial_affinity_shapes(spec: dict[str, Any]) -> None:
    pod = {
        "metadata": {
            "annotations": {"gpufabric.io/rdma": "required", "gpufabric.io/cufile": "required"}
        },
        "spec": {"containers": [{"name": "c", "env": []}], **spec},
    }
    cache = FabricCache()
    original = copy.deepcopy(pod)
    decision = mutate(pod, requirements(pod, "ns", cache.claim), cache.groups(), Settings("cf"))
    assert pod == original
    assert jsonpatch.apply_patch(pod, decision.ops) == decision.pod
    assert jsonpatch.apply_patch(pod, diff(pod, decision.pod)) == decision.pod


def test_explicit_nulls_in_extended_fields_are_denied_by_path() -> None:
    # The API server never sends these (it drops empty fields); a review that has them is answered
    # by the rules, naming each field, instead of being patched blindly (issue 11).
    pod = {
        "metadata": {"annotations": {"gpufabric.io/rdma": "required"}},
        "spec": {"containers": [{"name": "c"}], "affinity": None, "volumes": None},
    }
    with pytest.raises(Invalid) as err:
        requirements(pod, "ns", FabricCache().claim)
    assert "spec.affinity is null" in str(err.value)
    assert "spec.volumes is null" in str(err.value)


def test_env_entries_with_names_of_any_type_do_not_stop_the_edit() -> None:
    # The API server decodes env names as strings; a fuzzed review may carry anything there.
    pod = {
        "metadata": {"annotations": {"gpufabric.io/cufile": "required"}},
        "spec": {"containers": [{"name": "c", "env": [{"name": ["x"]}, {"name": {"a": 1}}]}]},
    }
    cache = FabricCache()
    decision = mutate(pod, requirements(pod, "ns", cache.claim), cache.groups(), Settings("cf"))
    env = decision.pod["spec"]["containers"][0]["env"]
    assert env[2] == {"name": "CUFILE_ENV_PATH_JSON", "value": "/etc/gpufabric/cufile/cufile.json"}
    assert jsonpatch.apply_patch(pod, decision.ops) == decision.pod


def test_a_term_the_pod_has_gets_one_op_for_every_expression_added_to_it() -> None:
    # An "add" of a member the object has replaces it (RFC 6902): one op per term carries the
    # term's list as it ends up, where an op per expression cost five per term.
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    kind = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["x"]}
    pod = {
        "metadata": {
            "annotations": {"gpufabric.io/rdma": "required", "gpufabric.io/topology": "nvlink"}
        },
        "spec": {"containers": [{"name": "c"}], "affinity": {"nodeAffinity": {REQUIRED: {}}}},
    }
    own_terms = [{"matchExpressions": [zone]}, {"matchExpressions": [kind]}]
    pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"] = own_terms
    cache = FabricCache()
    req = requirements(pod, "ns", cache.claim)
    decision = mutate(pod, req, cache.groups(), Settings())
    terms = f"/spec/affinity/nodeAffinity/{REQUIRED}/nodeSelectorTerms"
    assert [op["path"] for op in decision.ops if op["path"].startswith(terms)] == [
        f"{terms}/0/matchExpressions",
        f"{terms}/1/matchExpressions",
    ]
    assert jsonpatch.apply_patch(pod, decision.ops) == decision.pod
    added = plan(req).exprs
    ended = decision.pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert [t["matchExpressions"] for t in ended] == [[zone, *added], [kind, *added]]
    again = mutate(decision.pod, req, cache.groups(), Settings())
    assert again.pod == decision.pod
    assert not any(op["path"].startswith(terms) for op in again.ops)

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest

from tests.webhook.helpers import golden_cache, pod, review
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.groups.admission.admit import admit_group
from webhook.groups.model.names import GATE

GROUP = {
    "gpufabric.io/group": "llama-70b",
    "gpufabric.io/group-size": "16",
    "gpufabric.io/group-locality": "required",
    "gpufabric.io/group-level": "auto",
}


def _apply(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(obj))
    return out


def test_create_gates_and_labels_next_to_the_usual_patch() -> None:
    p = pod({**GROUP, "gpufabric.io/rdma": "required"})
    answer = admit(review(p)["request"], golden_cache(), Settings())
    assert answer.response["allowed"] is True
    patched = _apply(p, _ops(answer))
    assert patched["spec"]["schedulingGates"] == [{"name": GATE}]
    assert patched["metadata"]["labels"] == {"gpufabric.io/group": "llama-70b"}
    # The usual patch is still there (the RDMA requirement).
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert {"key": "gpufabric.io/rdma", "operator": "In", "values": ["true"]} in terms[
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    # Reinvocation (reinvocationPolicy IfNeeded) adds nothing.
    again = admit(review(patched)["request"], golden_cache(), Settings())
    assert _ops(again) == []


def _ops(answer: Any) -> list[dict[str, Any]]:
    patch = answer.response.get("patch")
    return json.loads(base64.b64decode(patch)) if patch else []


def test_existing_gates_and_labels_are_appended_to() -> None:
    p = pod(GROUP)
    p["metadata"]["labels"] = {"app": "x"}
    p["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    got = admit_group(p, "CREATE")
    patched = _apply(p, got.ops)
    assert patched["spec"]["schedulingGates"] == [{"name": "example.com/quota"}, {"name": GATE}]
    assert patched["metadata"]["labels"] == {"app": "x", "gpufabric.io/group": "llama-70b"}
    assert admit_group(patched, "CREATE").ops == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"gpufabric.io/group": "Bad Name!"}, "gpufabric.io/group:"),
        ({"gpufabric.io/group": "x" * 64}, "gpufabric.io/group:"),
        ({"gpufabric.io/group-size": "0"}, "gpufabric.io/group-size"),
        ({"gpufabric.io/group-size": "two"}, "gpufabric.io/group-size"),
        ({"gpufabric.io/group-size": "99999999999999999999"}, "gpufabric.io/group-size"),
        ({"gpufabric.io/group-locality": "strict"}, "gpufabric.io/group-locality"),
        ({"gpufabric.io/group-level": "rack"}, "gpufabric.io/group-level"),
        ({"gpufabric.io/placement": "leaf=leaf-1"}, "gpufabric.io/placement"),
    ],
)
def test_bad_values_are_denied_naming_the_annotation(changes: dict[str, str], named: str) -> None:
    answer = admit(review(pod({**GROUP, **changes}))["request"], golden_cache(), Settings())
    assert answer.outcome == "denied"
    assert named in answer.response["status"]["message"]


def test_all_bad_group_annotations_are_listed() -> None:
    got = admit_group(
        pod({**GROUP, "gpufabric.io/group-size": "-1", "gpufabric.io/group-level": "x"}), "CREATE"
    )
    assert [p.split(":")[0] for p in got.problems] == [
        "gpufabric.io/group-size",
        "gpufabric.io/group-level",
    ]


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (
            "gpufabric.io/group-size",
            "gpufabric.io/group-size: needs gpufabric.io/group (the group's name) as well",
        ),
        (
            "gpufabric.io/group-locality",
            "gpufabric.io/group-locality: needs gpufabric.io/group (the group's name) as well",
        ),
        (
            "gpufabric.io/group-level",
            "gpufabric.io/group-level: needs gpufabric.io/group (the group's name) as well",
        ),
        (
            "gpufabric.io/placement",
            "gpufabric.io/placement: written by the group placer; remove it from the pod",
        ),
    ],
)
def test_any_group_annotation_without_the_name_is_denied(key: str, problem: str) -> None:
    # Each one alone: a pod with none of them is answered before the checks are read.
    got = admit_group(pod({key: "4", "gpufabric.io/rdma": "required"}), "CREATE")
    assert got.problems == [problem] and got.ops == [] and got.spec is None


def test_pods_without_group_annotations_get_nothing_from_the_group_checks() -> None:
    for p in (pod({"gpufabric.io/rdma": "required"}), pod(), {"metadata": []}, {}):
        for operation in ("CREATE", "UPDATE"):
            got = admit_group(p, operation)
            assert (got.ops, got.problems, got.warnings, got.spec) == ([], [], [], None)
    assert admit_group(pod({"gpufabric.io/placement": "leaf=l1"}), "UPDATE").problems == []


def test_kueue_pods_are_left_to_kueue() -> None:
    by_gate = pod(GROUP)
    by_gate["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    by_label = pod(GROUP)
    by_label["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    for p in (by_gate, by_label):
        got = admit_group(p, "CREATE")
        assert got.ops == [] and got.problems == [] and "Kueue" in got.warnings[0]


def test_group_larger_than_any_spine_is_admitted_with_a_warning() -> None:
    got = admit_group(pod(GROUP), "CREATE", largest_domain_gpus=lambda: 64, pod_gpus=8)
    assert got.ops and got.warnings == [
        "gpufabric: group llama-70b needs 128 GPUs, more than the largest spine domain (64); "
        "it can only be spread and, being required, waits"
    ]


def test_label_that_disagrees_is_denied() -> None:
    p = pod(GROUP)
    p["metadata"]["labels"] = {"gpufabric.io/group": "other"}
    assert "differs" in admit_group(p, "CREATE").problems[0]


def test_update_adds_no_gate() -> None:
    assert admit_group(pod(GROUP), "UPDATE").ops == []


def test_admission_warns_when_the_group_exceeds_the_largest_spine_of_the_gpufabric() -> None:
    from webhook.fabric.controller import FabricController
    from webhook.groups.admission.spines import SpineSizes, most_gpus_in

    cache = golden_cache()
    most = most_gpus_in(cache)()
    assert most == 8  # the golden hosts' fullest node
    fabric = FabricController()  # the object the labeler publishes: one spine of 2 nodes
    fabric.configmap(
        {"topology.conf": "SwitchName=l1 Nodes=hgx-h100,azure-ndv5\nSwitchName=s1 Switches=l1\n"}
    )
    _, fabric_obj = fabric.refresh()
    assert fabric_obj is not None
    spines = SpineSizes()
    spines.listed([fabric_obj])
    largest = spines.largest(most_gpus_in(cache))
    assert largest == 16
    settings = Settings(largest_spine_gpus=lambda: spines.largest(most_gpus_in(cache)))
    answer = admit(
        review(pod({**GROUP, "gpufabric.io/group-size": "3"}))["request"], cache, settings
    )
    assert answer.response["allowed"] is True
    assert (
        "gpufabric: group llama-70b needs 24 GPUs, more than the largest spine domain (16); "
        "it can only be spread and, being required, waits"
    ) in answer.response["warnings"]
    ok = admit(review(pod({**GROUP, "gpufabric.io/group-size": "2"}))["request"], cache, settings)
    assert not any("spine" in w for w in ok.response.get("warnings") or [])
    spines.event("DELETED", fabric_obj)
    assert spines.largest(most_gpus_in(cache)) is None


def test_without_a_placer_the_pod_is_not_gated_and_the_warning_names_it() -> None:
    # Nothing would ever lift the gate (issue 17 item 3): admit ungated, say why.
    p = pod(GROUP)
    answer = admit(review(p)["request"], golden_cache(), Settings(placer=False))
    assert answer.response["allowed"] is True
    patched = _apply(p, _ops(answer))
    assert "schedulingGates" not in patched["spec"]
    assert patched["metadata"]["labels"] == {"gpufabric.io/group": "llama-70b"}
    (warning,) = answer.response["warnings"]
    assert "no group placer runs" in warning and "--placer" in warning

"""The ValidatingAdmissionPolicy that confines the placer's pod patches, evaluated with CEL the
way the API server does (variables, then validations), against the placer's real patch."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import jsonpatch
import pytest

from tests.manifests import find, render
from tests.webhook.groups.fabric import gpu_pod
from webhook.groups.enforce import place_ops

PLACER = "system:serviceaccount:gpufabric-system:gpufabric-webhook"


def policy_failures(old: dict[str, Any], new: dict[str, Any], user: str = PLACER) -> list[str]:
    spec = find(render(), "ValidatingAdmissionPolicy", "gpufabric-placer-pods")["spec"]
    env = celpy.Environment()
    act: dict[str, Any] = {
        "request": celpy.json_to_cel({"operation": "UPDATE", "userInfo": {"username": user}}),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
    }
    if not bool(env.program(env.compile(spec["matchConditions"][0]["expression"])).evaluate(act)):
        return []
    variables: dict[str, Any] = {}
    for var in spec["variables"]:
        variables[var["name"]] = env.program(env.compile(var["expression"])).evaluate(
            {**act, "variables": celpy.json_to_cel(variables)}
        )
    act["variables"] = celpy.json_to_cel(variables)
    return [
        v["message"].strip()
        for v in spec["validations"]
        if not bool(env.program(env.compile(v["expression"])).evaluate(act))
    ]


AFF = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "gpufabric.io/rdma", "operator": "In", "values": ["true"]}
                    ]
                }
            ]
        }
    }
}


def gated() -> dict[str, Any]:
    pod = gpu_pod("w-0", group="llama", size=2, gated=True, affinity=copy.deepcopy(AFF))
    pod["spec"]["schedulingGates"].insert(0, {"name": "example.com/quota"})
    return pod


def placed(pod: dict[str, Any]) -> dict[str, Any]:
    ops = place_ops(pod, "leaf-pair", "pair-3")
    assert ops is not None
    out: dict[str, Any] = jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod))
    return out


def test_the_placers_own_patch_is_allowed() -> None:
    old = gated()
    assert policy_failures(old, placed(old)) == []
    fresh = gpu_pod("w-1", group="llama", size=2, gated=True)  # no affinity at all before
    assert policy_failures(fresh, placed(fresh)) == []


def _edit(path: str, value: Any) -> dict[str, Any]:
    new = placed(gated())
    target = new
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[k] if not k.isdigit() else target[int(k)]  # type: ignore[index]
    target[keys[-1]] = value
    return new


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (_edit("spec.schedulingGates", []), "remove only the gpufabric.io/group scheduling gate"),
        (
            _edit("metadata.labels", {"gpufabric.io/group": "llama", "x": "y"}),
            "may not change labels",
        ),
        (
            _edit("metadata.annotations", {"gpufabric.io/placement": "leaf=a", "other": "1"}),
            "write only the gpufabric.io/placement annotation",
        ),
        (
            _edit("spec.containers", [{"name": "main", "image": "evil", "resources": {}}]),
            "may not change images",
        ),
        (
            _edit("spec.tolerations", [{"operator": "Exists"}]),
            "may not change tolerations, nodeSelector or activeDeadlineSeconds",
        ),
        (
            _edit(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": ["n1"],
                                }
                            ]
                        }
                    ]
                },
            ),
            "add to the required node affinity only",
        ),
        (
            _edit(
                "spec.affinity.podAntiAffinity",
                {"requiredDuringSchedulingIgnoredDuringExecution": []},
            ),
            "may change only the required node affinity",
        ),
    ],
    ids=[
        "other-gate",
        "label",
        "annotation",
        "image",
        "tolerations",
        "foreign-expression",
        "pod-anti-affinity",
    ],
)
def test_anything_else_is_denied(new: dict[str, Any], message: str) -> None:
    failures = policy_failures(gated(), new)
    assert any(message in f for f in failures), failures


def test_other_identities_are_not_matched() -> None:
    old = gated()
    assert (
        policy_failures(old, _edit("metadata.labels", {}), user="system:serviceaccount:x:y") == []
    )

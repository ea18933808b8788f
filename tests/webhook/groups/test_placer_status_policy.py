"""The ValidatingAdmissionPolicy gpufabric-placer-pod-status, evaluated with CEL the way the API
server does (the shipped YAML, rendered): the placer's own pods/status patch, status.nominatedNodeName
of a pending member set, changed or cleared, passes; the status of a bound pod, any other status
field, a label, annotation or finalizer (a status update may change them), and a value that is no
node name are denied; other identities are not its concern. tests/e2e/test_denied.py checks the
same as installed, and KEPT against the live API server's Pod schema."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.manifests import find, render
from tests.webhook.groups.test_placer_policy import PLACER, policy_failures

POLICY = "gpufabric-placer-pod-status"
NOMINATED = "nominatedNodeName"
Pod = dict[str, Any]

# Every field of the 1.36 PodStatus but nominatedNodeName, each with a value a pending member
# does not have: the placer may change none of them.
KEPT: dict[str, Any] = {
    "phase": "Running",
    "conditions": [{"type": "Ready", "status": "True"}],
    "message": "evicted",
    "reason": "Evicted",
    "hostIP": "10.0.0.1",
    "hostIPs": [{"ip": "10.0.0.1"}],
    "podIP": "10.1.0.1",
    "podIPs": [{"ip": "10.1.0.1"}],
    "startTime": "2026-01-01T00:00:00Z",
    "initContainerStatuses": [{"name": "init", "ready": True, "restartCount": 0}],
    "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0}],
    "ephemeralContainerStatuses": [{"name": "debug", "ready": False, "restartCount": 0}],
    "qosClass": "Guaranteed",
    "observedGeneration": 2,
    "resize": "InProgress",
    "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-0-gpus"}],
    "extendedResourceClaimStatus": {"resourceClaimName": "train-0-extended", "requestMappings": []},
    "nodeAllocatableResourceClaimStatuses": [{"resourceClaimName": "train-0-node"}],
    "allocatedResources": {"cpu": "1"},
    "resources": {"limits": {"cpu": "1"}},
}


def pending(nominated: str | None = None) -> Pod:
    """A native gang's member as the placer finds it: gated, pending, maybe nominated."""
    pod: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "team-a",
            "labels": {"app": "train"},
            "annotations": {"gpufabric.io/group": "train", "gpufabric.io/group-size": "2"},
        },
        "spec": {
            "containers": [{"name": "main", "image": "trainer"}],
            "schedulingGates": [{"name": "gpufabric.io/group"}],
            "schedulingGroup": {"podGroupName": "gpufabric-train"},
        },
        "status": {
            "phase": "Pending",
            "qosClass": "BestEffort",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ],
        },
    }
    if nominated is not None:
        pod["status"][NOMINATED] = nominated
    return pod


def nominated(old: Pod, node: str | None) -> Pod:
    """`old` after the placer's merge patch: the node set, or the field removed (None)."""
    new = copy.deepcopy(old)
    new["status"].pop(NOMINATED, None)
    if node is not None:
        new["status"][NOMINATED] = node
    return new


def denied(old: Pod, new: Pod, message: str) -> None:
    failures = policy_failures(old, new, policy=POLICY)
    assert any(message in f for f in failures), failures


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, "gpu-0017"),
        (None, "node-1.rack-3.example.com"),
        (None, "a" * 253),
        ("gpu-0017", "gpu-0042"),
        ("gpu-0017", None),
        ("gpu-0017", ""),
    ],
    ids=["set", "set-dotted", "set-longest", "changed", "removed", "emptied"],
)
def test_the_placers_nomination_of_a_pending_member_passes(
    before: str | None, after: str | None
) -> None:
    old = pending(before)
    assert policy_failures(old, nominated(old, after), policy=POLICY) == []


def test_a_bound_pods_status_is_denied() -> None:
    old = pending()
    old["spec"]["nodeName"] = "gpu-0017"
    del old["spec"]["schedulingGates"]
    for node in ("gpu-0042", None):
        denied(old, nominated(old, node), "may not write the status of a pod already bound")


@pytest.mark.parametrize(
    "node",
    ["GPU-1", "gpu_1", "-gpu", "gpu-", "gpu..1", ".gpu", "gpu 1", "gpu/1", "a" * 254],
    ids=[
        "upper",
        "underscore",
        "leading-dash",
        "trailing-dash",
        "empty-label",
        "leading-dot",
        "space",
        "slash",
        "too-long",
    ],
)
def test_a_nomination_that_is_no_node_name_is_denied(node: str) -> None:
    old = pending()
    denied(old, nominated(old, node), "only to a node name")


@pytest.mark.parametrize("field", list(KEPT))
def test_every_other_status_field_is_kept(field: str) -> None:
    old = pending()
    new = nominated(old, "gpu-0017")
    new["status"][field] = KEPT[field]
    denied(old, new, "may change only status.nominatedNodeName")
    if field in old["status"]:  # removed
        del new["status"][field]
        denied(old, new, "may change only status.nominatedNodeName")


def _label(pod: Pod) -> None:
    pod["metadata"]["labels"]["app"] = "other"


def _annotation(pod: Pod) -> None:
    pod["metadata"]["annotations"]["gpufabric.io/rank"] = "0"


def _dropped_annotation(pod: Pod) -> None:
    del pod["metadata"]["annotations"]["gpufabric.io/group-size"]


def _finalizer(pod: Pod) -> None:
    pod["metadata"]["finalizers"] = ["example.com/keep"]


METADATA: list[Callable[[Pod], None]] = [_label, _annotation, _dropped_annotation, _finalizer]


@pytest.mark.parametrize("edit", METADATA, ids=[e.__name__[1:] for e in METADATA])
def test_labels_annotations_and_finalizers_are_kept(edit: Callable[[Pod], None]) -> None:
    old = pending()
    new = nominated(old, "gpu-0017")
    edit(new)
    denied(old, new, "may not change labels, annotations or finalizers")


@pytest.mark.parametrize(
    ("user", "matched"),
    [
        (PLACER, True),
        ("system:serviceaccount:gpu-ops:gpufabric-webhook", True),  # installed elsewhere
        ("system:serviceaccount:gpufabric-system:gpufabric-webhook-2", False),
        ("system:serviceaccount:gpufabric-system:gpufabric-agent", False),
        ("system:node:gpu-0017", False),  # a kubelet writes pod status
    ],
    ids=["placer", "placer-elsewhere", "similar-name", "agent", "kubelet"],
)
def test_only_the_placers_identity_is_matched(user: str, matched: bool) -> None:
    old = pending()
    new = nominated(old, "gpu-0017")
    new["status"]["phase"] = "Running"
    assert bool(policy_failures(old, new, user=user, policy=POLICY)) is matched


def test_it_is_installed_on_pods_status_and_denies() -> None:
    docs = render()
    spec = find(docs, "ValidatingAdmissionPolicy", POLICY)["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["UPDATE"],
            "resources": ["pods/status"],
        }
    ]
    binding = find(docs, "ValidatingAdmissionPolicyBinding", POLICY)["spec"]
    assert binding == {"policyName": POLICY, "validationActions": ["Deny"]}

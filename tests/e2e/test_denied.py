"""Refusals as installed: a bad fabric pod is denied through the API server (the
MutatingWebhookConfiguration, failurePolicy Fail, calls the webhook, whose denial reaches the client
naming the annotation), and the placer's own identity is held to its policies, on pods and on
pods/status."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e import install, pods
from tests.e2e.env import Env
from tests.e2e.install import NAMESPACE, WEBHOOK_ACCOUNT
from tests.e2e.waits import wait_until
from tests.webhook.groups.test_placer_status_policy import KEPT, NOMINATED, POLICY


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({"gpufabric.io/rdma": "sometimes"}, "gpufabric.io/rdma"),
        (
            {"gpufabric.io/topology": "nvlink", "gpufabric.io/min-nvlink-bandwidth-gbps": "fast"},
            "gpufabric.io/min-nvlink-bandwidth-gbps",
        ),
        (pods.group_annotations("g", 0), "gpufabric.io/group-size"),
    ],
    ids=["rdma-value", "bandwidth-not-integer", "group-size-zero"],
)
def test_bad_fabric_pod_is_denied_naming_the_annotation(
    cluster_env: Env, ns: str, annotations: dict[str, str], named: str
) -> None:
    with pytest.raises(ApiException) as denied:
        pods.create(cluster_env.core, ns, [pods.pod("bad", 8, annotations)])
    assert denied.value.status in (400, 403, 422), denied.value.body
    body = str(denied.value.body)
    assert 'admission webhook \\"pods.gpufabric.io\\" denied the request' in body, body
    assert named in body, body
    assert not pods.listed(cluster_env.core, ns)


def test_the_placer_identity_may_not_change_what_its_policy_keeps(
    cluster_env: Env, ns: str
) -> None:
    """The installed ValidatingAdmissionPolicy binds the webhook's ServiceAccount: a pod update
    outside what the placer sends (here a label) is refused with the policy's message."""
    pods.create(cluster_env.core, ns, [pods.pod("plain", 0)])
    token = cluster_env.cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    with cluster_env.cluster.client(token) as placer, pytest.raises(ApiException) as refused:
        client.CoreV1Api(placer).patch_namespaced_pod(
            "plain", ns, {"metadata": {"labels": {"team": "other"}}}
        )
    assert refused.value.status == 422, refused.value.body
    assert "gpufabric-placer-pods" in str(refused.value.body), refused.value.body
    assert "may not change labels" in str(refused.value.body), refused.value.body


def test_the_placer_identity_may_write_only_a_pending_pods_nominated_node(
    cluster_env: Env, ns: str
) -> None:
    """pods/status as installed (the placer's RBAC, the policy gpufabric-placer-pod-status): the
    placer's nomination of a gated pending pod is admitted; another status field, a label, or a
    bound pod's status is refused with the policy's message."""
    gated = pods.pod("gated", 0)
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    bound = pods.pod("bound", 0)
    bound["spec"]["nodeName"] = "nowhere"
    pods.create(cluster_env.core, ns, [gated, bound])

    def status_of(name: str) -> client.V1PodStatus:
        status = cluster_env.core.read_namespaced_pod_status(name, ns).status
        assert status is not None
        return status

    token = cluster_env.cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    with cluster_env.cluster.client(token) as api:
        placer = client.CoreV1Api(api)

        def patch(name: str, body: dict[str, Any]) -> None:
            placer.patch_namespaced_pod_status(name, ns, body, field_manager="gpufabric-placer")

        patch("gated", {"status": {NOMINATED: "gpu-0017"}})
        assert status_of("gated").nominated_node_name == "gpu-0017"
        refusals: list[tuple[str, dict[str, Any], str]] = [
            ("gated", {"status": {"phase": "Running"}}, "may change only status.nominatedNodeName"),
            (
                "gated",
                {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                "may change only status.nominatedNodeName",
            ),
            ("gated", {"metadata": {"labels": {"team": "x"}}}, "may not change labels"),
            ("bound", {"status": {NOMINATED: None}}, "status of a pod already bound"),
        ]
        for name, body, message in refusals:
            with pytest.raises(ApiException) as refused:
                patch(name, body)
            assert refused.value.status == 422, refused.value.body
            assert f"ValidatingAdmissionPolicy '{POLICY}'" in str(refused.value.body), body
            assert message in str(refused.value.body), refused.value.body
        # Nominating a bound pod: the API server's own validation refuses it before the policy.
        with pytest.raises(ApiException) as refused:
            patch("bound", {"status": {NOMINATED: "gpu-0017"}})
        assert refused.value.status == 422, refused.value.body
    assert status_of("gated").phase == "Pending"


def test_the_status_policy_keeps_every_other_field_of_the_live_pod_schema(
    cluster_env: Env,
) -> None:
    """The policy lists the status fields it keeps: a Kubernetes release that adds one fails here
    until the policy keeps it too."""
    served = json.loads(cluster_env.cluster.kubectl("get", "--raw", "/openapi/v3/api/v1"))
    status = served["components"]["schemas"]["io.k8s.api.core.v1.PodStatus"]["properties"]
    assert set(status) - {NOMINATED} == set(KEPT)


def test_every_shipped_policy_type_checks_on_the_api_server(cluster_env: Env) -> None:
    """kube-controller-manager's validatingadmissionpolicy-status-controller type-checks each
    policy against the served schemas and reports what does not check in
    status.typeChecking.expressionWarnings (an expression mixing types, e.g. an object and `{}` in
    a ternary, still evaluates, but is reported). The server type-checks only policies matching
    whole resources: those matching a subresource (gpufabric-placer-pod-status on pods/status) are
    not checked and report nothing here."""
    shipped = sorted(
        d["metadata"]["name"]
        for d in install.rendered(cluster_env.cluster)
        if d["kind"] == "ValidatingAdmissionPolicy"
    )
    assert shipped, "daemonset/base ships no ValidatingAdmissionPolicy"
    api = client.AdmissionregistrationV1Api(cluster_env.admin)

    def checked(name: str) -> client.V1ValidatingAdmissionPolicyStatus | None:
        """The policy's status once the controller has looked at its current generation."""
        policy: client.V1ValidatingAdmissionPolicy = api.read_validating_admission_policy(name)
        status = policy.status
        meta = policy.metadata
        seen = (
            status is not None
            and meta is not None
            and status.observed_generation == meta.generation
        )
        return status if seen else None

    reported = []
    for name in shipped:
        status = wait_until(functools.partial(checked, name), 60, f"policy {name} type-checked")
        typed = status.type_checking
        warnings = typed.expression_warnings if typed is not None else None
        reported += [f"{name} {w.field_ref}: {w.warning}" for w in warnings or []]
    assert not reported, "\n".join(reported)
